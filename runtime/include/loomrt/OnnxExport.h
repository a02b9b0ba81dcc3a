//===- OnnxExport.h - Write trained weights back into an ONNX model -------===//
//
// Built from its own translation unit, and only where libonnx (onnx_proto)
// and protobuf are found: the GPU machines the runtime targets may lack them.
// Without them onnxExportSupported() is false and exportOnnx fails saying so.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ONNXEXPORT_H
#define LOOMRT_ONNXEXPORT_H

#include "loomrt/Npy.h"

#include <map>
#include <string>
#include <vector>

namespace loomrt {

/// True if this build can write ONNX files.
bool onnxExportSupported() noexcept;

/// Reads the ONNX model `sourcePath`, replaces the initializer of every tensor
/// in `weights` (matched by name; dtype and shape must agree) and writes the
/// model atomically to `outPath`. Every weight must match an initializer of
/// the main graph. Replaced initializers are stored as raw_data in the file
/// (external data references of those tensors are dropped). `replaced`, if
/// non-null, receives the names replaced.
bool exportOnnx(const std::string &sourcePath, const std::string &outPath,
                const std::map<std::string, NpyArray> &weights,
                std::vector<std::string> *replaced,
                std::string *error) noexcept;

} // namespace loomrt

#endif // LOOMRT_ONNXEXPORT_H
