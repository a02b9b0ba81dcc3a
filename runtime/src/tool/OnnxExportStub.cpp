//===- OnnxExportStub.cpp - ONNX export in builds without libonnx ---------===//

#include "loomrt/OnnxExport.h"

namespace loomrt {

bool onnxExportSupported() noexcept { return false; }

bool exportOnnx(const std::string &, const std::string &,
                const std::map<std::string, NpyArray> &,
                std::vector<std::string> *, std::string *error) noexcept {
  if (error) {
    try {
      *error = "this loom-run was built without ONNX support (libonnx and "
               "protobuf were not found when it was configured)";
    } catch (...) {
    }
  }
  return false;
}

} // namespace loomrt
