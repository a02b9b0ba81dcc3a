//===- NpyTest.cpp - .npy/.npz round trips and NumPy interoperability -----===//
//
// Round trips through our own writer and reader, then both directions against
// the real NumPy: files np.save/np.savez/np.savez_compressed wrote must read
// back with the right bytes, and what we write must np.load with equal values
// (byte-identical to np.save for .npy). The NumPy tests run /usr/bin/python3
// and skip when it or numpy is missing.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Npy.h"

#include "TestUtil.h"
#include "Zip.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {

/// Every DType NumPy has (BF16 is a '<V2' void, as ml_dtypes saves it).
const DType kNpyDTypes[] = {DType::F64, DType::F32, DType::F16,
                            DType::BF16, DType::I64, DType::I32,
                            DType::I16, DType::I8,  DType::U8,
                            DType::Bool};

const std::vector<std::vector<int64_t>> kShapes = {
    {}, {0}, {5}, {2, 3}, {2, 0, 3}, {1, 1, 4}, {3, 2, 2}};

/// An array of `dtype` and `shape` whose bytes are a pattern unique to
/// `seed` (0 or 1 for Bool, as NumPy writes it).
NpyArray makeArray(DType dtype, std::vector<int64_t> shape, unsigned seed) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.resize(*checkedByteSize(dtype, array.shape));
  for (size_t i = 0; i < array.data.size(); ++i)
    array.data[i] = dtype == DType::Bool
                        ? static_cast<uint8_t>((seed + i) % 3 == 0)
                        : static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  return array;
}

std::string shapeName(const std::vector<int64_t> &shape) {
  std::string out = "s";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

std::string pythonTuple(const std::vector<int64_t> &shape) {
  std::string out = "(";
  for (int64_t dim : shape)
    out += std::to_string(dim) + ",";
  return out + ")";
}

std::string bytesOf(const std::vector<uint8_t> &data) {
  return std::string(data.begin(), data.end());
}

void expectSame(const NpyArray &actual, const NpyArray &expected) {
  EXPECT_EQ(actual.dtype, expected.dtype);
  EXPECT_EQ(actual.shape, expected.shape);
  EXPECT_EQ(actual.data, expected.data);
}

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(dir.ok()); }
  TempDir dir;
};

#define SKIP_WITHOUT_NUMPY()                                                   \
  do {                                                                         \
    if (!haveNumpy())                                                          \
      GTEST_SKIP() << kPython << " with numpy is not available";               \
  } while (0)

} // namespace

TEST(NpyDescrTest, NamesEveryNumpyType) {
  EXPECT_EQ(npyDescr(DType::F64), "<f8");
  EXPECT_EQ(npyDescr(DType::F32), "<f4");
  EXPECT_EQ(npyDescr(DType::F16), "<f2");
  EXPECT_EQ(npyDescr(DType::I64), "<i8");
  EXPECT_EQ(npyDescr(DType::I32), "<i4");
  EXPECT_EQ(npyDescr(DType::I16), "<i2");
  EXPECT_EQ(npyDescr(DType::I8), "|i1");
  EXPECT_EQ(npyDescr(DType::U8), "|u1");
  EXPECT_EQ(npyDescr(DType::Bool), "|b1");
  EXPECT_EQ(npyDescr(DType::BF16), "|V2");
  EXPECT_EQ(npyDescr(static_cast<DType>(200)), "");
}

TEST_F(NpyTest, RoundTripsEveryDTypeAndShape) {
  unsigned seed = 1;
  for (DType dtype : kNpyDTypes) {
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeToShortName(dtype)) + " " +
                   shapeName(shape));
      NpyArray array = makeArray(dtype, shape, seed++);
      std::string path = dir.file("a.npy");
      std::string error;
      ErrorCode code = ErrorCode::Format;
      ASSERT_TRUE(writeNpy(path, array, &error, &code)) << error;
      EXPECT_EQ(code, ErrorCode::Ok);
      std::optional<NpyArray> read = readNpy(path, &error, &code);
      ASSERT_TRUE(read) << error;
      EXPECT_EQ(code, ErrorCode::Ok);
      expectSame(*read, array);

      // The in-memory encoder and parser agree with the file functions.
      std::optional<std::vector<uint8_t>> bytes = encodeNpy(array, &error);
      ASSERT_TRUE(bytes) << error;
      EXPECT_EQ(bytesOf(*bytes), readBytes(path));
      std::optional<NpyArray> parsed =
          parseNpy(bytes->data(), bytes->size(), "mem", &error);
      ASSERT_TRUE(parsed) << error;
      expectSame(*parsed, array);
    }
  }
}

TEST_F(NpyTest, HeaderMatchesNumpyLayout) {
  NpyArray array = makeArray(DType::F32, {2, 3}, 1);
  std::string error;
  std::optional<std::vector<uint8_t>> bytes = encodeNpy(array, &error);
  ASSERT_TRUE(bytes) << error;
  std::string text = bytesOf(*bytes);
  std::string header = "{'descr': '<f4', 'fortran_order': False, "
                       "'shape': (2, 3), }";
  // Magic, version 1.0, a 16-bit length, the header padded to 64 bytes.
  EXPECT_EQ(text.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerSize = uint8_t(text[8]) | (uint8_t(text[9]) << 8);
  EXPECT_EQ((10 + headerSize) % 64, 0u);
  EXPECT_EQ(text.substr(10, header.size()), header);
  EXPECT_EQ(text[10 + headerSize - 1], '\n');
  EXPECT_EQ(text.size(), 10 + headerSize + 24);

  NpyArray scalar = makeArray(DType::Bool, {}, 1);
  bytes = encodeNpy(scalar, &error);
  ASSERT_TRUE(bytes) << error;
  EXPECT_NE(bytesOf(*bytes).find("'descr': '|b1', 'fortran_order': False, "
                                 "'shape': (), }"),
            std::string::npos);
  NpyArray vector = makeArray(DType::I64, {7}, 1);
  bytes = encodeNpy(vector, &error);
  ASSERT_TRUE(bytes) << error;
  EXPECT_NE(bytesOf(*bytes).find("'shape': (7,), }"), std::string::npos);
}

TEST_F(NpyTest, ManyDimensionsSwitchToVersion2) {
  // 30000 dimensions of 1 need a header over 64 KiB: format 2.0.
  NpyArray array;
  array.dtype = DType::I8;
  array.shape.assign(30000, 1);
  array.data = {42};
  std::string path = dir.file("deep.npy");
  std::string error;
  ASSERT_TRUE(writeNpy(path, array, &error)) << error;
  std::string bytes = readBytes(path);
  EXPECT_EQ(bytes[6], 2);
  EXPECT_EQ(bytes.size() % 64, 1u);
  std::optional<NpyArray> read = readNpy(path, &error);
  ASSERT_TRUE(read) << error;
  expectSame(*read, array);
}

TEST_F(NpyTest, BigEndianDataIsSwapped) {
  // '>i4' 0x01020304 and '>f2' 1.0 (0x3c00), written by hand.
  std::string header = "{'descr': '>i4', 'fortran_order': False, "
                       "'shape': (2,), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) +
                    '\0' + header +
                    std::string("\x01\x02\x03\x04\xff\xff\xff\xfe", 8);
  std::string error;
  std::optional<NpyArray> read = parseNpy(
      reinterpret_cast<const uint8_t *>(npy.data()), npy.size(), "be", &error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->dtype, DType::I32);
  int32_t values[2];
  std::memcpy(values, read->data.data(), sizeof(values));
  EXPECT_EQ(values[0], 0x01020304);
  EXPECT_EQ(values[1], -2);
}

TEST_F(NpyTest, FortranOrderIsTransposedToCOrder) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column: 0 3 1 4 2 5.
  std::string header = "{'descr': '|u1', 'fortran_order': True, "
                       "'shape': (2, 3), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) +
                    '\0' + header + std::string("\x00\x03\x01\x04\x02\x05", 6);
  std::string error;
  std::optional<NpyArray> read = parseNpy(
      reinterpret_cast<const uint8_t *>(npy.data()), npy.size(), "f", &error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->data, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(NpyTest, NpzRoundTripsEveryDTypeAndShape) {
  std::map<std::string, NpyArray> arrays;
  unsigned seed = 1;
  for (DType dtype : kNpyDTypes)
    for (const auto &shape : kShapes)
      arrays.emplace(std::string(dtypeToShortName(dtype)) + "_" +
                         shapeName(shape),
                     makeArray(dtype, shape, seed++));
  arrays.emplace("dir/with/slashes", makeArray(DType::F32, {2}, 99));
  arrays.emplace("w\xc3\xa9ight", makeArray(DType::I16, {3}, 98));
  std::string path = dir.file("a.npz");
  std::string error;
  ErrorCode code = ErrorCode::Format;
  ASSERT_TRUE(writeNpz(path, arrays, &error, &code)) << error;
  EXPECT_EQ(code, ErrorCode::Ok);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"a.npz"});
  auto read = readNpz(path, &error, &code);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(code, ErrorCode::Ok);
  ASSERT_EQ(read->size(), arrays.size());
  for (const auto &[key, array] : arrays) {
    SCOPED_TRACE(key);
    auto it = read->find(key);
    ASSERT_NE(it, read->end());
    expectSame(it->second, array);
  }

  // Deterministic: the same input gives the same bytes.
  std::string first = readBytes(path);
  ASSERT_TRUE(writeNpz(path, arrays, &error)) << error;
  EXPECT_EQ(readBytes(path), first);
}

TEST_F(NpyTest, EmptyNpzRoundTrips) {
  std::string path = dir.file("empty.npz");
  std::string error;
  ASSERT_TRUE(writeNpz(path, {}, &error)) << error;
  EXPECT_EQ(readBytes(path).size(), 22u); // Just the end record.
  auto read = readNpz(path, &error);
  ASSERT_TRUE(read) << error;
  EXPECT_TRUE(read->empty());
}

TEST_F(NpyTest, ForcedZip64ArchiveReadsBack) {
  std::map<std::string, NpyArray> arrays = {
      {"a", makeArray(DType::F32, {2, 3}, 1)},
      {"b", makeArray(DType::I8, {0}, 2)},
      {"c", makeArray(DType::F64, {}, 3)}};
  std::vector<std::vector<uint8_t>> encoded;
  std::vector<detail::ZipInput> members;
  std::string error;
  for (const auto &[key, array] : arrays)
    encoded.push_back(*encodeNpy(array, &error));
  size_t i = 0;
  for (const auto &entry : arrays) {
    members.push_back(
        {entry.first + ".npy", {{encoded[i].data(), encoded[i].size()}}});
    ++i;
  }
  detail::ZipImage image = detail::buildStoredZip(members, true);
  std::string bytes;
  for (const detail::ByteSpan &piece : image.pieces)
    bytes.append(reinterpret_cast<const char *>(piece.data), piece.size);
  std::string path = dir.file("zip64.npz");
  writeBytes(path, bytes);
  auto read = readNpz(path, &error);
  ASSERT_TRUE(read) << error;
  ASSERT_EQ(read->size(), 3u);
  for (const auto &[key, array] : arrays)
    expectSame(read->at(key), array);
}

TEST_F(NpyTest, AtomicWriteReplacesAndLeavesNoTemporaryFile) {
  std::string path = dir.file("x.npy");
  std::string error;
  for (int round = 0; round < 3; ++round) {
    NpyArray array = makeArray(DType::I32, {round + 1}, round);
    ASSERT_TRUE(writeNpy(path, array, &error)) << error;
    EXPECT_EQ(dir.list(), std::vector<std::string>{"x.npy"});
    std::optional<NpyArray> read = readNpy(path, &error);
    ASSERT_TRUE(read) << error;
    expectSame(*read, array);
  }
}

TEST_F(NpyTest, FailedWritesLeaveNoTemporaryFile) {
  std::string target = dir.file("occupied");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  writeBytes(target + "/keep", "x");
  NpyArray array = makeArray(DType::U8, {3}, 1);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(writeNpy(target, array, &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_EQ(error.rfind(target + ": cannot rename", 0), 0u) << error;
  code = ErrorCode::Ok;
  EXPECT_FALSE(writeNpz(target, {{"a", array}}, &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"occupied"});

  std::string missing = dir.file("no/such/dir/x.npy");
  EXPECT_FALSE(writeNpy(missing, array, &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_EQ(error.rfind(missing + ": cannot create temporary file", 0), 0u)
      << error;
}

TEST_F(NpyTest, WritersRejectBadArrays) {
  std::string path = dir.file("bad.npy");
  struct Case {
    NpyArray array;
    ErrorCode code;
    const char *message;
  };
  NpyArray negative = makeArray(DType::F32, {2}, 1);
  negative.shape = {-2};
  NpyArray shortData = makeArray(DType::F32, {2, 2}, 1);
  shortData.data.pop_back();
  NpyArray invalid = makeArray(DType::U8, {1}, 1);
  invalid.dtype = static_cast<DType>(77);
  NpyArray overflow;
  overflow.dtype = DType::F64;
  overflow.shape = {int64_t(1) << 62, 4};
  const Case cases[] = {
      {negative, ErrorCode::InvalidArgument,
       "shape [-2] has a negative dimension"},
      {shortData, ErrorCode::InvalidArgument,
       "15 bytes of data, but shape [2, 2] of f32 needs 16"},
      {invalid, ErrorCode::InvalidArgument, "invalid dtype value 77"},
      {overflow, ErrorCode::InvalidArgument,
       "shape [4611686018427387904, 4] of f64 has a byte size that overflows "
       "64 bits"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.message);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    EXPECT_FALSE(writeNpy(path, c.array, &error, &code));
    EXPECT_EQ(code, c.code);
    EXPECT_EQ(error, path + ": " + c.message);
    code = ErrorCode::Ok;
    EXPECT_FALSE(writeNpz(path, {{"k", c.array}}, &error, &code));
    EXPECT_EQ(code, c.code);
    EXPECT_EQ(error, path + ": array 'k': " + c.message);
    EXPECT_FALSE(encodeNpy(c.array, &error, &code));
    EXPECT_EQ(error, std::string("npy: ") + c.message);
  }
  EXPECT_TRUE(dir.list().empty());

  NpyArray good = makeArray(DType::U8, {1}, 1);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(writeNpz(path, {{std::string("a\0b", 3), good}}, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_EQ(error, path + ": array 'a\\x00b': the key must be UTF-8 without "
                          "NUL bytes");
  EXPECT_FALSE(writeNpz(path, {{"\xff", good}}, &error, &code));
  EXPECT_FALSE(writeNpz(path, {{std::string(70000, 'k'), good}}, &error));
  EXPECT_NE(error.find("the key is longer than 65531 bytes"),
            std::string::npos);
  EXPECT_FALSE(writeNpy("", good, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(dir.list().empty());
}

TEST_F(NpyTest, NullErrorPointersAreAllowed) {
  EXPECT_FALSE(readNpy(dir.file("missing.npy"), nullptr));
  EXPECT_FALSE(readNpz(dir.file("missing.npz"), nullptr));
  EXPECT_FALSE(parseNpy(nullptr, 0, "x", nullptr));
  EXPECT_FALSE(parseNpy(nullptr, 5, "x", nullptr));
  NpyArray bad = makeArray(DType::F32, {2}, 1);
  bad.shape = {-2};
  EXPECT_FALSE(writeNpy(dir.file("x.npy"), bad, nullptr));
  EXPECT_FALSE(writeNpz(dir.file("x.npz"), {{"x", bad}}, nullptr));
}

//===----------------------------------------------------------------------===//
// Against the real NumPy
//===----------------------------------------------------------------------===//

namespace {

/// A fixture NumPy writes: descr with byte order, shape, memory order, and
/// format version (0: np.save's choice).
struct NumpyCase {
  std::string name;
  std::string descr;
  DType dtype;
  std::vector<int64_t> shape;
  bool fortran = false;
  int version = 0;
};

std::vector<NumpyCase> numpyCases() {
  std::vector<NumpyCase> cases;
  for (DType dtype : kNpyDTypes)
    for (const auto &shape : kShapes)
      cases.push_back(
          {std::string(dtypeToShortName(dtype)) + "_" + shapeName(shape),
           npyDescr(dtype), dtype, shape});
  for (DType dtype :
       {DType::F64, DType::F32, DType::F16, DType::I64, DType::I32, DType::I16})
    cases.push_back({"be_" + std::string(dtypeToShortName(dtype)),
                     ">" + npyDescr(dtype).substr(1),
                     dtype,
                     {2, 3}});
  cases.push_back({"fortran_f32", "<f4", DType::F32, {2, 3}, true});
  cases.push_back({"fortran_i16", "<i2", DType::I16, {3, 4, 5}, true});
  cases.push_back({"fortran_be_f64", ">f8", DType::F64, {2, 3, 2}, true});
  cases.push_back({"fortran_u8", "|u1", DType::U8, {4, 1, 3}, true});
  cases.push_back({"v2_f32", "<f4", DType::F32, {2, 3}, false, 2});
  cases.push_back({"v3_i64", "<i8", DType::I64, {4}, false, 3});
  return cases;
}

/// Python that writes every case as <name>.npy plus <name>.bin (the values
/// as little-endian C-order bytes, NumPy's own idea of the data), then all of
/// them in stored.npz and compressed.npz.
std::string fixtureScript(const std::vector<NumpyCase> &cases) {
  std::string script = R"(import sys
import numpy as np
d = sys.argv[1]
def values(dt, shape):
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    kind = np.dtype(dt).kind
    if kind == 'b':
        a = i % 3 == 0
    elif kind == 'u':
        a = i % 256
    elif kind == 'i':
        a = i % 200 - 100
    else:
        a = i * 0.25 - 3
    return a.astype(dt).reshape(shape)
arrays = {}
def emit(name, dt, shape, fortran, version):
    a = values(dt, shape)
    if fortran:
        a = np.asfortranarray(a)
        assert a.ndim < 2 or not a.flags.c_contiguous
    with open(d + '/' + name + '.npy', 'wb') as f:
        np.lib.format.write_array(f, a, version=version)
    le = np.ascontiguousarray(a).astype(np.dtype(dt).newbyteorder('<'))
    with open(d + '/' + name + '.bin', 'wb') as f:
        f.write(le.tobytes())
    arrays[name] = a
)";
  for (const NumpyCase &c : cases)
    script += "emit('" + c.name + "', '" + c.descr + "', " +
              pythonTuple(c.shape) + ", " + (c.fortran ? "True" : "False") +
              ", " +
              (c.version ? "(" + std::to_string(c.version) + ", 0)"
                         : std::string("None")) +
              ")\n";
  script += R"(big = np.zeros(4 << 20, dtype=np.float32)
big[12345] = 1.5
arrays['big_zeros'] = big
with open(d + '/big_zeros.bin', 'wb') as f:
    f.write(big.tobytes())
np.savez(d + '/stored.npz', **arrays)
np.savez_compressed(d + '/compressed.npz', **arrays)
np.savez(d + '/positional.npz', np.arange(3), np.ones(2, dtype=np.int8))
print('ok')
)";
  return script;
}

} // namespace

TEST_F(NpyTest, ReadsWhatNumpyWrites) {
  SKIP_WITHOUT_NUMPY();
  std::vector<NumpyCase> cases = numpyCases();
  std::string output;
  ASSERT_EQ(runPython(dir.path(), "make.py", fixtureScript(cases), output), 0)
      << output;

  std::string error;
  for (const NumpyCase &c : cases) {
    SCOPED_TRACE(c.name);
    ErrorCode code = ErrorCode::Format;
    std::optional<NpyArray> read =
        readNpy(dir.file(c.name + ".npy"), &error, &code);
    ASSERT_TRUE(read) << error;
    EXPECT_EQ(code, ErrorCode::Ok);
    EXPECT_EQ(read->dtype, c.dtype);
    EXPECT_EQ(read->shape, c.shape);
    EXPECT_EQ(bytesOf(read->data), readBytes(dir.file(c.name + ".bin")));
  }

  for (const char *archive : {"stored.npz", "compressed.npz"}) {
    SCOPED_TRACE(archive);
    auto read = readNpz(dir.file(archive), &error);
    ASSERT_TRUE(read) << error;
    EXPECT_EQ(read->size(), cases.size() + 1);
    for (const NumpyCase &c : cases) {
      SCOPED_TRACE(c.name);
      auto it = read->find(c.name);
      ASSERT_NE(it, read->end());
      EXPECT_EQ(it->second.dtype, c.dtype);
      EXPECT_EQ(it->second.shape, c.shape);
      EXPECT_EQ(bytesOf(it->second.data), readBytes(dir.file(c.name + ".bin")));
    }
    auto big = read->find("big_zeros");
    ASSERT_NE(big, read->end());
    EXPECT_EQ(big->second.shape, std::vector<int64_t>{4 << 20});
    EXPECT_EQ(bytesOf(big->second.data), readBytes(dir.file("big_zeros.bin")));
  }

  auto positional = readNpz(dir.file("positional.npz"), &error);
  ASSERT_TRUE(positional) << error;
  ASSERT_EQ(positional->size(), 2u);
  EXPECT_EQ(positional->at("arr_0").shape, std::vector<int64_t>{3});
  EXPECT_EQ(positional->at("arr_1").dtype, DType::I8);
}

TEST_F(NpyTest, NumpyReadsWhatWeWrite) {
  SKIP_WITHOUT_NUMPY();
  std::string error;
  std::map<std::string, NpyArray> arrays;
  std::string checks;
  unsigned seed = 1;
  for (DType dtype : kNpyDTypes) {
    for (const auto &shape : kShapes) {
      std::string name =
          std::string(dtypeToShortName(dtype)) + "_" + shapeName(shape);
      NpyArray array = makeArray(dtype, shape, seed++);
      ASSERT_TRUE(writeNpy(dir.file(name + ".npy"), array, &error)) << error;
      writeBytes(dir.file(name + ".bin"), bytesOf(array.data));
      checks += "    ('" + name + "', '" + npyDescr(dtype) + "', " +
                pythonTuple(shape) + "),\n";
      arrays.emplace(name, std::move(array));
    }
  }
  // A non-ASCII key and one with slashes are plain member names to NumPy.
  arrays.emplace("w\xc3\xa9ight", makeArray(DType::F32, {2}, 7));
  arrays.emplace("dir/w", makeArray(DType::I8, {2}, 8));
  writeBytes(dir.file("w\xc3\xa9ight.bin"),
             bytesOf(arrays.at("w\xc3\xa9ight").data));
  writeBytes(dir.file("dir_w.bin"), bytesOf(arrays.at("dir/w").data));
  ASSERT_TRUE(writeNpz(dir.file("ours.npz"), arrays, &error)) << error;

  // The same archive with zip64 records everywhere.
  std::vector<std::vector<uint8_t>> encoded;
  std::vector<detail::ZipInput> members;
  for (const auto &[key, array] : arrays)
    encoded.push_back(*encodeNpy(array, &error));
  size_t i = 0;
  for (const auto &entry : arrays) {
    members.push_back(
        {entry.first + ".npy", {{encoded[i].data(), encoded[i].size()}}});
    ++i;
  }
  detail::ZipImage image = detail::buildStoredZip(members, true);
  std::string zip64;
  for (const detail::ByteSpan &piece : image.pieces)
    zip64.append(reinterpret_cast<const char *>(piece.data), piece.size);
  writeBytes(dir.file("ours64.npz"), zip64);

  std::string script = R"(import io, sys, zipfile
import numpy as np
d = sys.argv[1]
cases = [
)" + checks + R"(]
def check(a, descr, shape, raw):
    assert a.dtype.str == descr, (a.dtype.str, descr)
    assert a.shape == shape, (a.shape, shape)
    with open(raw, 'rb') as f:
        assert np.ascontiguousarray(a).tobytes() == f.read()
for name, descr, shape in cases:
    path = d + '/' + name + '.npy'
    a = np.load(path)
    check(a, descr, shape, d + '/' + name + '.bin')
    saved = io.BytesIO()
    np.save(saved, a)
    with open(path, 'rb') as f:
        assert f.read() == saved.getvalue(), name + ': differs from np.save'
for archive in ['ours.npz', 'ours64.npz']:
    with zipfile.ZipFile(d + '/' + archive) as z:
        assert z.testzip() is None
    with np.load(d + '/' + archive) as z:
        expected = sorted([c[0] for c in cases] + ['w\u00e9ight', 'dir/w'])
        assert sorted(z.files) == expected, (archive, sorted(z.files))
        for name, descr, shape in cases:
            check(z[name], descr, shape, d + '/' + name + '.bin')
        check(z['w\u00e9ight'], '<f4', (2,), d + '/w\u00e9ight.bin')
        check(z['dir/w'], '|i1', (2,), d + '/dir_w.bin')
print('ok')
)";
  std::string output;
  EXPECT_EQ(runPython(dir.path(), "check.py", script, output), 0) << output;
  EXPECT_EQ(output, "ok\n");
}
