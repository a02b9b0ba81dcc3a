//===- fuzz_npz.cpp - libFuzzer harness of the runtime's .npz reader ------===//
//
// The input is an .npz archive (a zip of .npy members, stored or deflated,
// zip64 included): it is written to the harness's private directory and read
// by loomrt::readNpz, which checks the central directory, every local header
// and CRC-32, and decodes each member. Every array that comes back must have
// the byte size of its dtype and shape; a failure must come with a message
// and an error code.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "loomrt/Npy.h"

#include <optional>

using namespace loomrt;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loomfuzz::TempDir::get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  int fdBefore = loomfuzz::lowestFreeFd();
  std::string path = dir.write("input.npz", data, size);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  std::optional<std::map<std::string, NpyArray>> arrays =
      readNpz(path, &error, &code);
  dir.removeInput("input.npz");
  if (!arrays) {
    if (error.empty() || code == ErrorCode::Ok)
      loomfuzz::fail("a failure came back without a message or code");
  } else {
    for (const auto &[name, array] : *arrays) {
      std::optional<uint64_t> bytes = checkedByteSize(array.dtype, array.shape);
      if (!bytes || *bytes != array.data.size())
        loomfuzz::fail("an array's data does not match its dtype and shape");
    }
  }
  loomfuzz::checkNoFdLeak(fdBefore);
  return 0;
}
