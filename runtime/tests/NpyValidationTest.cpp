//===- NpyValidationTest.cpp - Malformed .npy/.npz files give clear errors ===//
//
// Every malformed input must produce an error that names the file (and the
// archive member); none may crash. Zip archives are built by hand here, with
// zlib for deflated members, so each corruption is exact. The truncation and
// mutation sweeps at the end are cheap fuzzing of the same promise.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Npy.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {

/// A .npy file built by hand: magic, version, length field, `header`
/// verbatim, `data`.
std::string npyFile(const std::string &header, const std::string &data,
                    int major = 1, int minor = 0) {
  std::string out = std::string("\x93NUMPY", 6) + char(major) + char(minor);
  size_t lengthSize = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lengthSize; ++i)
    out += static_cast<char>(header.size() >> (8 * i));
  return out + header + data;
}

std::string dictWith(const std::string &descr, const std::string &fortran,
                     const std::string &shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran +
         ", 'shape': " + shape + ", }";
}

void put16(std::string &out, uint64_t value) {
  for (int i = 0; i < 2; ++i)
    out += static_cast<char>(value >> (8 * i));
}
void put32(std::string &out, uint64_t value) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>(value >> (8 * i));
}
uint32_t get32(const std::string &bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}
void set16(std::string &bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 2; ++i)
    bytes[at + i] = static_cast<char>(value >> (8 * i));
}
void set32(std::string &bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 4; ++i)
    bytes[at + i] = static_cast<char>(value >> (8 * i));
}

uint32_t crcOf(const std::string &data) {
  return static_cast<uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef *>(data.data()),
              static_cast<uInt>(data.size())));
}

/// Raw deflate (no zlib header), as zip stores it.
std::string rawDeflate(const std::string &data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  EXPECT_EQ(
      ::deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string out(::deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef *>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(::deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  ::deflateEnd(&zs);
  return out;
}

/// One member of a hand-built zip: `stored` is written as the member's bytes;
/// the recorded sizes and CRC default to what they should be.
struct RawMember {
  std::string name;
  std::string stored;
  uint16_t method = 0;
  uint64_t size = 0; // The uncompressed size (for deflated members).
  uint32_t crc = 0;
  uint16_t flags = 0;
};

RawMember storedMember(std::string name, std::string data) {
  RawMember m;
  m.name = std::move(name);
  m.size = data.size();
  m.crc = crcOf(data);
  m.stored = std::move(data);
  return m;
}

RawMember deflatedMember(std::string name, const std::string &data) {
  RawMember m;
  m.name = std::move(name);
  m.method = 8;
  m.size = data.size();
  m.crc = crcOf(data);
  m.stored = rawDeflate(data);
  return m;
}

/// Where things landed in a hand-built archive.
struct RawZip {
  std::string bytes;
  std::vector<size_t> localOffsets;
  std::vector<size_t> centralOffsets;
  size_t centralStart = 0;
  size_t endOffset = 0;
};

/// A plain (not zip64) archive of `members`, laid out back to back.
RawZip buildZip(const std::vector<RawMember> &members) {
  RawZip zip;
  std::string central;
  for (const RawMember &m : members) {
    zip.localOffsets.push_back(zip.bytes.size());
    std::string &out = zip.bytes;
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, m.flags);
    put16(out, m.method);
    put16(out, 0);
    put16(out, 0x21);
    put32(out, m.crc);
    put32(out, m.stored.size());
    put32(out, m.size);
    put16(out, m.name.size());
    put16(out, 0);
    out += m.name + m.stored;

    put32(central, 0x02014b50);
    put16(central, 20);
    put16(central, 20);
    put16(central, m.flags);
    put16(central, m.method);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, m.crc);
    put32(central, m.stored.size());
    put32(central, m.size);
    put16(central, m.name.size());
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, zip.localOffsets.back());
    central += m.name;
  }
  zip.centralStart = zip.bytes.size();
  size_t at = zip.centralStart;
  for (const RawMember &m : members) {
    zip.centralOffsets.push_back(at);
    at += 46 + m.name.size();
  }
  zip.bytes += central;
  zip.endOffset = zip.bytes.size();
  put32(zip.bytes, 0x06054b50);
  put16(zip.bytes, 0);
  put16(zip.bytes, 0);
  put16(zip.bytes, members.size());
  put16(zip.bytes, members.size());
  put32(zip.bytes, central.size());
  put32(zip.bytes, zip.centralStart);
  put16(zip.bytes, 0);
  return zip;
}

/// A small valid .npy: f32 [2, 3], values 0..5.
std::string smallNpy() {
  std::string data;
  for (int i = 0; i < 6; ++i) {
    float value = static_cast<float>(i);
    data.append(reinterpret_cast<const char *>(&value), sizeof(value));
  }
  return npyFile(dictWith("'<f4'", "False", "(2, 3)"), data);
}

// A function, not a macro, so `haystack` (which opens a file) runs once.
void expectContains(const std::string &haystack, const std::string &needle,
                    int line) {
  EXPECT_NE(haystack.find(needle), std::string::npos)
      << "line " << line << ": \"" << needle << "\" not in: " << haystack;
}
#define EXPECT_CONTAINS(haystack, needle)                                      \
  expectContains((haystack), (needle), __LINE__)

class NpyValidationTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(dir.ok()); }

  /// Writes `bytes` as a .npy file, reads it, expects failure with `code`,
  /// and returns the message with the "<path>: " prefix checked and removed.
  /// parseNpy must give the same message for the same bytes.
  std::string npyError(const std::string &bytes,
                       ErrorCode expectedCode = ErrorCode::Format) {
    std::string path = dir.file("t.npy");
    writeBytes(path, bytes);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    EXPECT_FALSE(readNpy(path, &error, &code));
    EXPECT_EQ(code, expectedCode) << error;
    std::string message = stripPrefix(error, path);
    std::string parseError;
    EXPECT_FALSE(parseNpy(reinterpret_cast<const uint8_t *>(bytes.data()),
                          bytes.size(), "mem", &parseError));
    EXPECT_EQ(parseError, "mem: " + message);
    return message;
  }

  /// Reads `bytes` with parseNpy and expects success.
  NpyArray npyOk(const std::string &bytes) {
    std::string error;
    std::optional<NpyArray> array =
        parseNpy(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
                 "mem", &error);
    EXPECT_TRUE(array) << error;
    return array ? *array : NpyArray();
  }

  /// As npyError, for an .npz file.
  std::string npzError(const std::string &bytes,
                       ErrorCode expectedCode = ErrorCode::Format) {
    std::string path = dir.file("t.npz");
    writeBytes(path, bytes);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    EXPECT_FALSE(readNpz(path, &error, &code));
    EXPECT_EQ(code, expectedCode) << error;
    return stripPrefix(error, path);
  }

  std::map<std::string, NpyArray> npzOk(const std::string &bytes) {
    std::string path = dir.file("t.npz");
    writeBytes(path, bytes);
    std::string error;
    auto arrays = readNpz(path, &error);
    EXPECT_TRUE(arrays) << error;
    return arrays ? *arrays : std::map<std::string, NpyArray>();
  }

  static std::string stripPrefix(const std::string &error,
                                 const std::string &path) {
    std::string prefix = path + ": ";
    EXPECT_EQ(error.rfind(prefix, 0), 0u) << error;
    return error.rfind(prefix, 0) == 0 ? error.substr(prefix.size()) : error;
  }

  TempDir dir;
};

} // namespace

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

TEST_F(NpyValidationTest, MissingFileAndDirectoryAreIOErrors) {
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(readNpy(dir.file("nope.npy"), &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_CONTAINS(error, "cannot open: No such file or directory");
  EXPECT_FALSE(readNpz(dir.path(), &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_EQ(error, dir.path() + ": not a regular file");
}

TEST_F(NpyValidationTest, MagicAndVersion) {
  EXPECT_EQ(npyError(""), "0 bytes, too few for the .npy magic and version "
                          "(truncated)");
  EXPECT_EQ(npyError("\x93NUM"), "4 bytes, too few for the .npy magic and "
                                 "version (truncated)");
  EXPECT_EQ(npyError("hello, world"),
            "not a .npy file (it does not start with the \\x93NUMPY magic)");
  EXPECT_EQ(npyError(std::string("PK\x03\x04rest", 8)),
            "not a .npy file: it is a zip archive (an .npz file?)");
  EXPECT_EQ(npyError(npyFile("{}", "", 4, 0), ErrorCode::Unsupported),
            "format version 4.0 is not supported (only 1.0, 2.0 and 3.0)");
  EXPECT_CONTAINS(npyError(npyFile("{}", "", 1, 1), ErrorCode::Unsupported),
                  "format version 1.1 is not supported");
  EXPECT_CONTAINS(npyError(npyFile("{}", "", 0, 0), ErrorCode::Unsupported),
                  "format version 0.0");
  EXPECT_EQ(npyError(std::string("\x93NUMPY\x02\x00\x05\x00", 10)),
            "10 bytes, too few for the .npy magic, version and header length "
            "(truncated)");
}

TEST_F(NpyValidationTest, HeaderLength) {
  std::string file = npyFile("{}", "");
  file[8] = char(0xff);
  EXPECT_EQ(npyError(file), "header length 255 exceeds the 2 bytes after the "
                            "header length field (truncated)");
  // Version 2.0: a 32-bit length with every bit set must not wrap.
  std::string big = npyFile("{}", "", 2);
  set32(big, 8, 0xffffffff);
  EXPECT_CONTAINS(npyError(big), "header length 4294967295 exceeds the 2");
  // Over the limit, but inside the buffer.
  std::string huge(kNpyMaxHeaderSize + 1, ' ');
  huge[0] = '{';
  huge[1] = '}';
  EXPECT_EQ(npyError(npyFile(huge, "", 2)),
            "header length 1048577 exceeds the limit of 1048576 bytes");
}

TEST_F(NpyValidationTest, HeaderThatIsNotALiteral) {
  auto bad = [&](const std::string &header) {
    return npyError(npyFile(header, ""));
  };
  EXPECT_EQ(bad(""), "header is not a Python literal: expected a value, "
                     "found the end of the header at offset 0");
  EXPECT_EQ(bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,"),
            "header is not a Python literal: expected a value, found the end "
            "of the header at offset 53");
  EXPECT_EQ(bad("{'descr' '<f4'}"),
            "header is not a Python literal: expected ':', found character "
            "''' at offset 9");
  EXPECT_EQ(bad("{'descr': '<f4}"),
            "header is not a Python literal: unterminated string at offset 15");
  EXPECT_EQ(bad("{} x"), "header is not a Python literal: unexpected "
                         "character 'x' after the literal at offset 3");
  EXPECT_EQ(bad(std::string("{}\0", 3)),
            "header is not a Python literal: unexpected character '\\x00' "
            "after the literal at offset 2");
  EXPECT_EQ(bad("{'shape': (2.5,)}"),
            "header is not a Python literal: unexpected character '.' in an "
            "integer at offset 12");
  EXPECT_EQ(bad("{'shape': (02,)}"),
            "header is not a Python literal: integer with a leading zero at "
            "offset 11");
  EXPECT_EQ(bad("{'shape': (1,,)}"),
            "header is not a Python literal: unexpected character ',' at "
            "offset 13");
  EXPECT_EQ(bad("{'shape': (1 2)}"),
            "header is not a Python literal: expected ',' or ')', found "
            "character '2' at offset 13");
  EXPECT_EQ(bad("{'descr': np.float32}"),
            "header is not a Python literal: unexpected name 'np' at offset "
            "10");
  EXPECT_EQ(bad("{'descr': '\\q'}"),
            "header is not a Python literal: unsupported escape \\q at offset "
            "12");
  EXPECT_CONTAINS(bad(std::string(5000, '(') + std::string(5000, ')')),
                  "literal nested more than 32 deep at offset 32");
  EXPECT_EQ(bad("[1, 2]"), "header is a list, not a dict");
  EXPECT_EQ(bad("(1)"), "header is an integer, not a dict");
  EXPECT_EQ(npyError(npyFile("{'a': '\xff'}", "", 3)),
            "header is not valid UTF-8 (format version 3.0)");
}

TEST_F(NpyValidationTest, VoidPairsAreBf16) {
  // ml_dtypes saves bfloat16 arrays as '<V2'; NumPy spells the type '|V2'.
  for (const char *descr : {"'<V2'", "'|V2'"}) {
    std::string file = npyFile(dictWith(descr, "False", "(2,)"),
                               std::string("\x80\x3f\x00\xc0", 4));
    std::string error;
    std::optional<NpyArray> a = parseNpy(
        reinterpret_cast<const uint8_t *>(file.data()), file.size(), "x.npy",
        &error);
    ASSERT_TRUE(a) << error;
    EXPECT_EQ(a->dtype, DType::BF16);
    EXPECT_EQ(a->shape, std::vector<int64_t>{2});
    // 1.0 and -2.0 as bf16.
    EXPECT_EQ(a->data, (std::vector<uint8_t>{0x80, 0x3f, 0x00, 0xc0}));
  }
}

TEST_F(NpyValidationTest, HeaderKeys) {
  auto bad = [&](const std::string &header) {
    return npyError(npyFile(header, ""));
  };
  EXPECT_EQ(bad("{}"), "header lacks the key 'descr'");
  EXPECT_EQ(bad("{'descr': '<f4', 'shape': ()}"),
            "header lacks the key 'fortran_order'");
  EXPECT_EQ(bad("{'descr': '<f4', 'fortran_order': False}"),
            "header lacks the key 'shape'");
  EXPECT_EQ(bad("{'descr': '<f4', 'fortran_order': False, 'shape': (), "
                "'extra': 1}"),
            "header has unexpected key 'extra' (expected 'descr', "
            "'fortran_order' and 'shape')");
  EXPECT_EQ(bad("{'descr': '<f4', 'descr': '<f4'}"),
            "header has key 'descr' twice");
  EXPECT_EQ(bad("{1: 2}"), "header has a key that is an integer, not a "
                           "string");
}

TEST_F(NpyValidationTest, HeaderValues) {
  auto bad = [&](const std::string &descr, const std::string &fortran,
                 const std::string &shape, ErrorCode code = ErrorCode::Format) {
    return npyError(npyFile(dictWith(descr, fortran, shape), ""), code);
  };
  EXPECT_EQ(bad("'<u2'", "False", "()", ErrorCode::Unsupported),
            "dtype '<u2' is not supported (supported: '<f8', '<f4', '<f2', "
            "'|V2', '<i8', '<i4', '<i2', '|i1', '|u1', '|b1', in either byte "
            "order)");
  for (const char *descr : {"'<c8'", "'<U3'", "'|O'", "'<M8[s]'", "'f4'", "''",
                            "'<f4 '", "'%f4'", "'<V4'"})
    EXPECT_CONTAINS(bad(descr, "False", "()", ErrorCode::Unsupported),
                    "is not supported");
  EXPECT_EQ(bad("[('a', '<f4')]", "False", "()", ErrorCode::Unsupported),
            "structured dtypes (a list as 'descr') are not supported");
  EXPECT_EQ(bad("4", "False", "()"), "'descr' must be a string, got an "
                                     "integer");
  EXPECT_EQ(bad("'<f4'", "0", "()"),
            "'fortran_order' must be True or False, got an integer");
  EXPECT_EQ(bad("'<f4'", "None", "()"),
            "'fortran_order' must be True or False, got None");
  EXPECT_EQ(bad("'<f4'", "False", "[2, 3]"),
            "'shape' must be a tuple, got a list");
  EXPECT_EQ(bad("'<f4'", "False", "(2)"),
            "'shape' must be a tuple, got an integer");
  EXPECT_EQ(bad("'<f4'", "False", "(-1,)"),
            "shape[0] is -1; dimensions must be non-negative 64-bit integers");
  EXPECT_EQ(bad("'<f4'", "False", "(1, 9223372036854775808)"),
            "shape[1] is 9223372036854775808; dimensions must be "
            "non-negative 64-bit integers");
  EXPECT_CONTAINS(bad("'<f4'", "False", "(99999999999999999999999999,)"),
                  "shape[0] is 99999999999999999999999999;");
  EXPECT_EQ(bad("'<f4'", "False", "('2',)"),
            "shape[0] is a string, not an integer");
  EXPECT_EQ(bad("'<f4'", "False", "(True,)"),
            "shape[0] is a bool, not an integer");
  EXPECT_EQ(bad("'<f4'", "False", "(4294967296, 4294967296)"),
            "shape [4294967296, 4294967296] of f32 has a byte size that "
            "overflows 64 bits");
}

TEST_F(NpyValidationTest, DataSize) {
  std::string header = dictWith("'<f4'", "False", "(2, 3)");
  EXPECT_EQ(npyError(npyFile(header, std::string(20, 'x'))),
            "20 bytes of data, but shape [2, 3] of f32 needs 24 (truncated)");
  EXPECT_EQ(npyError(npyFile(header, std::string(25, 'x'))),
            "25 bytes of data, but shape [2, 3] of f32 needs 24 (trailing "
            "bytes are not allowed)");
  EXPECT_EQ(npyError(npyFile(dictWith("'<f8'", "False", "()"), "")),
            "0 bytes of data, but shape [] of f64 needs 8 (truncated)");
  // A zero dimension makes any other dimension harmless.
  NpyArray empty = npyOk(
      npyFile(dictWith("'<f8'", "False", "(0, 9223372036854775807)"), ""));
  EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 9223372036854775807}));
  EXPECT_TRUE(empty.data.empty());
}

TEST_F(NpyValidationTest, AcceptsWhatNumpyAccepts) {
  std::string data(4, '\x01');
  // Double quotes, odd whitespace, no trailing comma, other key order, a
  // Python 2 long, and byte orders that mean "native" or "none".
  const char *headers[] = {
      "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (1,)}",
      "{'shape':(1L,),'fortran_order':False,'descr':'<i4'}",
      ("\n\t{ 'descr' : '<i4' ,\n 'fortran_order' : False ,\n"
       " 'shape' : ( 1 , ) , }  \n\n"),
      "{'descr': '|i4', 'fortran_order': False, 'shape': (+1,), }",
      "{'descr': '=i4', 'fortran_order': False, 'shape': (1,), }",
      "{'descr': '<i4', 'fortran_order': True, 'shape': (1,), }",
  };
  for (const char *header : headers) {
    SCOPED_TRACE(header);
    NpyArray array = npyOk(npyFile(header, data));
    EXPECT_EQ(array.dtype, DType::I32);
    EXPECT_EQ(array.shape, std::vector<int64_t>{1});
    EXPECT_EQ(array.data, std::vector<uint8_t>(4, 1));
  }
  NpyArray byte = npyOk(npyFile(dictWith("'>i1'", "False", "()"), "\x80"));
  EXPECT_EQ(byte.dtype, DType::I8);
  EXPECT_EQ(byte.data, std::vector<uint8_t>{0x80});
  NpyArray v2 = npyOk(npyFile(dictWith("'<u1'", "False", "(2,)"), "ab", 2));
  EXPECT_EQ(v2.data, (std::vector<uint8_t>{'a', 'b'}));
  NpyArray v3 = npyOk(npyFile(dictWith("'|b1'", "False", "(1,)"), "\x01", 3));
  EXPECT_EQ(v3.dtype, DType::Bool);
  EXPECT_EQ(v3.data, std::vector<uint8_t>{1});
}

TEST_F(NpyValidationTest, FortranOrderWithSwapAndManyDimensions) {
  // '>i2' in Fortran order, shape (2, 2, 2): element (i, j, k) holds
  // 100 i + 10 j + k and sits at i + 2 j + 4 k.
  std::string data(16, '\0');
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) {
        int value = 100 * i + 10 * j + k;
        int at = 2 * (i + 2 * j + 4 * k);
        data[at] = static_cast<char>(value >> 8);
        data[at + 1] = static_cast<char>(value);
      }
  NpyArray array = npyOk(npyFile(dictWith("'>i2'", "True", "(2, 2, 2)"), data));
  std::vector<int16_t> values(8);
  ASSERT_EQ(array.data.size(), 16u);
  std::memcpy(values.data(), array.data.data(), 16);
  EXPECT_EQ(values, (std::vector<int16_t>{0, 1, 10, 11, 100, 101, 110, 111}));
}

//===----------------------------------------------------------------------===//
// .npz
//===----------------------------------------------------------------------===//

TEST_F(NpyValidationTest, NotAZipArchive) {
  EXPECT_EQ(npzError(""), "0 bytes, too few for a zip archive (truncated or "
                          "not an .npz file)");
  EXPECT_EQ(npzError(std::string(100, 'x')),
            "no zip end-of-central-directory record (truncated or not a zip "
            "archive)");
  EXPECT_EQ(npzError(smallNpy()),
            "not a zip archive: it starts with the .npy magic (a .npy file, "
            "not an .npz?)");
}

TEST_F(NpyValidationTest, StoredAndDeflatedMembersRead) {
  std::string npy = smallNpy();
  RawZip zip =
      buildZip({storedMember("s.npy", npy), deflatedMember("d.npy", npy),
                storedMember("empty.npy",
                             npyFile(dictWith("'<f4'", "False", "(0,)"), ""))});
  auto arrays = npzOk(zip.bytes);
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays["s"].data, arrays["d"].data);
  EXPECT_EQ(arrays["d"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(arrays["empty"].data.empty());

  // A comment after the end record is allowed (and searched past).
  std::string commented = zip.bytes;
  set16(commented, commented.size() - 2, 5);
  commented += "hello";
  EXPECT_EQ(npzOk(commented).size(), 3u);
}

TEST_F(NpyValidationTest, HighlyCompressedMemberInflatesInSteps) {
  // 16 MiB of zeros deflate to ~16 KiB: the output buffer has to grow
  // several times, and the ratio is near deflate's 1032:1 maximum.
  std::string header = dictWith("'|u1'", "False", "(16777216,)");
  std::string npy = npyFile(header, std::string(16 << 20, '\0'));
  RawZip zip = buildZip({deflatedMember("z.npy", npy)});
  auto arrays = npzOk(zip.bytes);
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays["z"].data.size(), 16u << 20);
}

TEST_F(NpyValidationTest, MembersMustBeNpyFiles) {
  RawZip zip = buildZip({storedMember("readme.txt", "hello")});
  EXPECT_EQ(npzError(zip.bytes, ErrorCode::Unsupported),
            "member 'readme.txt': not a .npy file (.npz members must be "
            "named '<key>.npy')");
  RawZip bad = buildZip({storedMember("a.npy", "garbage")});
  EXPECT_EQ(npzError(bad.bytes),
            "member 'a.npy': not a .npy file (it does not start with the "
            "\\x93NUMPY magic)");
  std::string truncatedNpy = smallNpy();
  truncatedNpy.pop_back();
  RawZip shortData = buildZip({storedMember("dir/w.npy", truncatedNpy)});
  EXPECT_EQ(npzError(shortData.bytes),
            "member 'dir/w.npy': 23 bytes of data, but shape [2, 3] of f32 "
            "needs 24 (truncated)");
}

TEST_F(NpyValidationTest, CrcMismatch) {
  RawZip zip = buildZip({storedMember("a.npy", smallNpy())});
  std::string flipped = zip.bytes;
  flipped[zip.centralStart - 3] ^= 0x40; // Inside the member's data.
  EXPECT_CONTAINS(npzError(flipped),
                  "member 'a.npy': CRC-32 mismatch: the central directory "
                  "records 0x");
  RawMember wrong = deflatedMember("d.npy", smallNpy());
  wrong.crc ^= 1;
  EXPECT_CONTAINS(npzError(buildZip({wrong}).bytes),
                  "member 'd.npy': CRC-32 mismatch");
}

TEST_F(NpyValidationTest, WrongSizes) {
  RawZip zip = buildZip({storedMember("a.npy", smallNpy())});
  size_t entry = zip.centralOffsets[0];
  std::string bytes = zip.bytes;
  set32(bytes, entry + 24, get32(bytes, entry + 24) + 1);
  EXPECT_EQ(npzError(bytes), "member 'a.npy': stored, but its compressed "
                             "size 93 differs from its size 94");
  bytes = zip.bytes;
  set32(bytes, entry + 20, 1000);
  set32(bytes, entry + 24, 1000);
  EXPECT_EQ(npzError(bytes), "member 'a.npy': data [35, 1035) runs past the "
                             "start of the central directory at 128");
  bytes = zip.bytes;
  set32(bytes, entry + 20, 0xffffffff); // Saturated, but no zip64 field.
  set32(bytes, entry + 24, 0xffffffff);
  EXPECT_CONTAINS(npzError(bytes), "runs past the start of the central");

  // Deflated members: the recorded size must be exactly what inflates.
  RawMember more = deflatedMember("d.npy", smallNpy());
  more.size += 1;
  EXPECT_EQ(npzError(buildZip({more}).bytes),
            "member 'd.npy': inflates to 93 bytes, but the central directory "
            "records 94");
  RawMember less = deflatedMember("d.npy", smallNpy());
  less.size -= 1;
  EXPECT_EQ(npzError(buildZip({less}).bytes),
            "member 'd.npy': inflates to more than the 92 bytes the central "
            "directory records");
  RawMember bomb = deflatedMember("d.npy", smallNpy());
  bomb.size = 0xfffffff0;
  EXPECT_CONTAINS(npzError(buildZip({bomb}).bytes),
                  "member 'd.npy': records 4294967280 bytes inflated from");
}

TEST_F(NpyValidationTest, CorruptDeflateStreams) {
  std::string npy = smallNpy();
  RawMember cut = deflatedMember("d.npy", npy);
  cut.stored.resize(cut.stored.size() / 2);
  EXPECT_EQ(npzError(buildZip({cut}).bytes),
            "member 'd.npy': deflate data ends before the end of its stream "
            "(truncated)");
  RawMember trailing = deflatedMember("d.npy", npy);
  trailing.stored += "xyz";
  EXPECT_EQ(npzError(buildZip({trailing}).bytes),
            "member 'd.npy': 3 bytes follow the end of the deflate stream");
  RawMember garbage = deflatedMember("d.npy", npy);
  garbage.stored.assign(garbage.stored.size(), '\xff');
  EXPECT_CONTAINS(npzError(buildZip({garbage}).bytes),
                  "member 'd.npy': corrupt deflate data: ");
}

TEST_F(NpyValidationTest, UnsupportedMembers) {
  RawMember encrypted = storedMember("a.npy", smallNpy());
  encrypted.flags = 1;
  EXPECT_EQ(npzError(buildZip({encrypted}).bytes, ErrorCode::Unsupported),
            "member 'a.npy': encrypted members are not supported");
  RawMember bzip2 = storedMember("a.npy", smallNpy());
  bzip2.method = 12;
  EXPECT_EQ(npzError(buildZip({bzip2}).bytes, ErrorCode::Unsupported),
            "member 'a.npy': compression method 12 is not supported (only "
            "stored and deflate)");
  RawZip zip = buildZip({storedMember("a.npy", smallNpy())});
  std::string multiDisk = zip.bytes;
  set16(multiDisk, zip.endOffset + 4, 1);
  EXPECT_EQ(npzError(multiDisk, ErrorCode::Unsupported),
            "multi-disk zip archives are not supported");
  // Data before the archive shifts every offset; not supported.
  EXPECT_CONTAINS(npzError("prefix" + zip.bytes, ErrorCode::Unsupported),
                  "does not end where the end records begin");
}

TEST_F(NpyValidationTest, BrokenCentralDirectory) {
  RawZip zip = buildZip(
      {storedMember("a.npy", smallNpy()), storedMember("b.npy", smallNpy())});
  size_t end = zip.endOffset;
  std::string bytes = zip.bytes;
  set32(bytes, end + 16, zip.centralStart + 1000);
  EXPECT_CONTAINS(npzError(bytes), "extends past the end records");
  bytes = zip.bytes;
  set16(bytes, end + 8, 9);
  set16(bytes, end + 10, 9);
  EXPECT_EQ(npzError(bytes), "9 entries cannot fit in a central directory "
                             "of 102 bytes");
  bytes = zip.bytes;
  set16(bytes, end + 8, 1);
  set16(bytes, end + 10, 1);
  EXPECT_EQ(npzError(bytes), "51 bytes follow the last of the 1 entries of "
                             "the central directory");
  bytes = zip.bytes;
  bytes[zip.centralOffsets[1]] = 'X';
  EXPECT_EQ(npzError(bytes), "central directory entry 1 at offset 307 has a "
                             "bad signature");
  bytes = zip.bytes;
  set16(bytes, zip.centralOffsets[1] + 28, 200); // Name length.
  EXPECT_EQ(npzError(bytes), "central directory entry 1 runs past the end "
                             "of the central directory");
  bytes = zip.bytes;
  set16(bytes, zip.centralOffsets[0] + 30, 3); // Extra length, too short.
  set16(bytes, zip.centralOffsets[0] + 28, 2);
  EXPECT_EQ(npzError(bytes), "member 'a.': malformed extra field");
  bytes = zip.bytes;
  set32(bytes, zip.centralOffsets[1] + 42, 7);
  EXPECT_EQ(npzError(bytes), "member 'b.npy': no local header at offset 7");
  bytes = zip.bytes;
  set32(bytes, zip.centralOffsets[1] + 42, zip.centralStart - 10);
  EXPECT_EQ(npzError(bytes), "member 'b.npy': local header offset 246 "
                             "leaves no room for it before the central "
                             "directory at 256");
  bytes = zip.bytes;
  bytes[zip.localOffsets[1] + 30] = 'c'; // The local name.
  EXPECT_EQ(npzError(bytes), "member 'b.npy': its local header names it "
                             "'c.npy'");
  bytes = zip.bytes;
  bytes[zip.centralOffsets[1] + 46] = 'a'; // Both names now "a.npy".
  bytes[zip.localOffsets[1] + 30] = 'a';
  EXPECT_EQ(npzError(bytes), "member 'a.npy' appears twice");
  bytes = zip.bytes;
  bytes[zip.centralOffsets[1] + 46] = '\0';
  bytes[zip.localOffsets[1] + 30] = '\0';
  EXPECT_EQ(npzError(bytes), "member '\\x00.npy': the name contains a NUL "
                             "byte");
}

TEST_F(NpyValidationTest, OverlappingMembers) {
  // Member "a.npy" stores a complete local header and data of "b.npy"; the
  // central entry of b points there, inside a's data.
  RawZip inner = buildZip({storedMember("b.npy", smallNpy())});
  std::string region = inner.bytes.substr(0, inner.centralStart);
  RawZip zip = buildZip(
      {storedMember("a.npy", region), storedMember("b.npy", smallNpy())});
  std::string bytes = zip.bytes;
  set32(bytes, zip.centralOffsets[1] + 42, 35); // 30 + len("a.npy").
  EXPECT_EQ(npzError(bytes), "member 'b.npy' at offset 35 overlaps member "
                             "'a.npy' at [0, 163)");
}

TEST_F(NpyValidationTest, Zip64Records) {
  // Our own writer's forced-zip64 output is covered in NpyTest; here the
  // records themselves are broken.
  RawZip zip = buildZip({storedMember("a.npy", smallNpy())});
  std::string head = zip.bytes.substr(0, zip.endOffset);
  auto withLocator = [&](uint64_t recordOffset, uint64_t recordSize,
                         uint32_t disks) {
    std::string out = head;
    size_t recordPos = out.size();
    put32(out, 0x06064b50);
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>(recordSize >> (8 * i));
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    for (uint64_t value :
         {uint64_t(1), uint64_t(1), uint64_t(zip.endOffset - zip.centralStart),
          uint64_t(zip.centralStart)})
      for (int i = 0; i < 8; ++i)
        out += static_cast<char>(value >> (8 * i));
    put32(out, 0x07064b50);
    put32(out, 0);
    uint64_t at = recordOffset == ~uint64_t(0) ? recordPos : recordOffset;
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>(at >> (8 * i));
    put32(out, disks);
    out += zip.bytes.substr(zip.endOffset);
    return out;
  };
  EXPECT_EQ(npzOk(withLocator(~uint64_t(0), 44, 1)).size(), 1u);
  EXPECT_EQ(npzError(withLocator(~uint64_t(0), 44, 2), ErrorCode::Unsupported),
            "multi-disk zip archives are not supported");
  EXPECT_EQ(npzError(withLocator(~uint64_t(0), 45, 1)),
            "zip64 end record at offset 179 states size 45, but its locator "
            "is 44 bytes after its fixed part");
  EXPECT_EQ(npzError(withLocator(5, 44, 1)), "no zip64 end record at offset 5");
  EXPECT_CONTAINS(npzError(withLocator(uint64_t(1) << 60, 44, 1)),
                  "zip64 end record offset 1152921504606846976 leaves no "
                  "room for the record");
}

//===----------------------------------------------------------------------===//
// Sweeps
//===----------------------------------------------------------------------===//

TEST_F(NpyValidationTest, EveryTruncationFailsCleanly) {
  std::string npy = smallNpy();
  for (size_t length = 0; length < npy.size(); ++length) {
    SCOPED_TRACE("npy truncated to " + std::to_string(length) + " bytes");
    EXPECT_FALSE(npyError(npy.substr(0, length)).empty());
  }
  std::vector<std::string> archives = {
      buildZip({storedMember("a.npy", npy), deflatedMember("b.npy", npy)})
          .bytes};
  std::map<std::string, NpyArray> arrays = {{"x", npyOk(npy)},
                                            {"y", npyOk(npy)}};
  std::string ours = dir.file("ours.npz");
  std::string error;
  ASSERT_TRUE(writeNpz(ours, arrays, &error)) << error;
  archives.push_back(readBytes(ours));
  for (const std::string &archive : archives) {
    for (size_t length = 0; length < archive.size(); ++length) {
      SCOPED_TRACE("npz truncated to " + std::to_string(length) + " bytes");
      EXPECT_FALSE(npzError(archive.substr(0, length)).empty());
    }
  }
}

TEST_F(NpyValidationTest, EveryTruncationOfNumpyArchivesFailsCleanly) {
  if (!haveNumpy())
    GTEST_SKIP() << kPython << " with numpy is not available";
  std::string output;
  ASSERT_EQ(runPython(dir.path(), "make.py", R"(import sys
import numpy as np
d = sys.argv[1]
a = np.arange(6, dtype='<f4').reshape(2, 3)
b = np.asfortranarray(np.arange(12, dtype='>i2').reshape(3, 4))
np.savez(d + '/s.npz', a=a, b=b)
np.savez_compressed(d + '/c.npz', a=a, b=b)
np.save(d + '/a.npy', a)
)",
                      output),
            0)
      << output;
  for (const char *name : {"s.npz", "c.npz"}) {
    std::string archive = readBytes(dir.file(name));
    EXPECT_EQ(npzOk(archive).size(), 2u);
    for (size_t length = 0; length < archive.size(); ++length) {
      SCOPED_TRACE(std::string(name) + " truncated to " +
                   std::to_string(length) + " bytes");
      EXPECT_FALSE(npzError(archive.substr(0, length)).empty());
    }
  }
  std::string npy = readBytes(dir.file("a.npy"));
  for (size_t length = 0; length < npy.size(); ++length)
    EXPECT_FALSE(npyError(npy.substr(0, length)).empty());
}

TEST_F(NpyValidationTest, RandomMutationsNeverCrash) {
  std::string npy = smallNpy();
  const std::string inputs[] = {
      npy,
      buildZip({storedMember("a.npy", npy), deflatedMember("b.npy", npy)})
          .bytes,
  };
  // LOOMRT_FUZZ_ITERATIONS raises the count for a longer (sanitizer) run.
  int iterations = 2000;
  if (const char *env = std::getenv("LOOMRT_FUZZ_ITERATIONS"))
    iterations = std::max(1, std::atoi(env));
  std::mt19937 rng(4242);
  std::string path = dir.file("m.bin");
  int accepted = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    bool isZip = iteration % 2;
    std::string bytes = inputs[isZip];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % bytes.size();
      // Favour header punctuation and small numbers so mutations reach the
      // checks behind the parsers.
      static const char kAlphabet[] = "0123456789(),:'{} TF<>|\x00\x01\xff";
      bytes[at] = rng() % 2 ? kAlphabet[rng() % (sizeof(kAlphabet) - 1)]
                            : static_cast<char>(rng());
    }
    if (rng() % 8 == 0)
      bytes.resize(rng() % bytes.size());
    writeBytes(path, bytes);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    auto check = [&](const NpyArray &array) {
      ASSERT_EQ(checkedByteSize(array.dtype, array.shape), array.data.size());
    };
    if (isZip) {
      auto arrays = readNpz(path, &error, &code);
      if (!arrays) {
        ASSERT_NE(code, ErrorCode::Ok);
        ASSERT_EQ(error.rfind(path + ": ", 0), 0u) << error;
        continue;
      }
      for (const auto &entry : *arrays)
        check(entry.second);
    } else {
      auto array = readNpy(path, &error, &code);
      if (!array) {
        ASSERT_NE(code, ErrorCode::Ok);
        ASSERT_EQ(error.rfind(path + ": ", 0), 0u) << error;
        continue;
      }
      check(*array);
    }
    ++accepted;
  }
  // Mutating only data bytes of the .npy leaves a valid file: some must pass.
  EXPECT_GT(accepted, 0);
}
