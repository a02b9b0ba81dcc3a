//===- SafetensorsValidationTest.cpp - Malformed files give clear errors --===//
//
// Every malformed input must produce an error that names the file and, where
// there is one, the tensor; none may crash. The truncation and mutation sweeps
// at the end are cheap fuzzing of the same promise.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <string>
#include <unistd.h>

using namespace loomrt;
using namespace loomrt::test;

namespace {

class SafetensorsValidationTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(dir.ok()); }

  /// Writes `bytes` to a file, opens it, expects failure with `code`, and
  /// returns the message with the "<path>: " prefix checked and removed.
  std::string openError(const std::string &bytes,
                        ErrorCode expectedCode = ErrorCode::Format) {
    std::string path = dir.file("t.safetensors");
    writeBytes(path, bytes);
    return openPathError(path, expectedCode);
  }

  std::string openPathError(const std::string &path, ErrorCode expectedCode) {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    auto file = SafetensorsFile::open(path, &error, &code);
    EXPECT_EQ(file, nullptr);
    EXPECT_EQ(code, expectedCode) << error;
    std::string prefix = path + ": ";
    EXPECT_EQ(error.rfind(prefix, 0), 0u) << error;
    return error.rfind(prefix, 0) == 0 ? error.substr(prefix.size()) : error;
  }

  TempDir dir;
};

/// A header with one tensor entry `name` described by `entry` (JSON text).
std::string one(const std::string &entry, const std::string &name = "w") {
  return "{\"" + name + "\":" + entry + "}";
}

// A function, not a macro, so `haystack` (which opens a file) runs once.
void expectContains(const std::string &haystack, const std::string &needle,
                    int line) {
  EXPECT_NE(haystack.find(needle), std::string::npos)
      << "line " << line << ": \"" << needle << "\" not in: " << haystack;
}
#define EXPECT_CONTAINS(haystack, needle)                                      \
  expectContains((haystack), (needle), __LINE__)

} // namespace

TEST_F(SafetensorsValidationTest, TheBriefsExampleMessage) {
  std::string path = dir.file("params.safetensors");
  writeBytes(path, rawFile(one(R"({"dtype":"F32","shape":[25],)"
                               R"("data_offsets":[0,100]})",
                               "fc1.weight"),
                           std::string(64, '\0')));
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(path, &error), nullptr);
  EXPECT_EQ(error, path + ": tensor 'fc1.weight': data_offsets [0, 100) "
                          "exceed buffer of 64 bytes");
}

TEST_F(SafetensorsValidationTest, MissingFileAndDirectoryAreIOErrors) {
  EXPECT_CONTAINS(openPathError(dir.file("nope"), ErrorCode::IO),
                  "cannot open: No such file or directory");
  EXPECT_CONTAINS(openPathError(dir.path(), ErrorCode::IO),
                  "not a regular file");
}

TEST_F(SafetensorsValidationTest, TooSmallForTheLength) {
  EXPECT_EQ(openError(""), "file is 0 bytes, too small for the 8-byte header "
                           "length (truncated or not a safetensors file)");
  EXPECT_CONTAINS(openError(std::string("\x05\0\0\0", 4)), "file is 4 bytes");
}

TEST_F(SafetensorsValidationTest, HeaderSizeLargerThanTheFile) {
  EXPECT_EQ(openError(lengthPrefix(1000) + "{}"),
            "header size 1000 exceeds the 2 bytes after the 8-byte length "
            "(truncated or not a safetensors file)");
  // All bits set: must not wrap around in any size computation.
  EXPECT_CONTAINS(openError(lengthPrefix(~uint64_t(0)) + "{}"),
                  "header size 18446744073709551615 exceeds the 2 bytes");
}

TEST_F(SafetensorsValidationTest, HeaderSizeOverTheLimit) {
  // A sparse file: a 100 MB + 8 header claim backed by real (zero) bytes,
  // without writing 100 MB to disk.
  std::string path = dir.file("huge.safetensors");
  uint64_t claimed = kSafetensorsMaxHeaderSize + 8;
  writeBytes(path, lengthPrefix(claimed) + "{}");
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(8 + claimed)), 0);
  EXPECT_EQ(openPathError(path, ErrorCode::Format),
            "header size 100000008 exceeds the limit of 100000000 bytes");
}

TEST_F(SafetensorsValidationTest, HeaderThatIsNotJson) {
  EXPECT_CONTAINS(openError(rawFile("{not json}", "")),
                  "header is not valid JSON: parse error at line 1, column 3: "
                  "syntax error while parsing object key");
  EXPECT_CONTAINS(openError(rawFile("{}x", "")), "header is not valid JSON");
  // The JSON parser would stop at a NUL; the format allows only spaces.
  EXPECT_EQ(openError(rawFile(std::string("{}\0\0", 4), "")),
            "header contains a NUL byte at offset 2");
  EXPECT_CONTAINS(openError(rawFile("{\"a\":\"\xff\"}", "")),
                  "header is not valid JSON");
  EXPECT_EQ(openError(rawFile(" {}", "")),
            "header does not start with '{' (not a safetensors file?)");
  EXPECT_EQ(openError(rawFile("[]", "")),
            "header does not start with '{' (not a safetensors file?)");
  EXPECT_EQ(openError(rawFile("", "")),
            "header does not start with '{' (not a safetensors file?)");
}

TEST_F(SafetensorsValidationTest, DuplicateKeys) {
  std::string entry = R"({"dtype":"I8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_EQ(openError(rawFile("{\"w\":" + entry + ",\"w\":" + entry + "}",
                              std::string(1, '\0'))),
            "tensor 'w' appears twice in the header");
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":"I8","dtype":"I8",)"
                                  R"("shape":[1],"data_offsets":[0,1]})"),
                              std::string(1, '\0'))),
            "duplicate key 'dtype' in the header");
}

TEST_F(SafetensorsValidationTest, BadDTypes) {
  std::string rest = R"("shape":[1],"data_offsets":[0,4]})";
  std::string data(4, '\0');
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":"F33",)" + rest), data)),
            "tensor 'w': unknown dtype 'F33' (supported: F64, F32, F16, BF16, "
            "I64, I32, I16, I8, U8, BOOL)");
  EXPECT_CONTAINS(openError(rawFile(one(R"({"dtype":"f32",)" + rest), data)),
                  "tensor 'w': unknown dtype 'f32'");
  // Real safetensors dtypes that Loom does not handle are Unsupported.
  EXPECT_CONTAINS(openError(rawFile(one(R"({"dtype":"F8_E4M3",)" + rest), data),
                            ErrorCode::Unsupported),
                  "tensor 'w': unsupported dtype 'F8_E4M3'");
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":7,)" + rest), data)),
            "tensor 'w': 'dtype' must be a string, got number");
  EXPECT_EQ(openError(rawFile(one("{" + rest), data)),
            "tensor 'w': missing 'dtype'");
}

TEST_F(SafetensorsValidationTest, BadShapes) {
  auto withShape = [](const std::string &shape) {
    return one(R"({"dtype":"I8","shape":)" + shape +
               R"(,"data_offsets":[0,1]})");
  };
  std::string data(1, '\0');
  EXPECT_EQ(openError(rawFile(withShape("[-1]"), data)),
            "tensor 'w': shape[0] is -1; dimensions must be non-negative "
            "64-bit integers");
  EXPECT_CONTAINS(openError(rawFile(withShape("[1, 2.5]"), data)),
                  "tensor 'w': shape[1] is 2.5;");
  EXPECT_CONTAINS(openError(rawFile(withShape("[\"1\"]"), data)),
                  "tensor 'w': shape[0] is \"1\";");
  EXPECT_CONTAINS(openError(rawFile(withShape("[18446744073709551615]"), data)),
                  "tensor 'w': shape[0] is 18446744073709551615;");
  EXPECT_EQ(openError(rawFile(withShape("7"), data)),
            "tensor 'w': 'shape' must be an array, got number");
  EXPECT_EQ(
      openError(rawFile(one(R"({"dtype":"I8","data_offsets":[0,1]})"), data)),
      "tensor 'w': missing 'shape'");
}

TEST_F(SafetensorsValidationTest, ShapeWhoseSizeOverflows) {
  // 2^32 * 2^32 elements overflow int64; 2^61 * 8 bytes overflow uint64.
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":"F32",)"
                                  R"("shape":[4294967296,4294967296],)"
                                  R"("data_offsets":[0,0]})"),
                              "")),
            "tensor 'w': shape [4294967296, 4294967296] of f32 has a byte "
            "size that overflows 64 bits");
  EXPECT_CONTAINS(openError(rawFile(one(R"({"dtype":"F64",)"
                                        R"("shape":[2305843009213693952],)"
                                        R"("data_offsets":[0,0]})"),
                                    "")),
                  "overflows 64 bits");
  // A zero dimension makes any other dimension harmless.
  std::string path = dir.file("zero.safetensors");
  writeBytes(path, rawFile(one(R"({"dtype":"F64",)"
                               R"("shape":[0,9223372036854775807],)"
                               R"("data_offsets":[0,0]})"),
                           ""));
  std::string error;
  EXPECT_NE(SafetensorsFile::open(path, &error), nullptr) << error;
}

TEST_F(SafetensorsValidationTest, BadDataOffsets) {
  auto withOffsets = [](const std::string &offsets) {
    return one(R"({"dtype":"I8","shape":[4],"data_offsets":)" + offsets + "}");
  };
  std::string data(4, '\0');
  const char *malformed[] = {"[0]",     "[0,4,8]", "[-1,3]",
                             "[0,4.0]", "\"0,4\"", "{}"};
  for (const char *offsets : malformed)
    EXPECT_CONTAINS(openError(rawFile(withOffsets(offsets), data)),
                    "tensor 'w': 'data_offsets' must be [begin, end] with "
                    "non-negative integers, got ");
  EXPECT_EQ(openError(rawFile(withOffsets("[4,0]"), data)),
            "tensor 'w': data_offsets [4, 0) end before they begin");
  EXPECT_EQ(openError(rawFile(withOffsets("[0,5]"), data)),
            "tensor 'w': data_offsets [0, 5) exceed buffer of 4 bytes");
  EXPECT_EQ(openError(rawFile(withOffsets("[0,18446744073709551615]"), data)),
            "tensor 'w': data_offsets [0, 18446744073709551615) exceed buffer "
            "of 4 bytes");
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":"I8","shape":[4]})"), data)),
            "tensor 'w': missing 'data_offsets'");
}

TEST_F(SafetensorsValidationTest, OffsetsThatDisagreeWithTheShape) {
  EXPECT_EQ(openError(rawFile(one(R"({"dtype":"F32","shape":[3],)"
                                  R"("data_offsets":[0,8]})"),
                              std::string(8, '\0'))),
            "tensor 'w': data_offsets [0, 8) hold 8 bytes, but shape [3] of "
            "f32 needs 12");
  EXPECT_CONTAINS(openError(rawFile(one(R"({"dtype":"BF16","shape":[],)"
                                        R"("data_offsets":[0,0]})"),
                                    "")),
                  "hold 0 bytes, but shape [] of bf16 needs 2");
}

TEST_F(SafetensorsValidationTest, OverlappingOffsets) {
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_EQ(openError(rawFile(header, std::string(12, '\0'))),
            "tensor 'b': data_offsets [4, 12) overlap tensor 'a' at [0, 8)");
  // Two tensors sharing the same bytes exactly is an overlap too.
  std::string alias =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  EXPECT_CONTAINS(openError(rawFile(alias, std::string(8, '\0'))),
                  "data_offsets [0, 8) overlap tensor");
  // A zero-sized tensor inside another one.
  std::string inside =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})";
  EXPECT_EQ(openError(rawFile(inside, std::string(8, '\0'))),
            "tensor 'z': data_offsets [4, 4) overlap tensor 'a' at [0, 8)");
}

TEST_F(SafetensorsValidationTest, BytesThatBelongToNoTensor) {
  std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_EQ(openError(rawFile(gap, std::string(12, '\0'))),
            "bytes [4, 8) of the buffer belong to no tensor (before tensor "
            "'b')");
  std::string tail = one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})");
  EXPECT_EQ(openError(rawFile(tail, std::string(6, '\0'))),
            "bytes [4, 6) at the end of the buffer belong to no tensor");
  EXPECT_EQ(openError(rawFile("{}", "x")),
            "bytes [0, 1) at the end of the buffer belong to no tensor");
}

TEST_F(SafetensorsValidationTest, BadMetadataAndEntries) {
  EXPECT_EQ(openError(rawFile(R"({"__metadata__":[1]})", "")),
            "__metadata__ must be an object of strings, got array");
  EXPECT_EQ(openError(rawFile(R"({"__metadata__":{"step":3}})", "")),
            "__metadata__ entry 'step' must be a string, got number");
  EXPECT_EQ(openError(rawFile(R"({"w":3})", "")),
            "tensor 'w': entry must be an object, got number");
  EXPECT_EQ(openError(rawFile("{\"line\\nbreak\":null}", "")),
            "tensor 'line\\nbreak': entry must be an object, got null");
}

TEST_F(SafetensorsValidationTest, EveryTruncationFailsCleanly) {
  SafetensorsWriter writer;
  float weights[6] = {1, 2, 3, 4, 5, 6};
  int64_t step = 7;
  writer.add("fc1.weight", DType::F32, {2, 3}, weights, sizeof(weights));
  writer.add("empty", DType::F16, {0}, nullptr, 0);
  writer.add("step", DType::I64, {}, &step, sizeof(step));
  writer.setMetadata("format", "pt");
  std::string full = dir.file("full.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(full, &error)) << error;
  std::string bytes = readBytes(full);

  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("truncated to " + std::to_string(length) + " bytes");
    std::string message = openError(bytes.substr(0, length));
    EXPECT_FALSE(message.empty());
  }
  // Spot-check the diagnosis at three kinds of cut.
  EXPECT_CONTAINS(openError(bytes.substr(0, 3)), "file is 3 bytes");
  EXPECT_CONTAINS(openError(bytes.substr(0, 20)), "header size");
  EXPECT_CONTAINS(openError(bytes.substr(0, bytes.size() - 4)),
                  "tensor 'step': data_offsets [24, 32) exceed buffer of 28 "
                  "bytes");
}

TEST_F(SafetensorsValidationTest, RandomMutationsNeverCrash) {
  SafetensorsWriter writer;
  float weights[4] = {1, 2, 3, 4};
  int32_t ids[3] = {1, 2, 3};
  writer.add("a", DType::F32, {2, 2}, weights, sizeof(weights));
  writer.add("b", DType::I32, {3}, ids, sizeof(ids));
  writer.setMetadata("k", "v");
  std::string path = dir.file("m.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;
  const std::string original = readBytes(path);

  // LOOMRT_FUZZ_ITERATIONS raises the count for a longer (sanitizer) run.
  int iterations = 2000;
  if (const char *env = std::getenv("LOOMRT_FUZZ_ITERATIONS"))
    iterations = std::max(1, std::atoi(env));
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    std::string bytes = original;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % bytes.size();
      // Favour digits and JSON punctuation so mutations reach the checks
      // behind the parser, not just its syntax errors.
      static const char kAlphabet[] = "0123456789[]{},:\"-. e";
      bytes[at] = rng() % 2 ? kAlphabet[rng() % (sizeof(kAlphabet) - 1)]
                            : static_cast<char>(rng());
    }
    writeBytes(path, bytes);
    ErrorCode code = ErrorCode::Ok;
    auto file = SafetensorsFile::open(path, &error, &code);
    if (!file) {
      ASSERT_NE(code, ErrorCode::Ok);
      ASSERT_EQ(error.rfind(path + ": ", 0), 0u) << error;
      continue;
    }
    ++accepted;
    // Whatever was accepted must describe memory inside the file.
    uint64_t total = 0;
    for (const TensorView &t : file->tensors()) {
      ASSERT_EQ(checkedByteSize(t.dtype, t.shape), t.nbytes);
      total += t.nbytes;
      volatile uint8_t sink = 0;
      for (size_t i = 0; i < t.nbytes; ++i)
        sink = sink + t.data[i];
    }
    ASSERT_LE(total, file->fileSize());
  }
  // Mutating only the data bytes leaves a valid file: some must pass.
  EXPECT_GT(accepted, 0);
}
