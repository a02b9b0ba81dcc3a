//===- fuzz_npy.cpp - libFuzzer harness of the runtime's .npy reader ------===//
//
// The input is a .npy file. It is parsed from memory (loomrt::parseNpy) and
// read from the harness's private directory (loomrt::readNpy, which decodes
// in place); both must agree. An array that parses must have the byte size
// of its dtype and shape, and must survive encodeNpy -> parseNpy unchanged.
// A failure must come with a message and an error code.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "loomrt/Npy.h"

#include <optional>

using namespace loomrt;

namespace {

bool sameArray(const NpyArray &a, const NpyArray &b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.data == b.data;
}

void checkFailure(const std::string &error, ErrorCode code) {
  if (error.empty() || code == ErrorCode::Ok)
    loomfuzz::fail("a failure came back without a message or code");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loomfuzz::TempDir::get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  int fdBefore = loomfuzz::lowestFreeFd();

  std::string error;
  ErrorCode code = ErrorCode::Ok;
  std::optional<NpyArray> parsed = parseNpy(data, size, "input", &error, &code);
  if (!parsed)
    checkFailure(error, code);

  std::string path = dir.write("input.npy", data, size);
  std::string fileError;
  ErrorCode fileCode = ErrorCode::Ok;
  std::optional<NpyArray> read = readNpy(path, &fileError, &fileCode);
  dir.removeInput("input.npy");
  if (!read)
    checkFailure(fileError, fileCode);
  if (parsed.has_value() != read.has_value())
    loomfuzz::fail("parseNpy and readNpy disagree on whether the file is valid");
  if (!parsed) {
    if (code != fileCode)
      loomfuzz::fail("parseNpy and readNpy report different error codes");
    loomfuzz::checkNoFdLeak(fdBefore);
    return 0;
  }
  if (!sameArray(*parsed, *read))
    loomfuzz::fail("parseNpy and readNpy return different arrays");

  std::optional<uint64_t> bytes = checkedByteSize(parsed->dtype, parsed->shape);
  if (!bytes || *bytes != parsed->data.size())
    loomfuzz::fail("an array's data does not match its dtype and shape");

  std::optional<std::vector<uint8_t>> encoded =
      encodeNpy(*parsed, &error, &code);
  if (!encoded)
    loomfuzz::fail("encodeNpy refused an array parseNpy returned");
  std::optional<NpyArray> again =
      parseNpy(encoded->data(), encoded->size(), "encoded", &error, &code);
  if (!again || !sameArray(*parsed, *again))
    loomfuzz::fail("encodeNpy -> parseNpy does not round-trip");
  loomfuzz::checkNoFdLeak(fdBefore);
  return 0;
}
