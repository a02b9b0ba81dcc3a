//===- fuzz_json_import.cpp - libFuzzer harness of the JSON importer ------===//
//
// The input is a graph in Loom's JSON format (docs/json-format.md): it is
// written to the harness's private directory as model.json and imported by
// loom::importJsonGraph. Two safetensors files sit beside it, written once
// at start-up and never changed, so that parameters initialized from a file
// ({"file": ..., "tensor": ...}) reach the file reader; the seeds
// (examples/json/cnn.json, test/Import/JSON/Inputs/init_file/model.json)
// name them. See test/fuzz/README.md.
//
//===----------------------------------------------------------------------===//

#include "ImporterFuzz.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

/// A safetensors file: the JSON header (padded to 8 bytes) and `dataBytes`
/// bytes of a fixed pattern.
std::vector<uint8_t> safetensors(std::string header, size_t dataBytes) {
  while (header.size() % 8 != 0)
    header.push_back(' ');
  std::vector<uint8_t> out(8 + header.size() + dataBytes);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < dataBytes; ++i)
    out[8 + header.size() + i] = static_cast<uint8_t>(i * 37 + 11) & 0x3f;
  return out;
}

const std::vector<std::string> kFixedFiles = {"weights.safetensors",
                                              "cnn_conv1.safetensors"};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  std::vector<uint8_t> weights = safetensors(
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("h":{"dtype":"F16","shape":[4],"data_offsets":[24,32]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[32,36]},)"
      R"("d":{"dtype":"F64","shape":[2],"data_offsets":[36,52]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[52,60]},)"
      R"("__metadata__":{"format":"pt"}})",
      60);
  dir.write(kFixedFiles[0].c_str(), weights.data(), weights.size());
  std::vector<uint8_t> conv = safetensors(
      R"({"conv1.weight":{"dtype":"F32","shape":[8,1,3,3],"data_offsets":[0,288]}})",
      288);
  dir.write(kFixedFiles[1].c_str(), conv.data(), conv.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::runImporter(
      data, size, "model.json",
      [](llvm::StringRef path, mlir::MLIRContext &context,
         loom::ParameterStore &params) {
        return loom::importJsonGraph(path, context, params);
      },
      kFixedFiles);
  return 0;
}
