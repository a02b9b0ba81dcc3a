//===- SafetensorsTest.cpp - Writer/reader round trips and atomic writes --===//

#include "loomrt/Safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// A tensor of `dtype` and `shape` whose bytes are a pattern unique to `seed`.
Tensor makeTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                  unsigned seed) {
  Tensor t{std::move(name), dtype, std::move(shape), {}};
  t.bytes.resize(*checkedByteSize(dtype, t.shape));
  for (size_t i = 0; i < t.bytes.size(); ++i)
    t.bytes[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return t;
}

void expectSame(const TensorView &view, const Tensor &t) {
  SCOPED_TRACE(t.name);
  EXPECT_EQ(view.name, t.name);
  EXPECT_EQ(view.dtype, t.dtype);
  EXPECT_EQ(view.shape, t.shape);
  ASSERT_EQ(view.nbytes, t.bytes.size());
  if (!t.bytes.empty()) {
    EXPECT_EQ(std::memcmp(view.data, t.bytes.data(), t.bytes.size()), 0);
  }
}

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(dir.ok()); }
  TempDir dir;
};

} // namespace

TEST_F(SafetensorsTest, RoundTripsEveryDTypeAndShapeKind) {
  std::vector<Tensor> tensors;
  unsigned seed = 1;
  for (DType dtype : kAllDTypes) {
    std::string name = "t_" + std::string(dtypeToShortName(dtype));
    tensors.push_back(makeTensor(name, dtype, {2, 3}, seed++));
    tensors.push_back(makeTensor(name + ".scalar", dtype, {}, seed++));
    tensors.push_back(makeTensor(name + ".empty", dtype, {0}, seed++));
  }
  tensors.push_back(makeTensor("empty.3d", DType::F32, {3, 0, 2}, seed++));
  tensors.push_back(makeTensor("rank5", DType::I16, {1, 2, 1, 3, 2}, seed++));
  tensors.push_back(makeTensor("unicode.ünï/名前", DType::U8, {4}, seed++));

  SafetensorsWriter writer;
  for (const Tensor &t : tensors)
    writer.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  writer.setMetadata("format", "pt");
  writer.setMetadata("note", "multi\nline \"quoted\" ünïcode");
  writer.setMetadata("empty", "");
  writer.setMetadata("format", "loom"); // Replaces the first value.
  EXPECT_EQ(writer.size(), tensors.size());

  std::string path = dir.file("model.safetensors");
  std::string error = "untouched";
  ErrorCode code = ErrorCode::IO;
  ASSERT_TRUE(writer.write(path, &error, &code)) << error;
  EXPECT_EQ(code, ErrorCode::Ok);

  auto file = SafetensorsFile::open(path, &error, &code);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_EQ(code, ErrorCode::Ok);
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->fileSize(), readBytes(path).size());

  // Insertion order survives, zero-sized tensors included.
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    expectSame(file->tensors()[i], tensors[i]);
  for (const Tensor &t : tensors) {
    const TensorView *view = file->find(t.name);
    ASSERT_NE(view, nullptr) << t.name;
    expectSame(*view, t);
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_EQ(file->find(""), nullptr);
  EXPECT_EQ(file->find("__metadata__"), nullptr);

  std::map<std::string, std::string> expectedMeta = {
      {"format", "loom"},
      {"note", "multi\nline \"quoted\" ünïcode"},
      {"empty", ""}};
  EXPECT_EQ(file->metadata(), expectedMeta);
}

TEST_F(SafetensorsTest, HeaderIsPaddedSoDataIsAligned) {
  SafetensorsWriter writer;
  float values[3] = {1.0f, 2.0f, 3.0f};
  writer.add("abc", DType::F32, {3}, values, sizeof(values));
  std::string path = dir.file("a.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;

  std::string bytes = readBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(headerSize % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + headerSize + sizeof(values));
  // Byte-exact header, as other readers (PyTorch, the reference library)
  // expect it; the padding is trailing spaces.
  std::string json =
      R"({"abc":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  std::string header = bytes.substr(8, headerSize);
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.substr(json.size()),
            std::string(headerSize - json.size(), ' '));
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + headerSize, values, sizeof(values)),
            0);
}

TEST_F(SafetensorsTest, ReadsAFileWrittenByAnotherWriter) {
  // Metadata last, no padding, keys in a different order: all legal.
  std::string header =
      R"({"b":{"data_offsets":[4,12],"shape":[2],"dtype":"I32"},)"
      R"("a":{"shape":[],"dtype":"F32","data_offsets":[0,4]},)"
      R"("__metadata__":{"format":"pt"}})";
  std::string data(12, '\0');
  data[0] = 1;
  data[4] = 2;
  std::string path = dir.file("other.safetensors");
  writeBytes(path, rawFile(header, data));
  std::string error;
  auto file = SafetensorsFile::open(path, &error);
  ASSERT_NE(file, nullptr) << error;
  ASSERT_EQ(file->tensors().size(), 2u);
  // Ordered by position in the buffer, not by header order.
  EXPECT_EQ(file->tensors()[0].name, "a");
  EXPECT_EQ(file->tensors()[1].name, "b");
  EXPECT_EQ(file->tensors()[1].shape, std::vector<int64_t>{2});
  EXPECT_EQ(file->tensors()[1].data[0], 2);
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

TEST_F(SafetensorsTest, EmptyFileRoundTrips) {
  SafetensorsWriter writer;
  std::string path = dir.file("empty.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;
  EXPECT_EQ(readBytes(path), lengthPrefix(8) + "{}      ");
  auto file = SafetensorsFile::open(path, &error);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
}

TEST_F(SafetensorsTest, BorrowedDataIsWrittenWithoutCopy) {
  std::vector<int64_t> values = {1, -2, 3, -4};
  SafetensorsWriter writer;
  writer.addBorrowed("step", DType::I64, {2, 2}, values.data(),
                     values.size() * sizeof(int64_t));
  // A borrowed tensor is read at write() time, so later changes are seen.
  values[0] = 42;
  std::string path = dir.file("b.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;
  auto file = SafetensorsFile::open(path, &error);
  ASSERT_NE(file, nullptr) << error;
  const TensorView *view = file->find("step");
  ASSERT_NE(view, nullptr);
  int64_t first;
  std::memcpy(&first, view->data, sizeof(first));
  EXPECT_EQ(first, 42);
}

TEST_F(SafetensorsTest, ZerosAreWrittenAsAHole) {
  // 8 MiB of zeros between two small tensors, and 4 MiB at the end (the
  // file's size must cover a trailing hole): read back as zeros, the
  // tensors after a hole where they belong. (Whether the holes take no
  // blocks depends on the file system: not checked.)
  std::vector<float> head = {1, 2, 3}, tail = {4, 5};
  SafetensorsWriter writer;
  writer.addBorrowed("a", DType::F32, {3}, head.data(), 12);
  writer.addZeros("m", DType::F32, {1024, 2048});
  writer.addBorrowed("b", DType::F32, {2}, tail.data(), 8);
  writer.addZeros("v", DType::F32, {1024, 1024});
  std::string path = dir.file("z.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;
  auto file = SafetensorsFile::open(path, &error);
  ASSERT_NE(file, nullptr) << error;
  for (const char *name : {"m", "v"}) {
    const TensorView *view = file->find(name);
    ASSERT_NE(view, nullptr) << name;
    const auto *bytes = static_cast<const uint8_t *>(view->data);
    size_t nonzero = 0;
    for (size_t i = 0; i < view->nbytes; ++i)
      nonzero += bytes[i] != 0;
    EXPECT_EQ(nonzero, 0u) << name;
  }
  EXPECT_EQ(file->find("m")->nbytes, size_t(8) << 20);
  EXPECT_EQ(file->find("v")->nbytes, size_t(4) << 20);
  float b[2];
  std::memcpy(b, file->find("b")->data, sizeof(b));
  EXPECT_EQ(b[0], 4.0f);
  EXPECT_EQ(b[1], 5.0f);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GE(st.st_size, (12 << 20) + 20);
  // Zeros given a size that overflows are refused like any bad shape.
  SafetensorsWriter bad;
  bad.addZeros("huge", DType::F64, {int64_t(1) << 62, 8});
  EXPECT_FALSE(bad.write(dir.file("bad.safetensors"), &error));
  EXPECT_NE(error.find("overflows"), std::string::npos) << error;
}

TEST_F(SafetensorsTest, AtomicWriteLeavesNoTemporaryFile) {
  std::string path = dir.file("ckpt.safetensors");
  std::string error;
  for (int round = 0; round < 3; ++round) {
    SafetensorsWriter writer;
    int32_t value = round;
    writer.add("round", DType::I32, {}, &value, sizeof(value));
    ASSERT_TRUE(writer.write(path, &error)) << error;
    EXPECT_EQ(dir.list(), std::vector<std::string>{"ckpt.safetensors"});
    auto file = SafetensorsFile::open(path, &error);
    ASSERT_NE(file, nullptr) << error;
    int32_t read;
    std::memcpy(&read, file->find("round")->data, sizeof(read));
    EXPECT_EQ(read, round); // The rename replaced the previous file.
  }
}

TEST_F(SafetensorsTest, FailedWriteLeavesNoTemporaryFile) {
  // Renaming a file over a non-empty directory fails after the temporary
  // file was written: it must be cleaned up.
  std::string target = dir.file("occupied");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  writeBytes(target + "/keep", "x");
  SafetensorsWriter writer;
  int8_t value = 1;
  writer.add("v", DType::I8, {1}, &value, 1);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(writer.write(target, &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_NE(error.find(target + ": cannot rename"), std::string::npos) << error;
  EXPECT_EQ(dir.list(), std::vector<std::string>{"occupied"});
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryFails) {
  std::string path = dir.file("no/such/dir/x.safetensors");
  SafetensorsWriter writer;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(writer.write(path, &error, &code));
  EXPECT_EQ(code, ErrorCode::IO);
  EXPECT_NE(error.find(path + ": cannot create temporary file"),
            std::string::npos)
      << error;
  EXPECT_TRUE(dir.list().empty());
}

namespace {
/// Calls write() on a writer that was fed bad input; returns the error.
std::string writeError(const SafetensorsWriter &writer, const TempDir &dir) {
  std::string path = dir.file("bad.safetensors");
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(writer.write(path, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
  EXPECT_TRUE(dir.list().empty()) << "a failed write created a file";
  return error;
}
} // namespace

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float data[4] = {};
  struct Case {
    const char *what;
    std::function<void(SafetensorsWriter &)> feed;
    const char *message;
  };
  const Case cases[] = {
      {"size mismatch",
       [&](SafetensorsWriter &w) {
         w.add("w", DType::F32, {2, 2}, data, 12);
       },
       "tensor 'w': 12 bytes given, but shape [2, 2] of f32 needs 16"},
      {"duplicate",
       [&](SafetensorsWriter &w) {
         w.add("w", DType::F32, {1}, data, 4);
         w.add("x", DType::F32, {1}, data, 4);
         w.add("w", DType::F32, {1}, data, 4);
       },
       "tensor 'w' was added twice"},
      {"negative dim",
       [&](SafetensorsWriter &w) {
         w.add("w", DType::F32, {2, -1}, data, 0);
       },
       "tensor 'w': shape [2, -1] has a negative dimension"},
      {"overflow",
       [&](SafetensorsWriter &w) {
         w.add("w", DType::F32, {int64_t(1) << 40, int64_t(1) << 40}, data, 16);
       },
       "tensor 'w': shape [1099511627776, 1099511627776] of f32 has a byte "
       "size that overflows 64 bits"},
      {"reserved name",
       [&](SafetensorsWriter &w) {
         w.add("__metadata__", DType::F32, {1}, data, 4);
       },
       "tensor '__metadata__': the name is reserved"},
      {"bad enum",
       [&](SafetensorsWriter &w) {
         w.add("w", static_cast<DType>(99), {1}, data, 4);
       },
       "tensor 'w': invalid dtype value 99"},
      {"null data",
       [&](SafetensorsWriter &w) { w.add("w", DType::F32, {1}, nullptr, 4); },
       "tensor 'w': data is null"},
      {"bad utf8 name",
       [&](SafetensorsWriter &w) { w.add("w\xff", DType::F32, {1}, data, 4); },
       "tensor 'w\xff': the name is not valid UTF-8"},
      {"bad utf8 metadata",
       [&](SafetensorsWriter &w) { w.setMetadata("k", "\xc0\x80"); },
       "metadata 'k': key and value must be UTF-8"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    SafetensorsWriter writer;
    c.feed(writer);
    std::string error = writeError(writer, dir);
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

TEST_F(SafetensorsTest, FirstWriterErrorWins) {
  float data[2] = {};
  SafetensorsWriter writer;
  writer.add("first", DType::F32, {2}, data, 4);
  writer.add("second", DType::F32, {-2}, data, 8);
  std::string error = writeError(writer, dir);
  EXPECT_NE(error.find("tensor 'first'"), std::string::npos) << error;
  EXPECT_EQ(error.find("second"), std::string::npos) << error;
}

TEST_F(SafetensorsTest, NullErrorPointersAreAllowed) {
  SafetensorsWriter writer;
  float data = 0;
  writer.add("w", DType::F32, {2}, &data, 4);
  EXPECT_FALSE(writer.write(dir.file("x.safetensors"), nullptr));
  EXPECT_EQ(SafetensorsFile::open(dir.file("missing"), nullptr), nullptr);
}

TEST_F(SafetensorsTest, SummaryListsTensorsAndMetadata) {
  SafetensorsWriter writer;
  float w[6] = {};
  writer.add("fc1.weight", DType::F32, {2, 3}, w, sizeof(w));
  writer.add("step", DType::I64, {}, w, 8);
  writer.add("odd\nname", DType::Bool, {0}, nullptr, 0);
  writer.setMetadata("format", "pt");
  std::string path = dir.file("s.safetensors");
  std::string error;
  ASSERT_TRUE(writer.write(path, &error)) << error;
  auto file = SafetensorsFile::open(path, &error);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_EQ(formatSafetensorsSummary(*file), "fc1.weight f32 [2, 3] 24\n"
                                             "step i64 [] 8\n"
                                             "odd\\nname i1 [0] 0\n"
                                             "__metadata__ format=pt\n");
}
