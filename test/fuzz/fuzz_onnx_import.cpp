//===- fuzz_onnx_import.cpp - libFuzzer harness of the ONNX importer ------===//
//
// The input is an ONNX model file: it is written to the harness's private
// directory as model.onnx and imported by loom::importOnnxModel (protobuf
// parsing, ONNX's checker, the version converter for opsets below 13, shape
// inference, then Loom's conversion). See test/fuzz/README.md.
//
//===----------------------------------------------------------------------===//

#include "ImporterFuzz.h"

#include <google/protobuf/stubs/logging.h>

#include <iostream>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // protobuf logs about malformed messages on stderr; the importer already
  // reports them as diagnostics, which the harness swallows.
  google::protobuf::SetLogHandler(nullptr);
  // ONNX's checker writes warnings ("Model contains experimental ops") to
  // std::cerr. Dropping the C++ streams leaves fd 2 to the sanitizers and
  // libFuzzer, whose reports are written there directly.
  std::cerr.rdbuf(nullptr);
  std::cout.rdbuf(nullptr);
  loomfuzz::TempDir::get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::runImporter(
      data, size, "model.onnx",
      [](llvm::StringRef path, mlir::MLIRContext &context,
         loom::ParameterStore &params) {
        return loom::importOnnxModel(path, context, params);
      });
  return 0;
}
