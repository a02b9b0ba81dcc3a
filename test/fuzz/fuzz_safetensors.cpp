//===- fuzz_safetensors.cpp - libFuzzer harness of the safetensors reader -===//
//
// The input is a safetensors file: it is written to the harness's private
// directory and opened by loomrt::SafetensorsFile::open (mmap, header
// validation). For a file that opens, every tensor's view is checked against
// the input bytes: the views tile the data section exactly (the format allows
// no holes or overlaps), each has the byte size of its dtype and shape, each
// holds the file's bytes, find() returns it by name, and the summary can be
// formatted. A failure must come with a message and an error code.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "loomrt/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <optional>

using namespace loomrt;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loomfuzz::TempDir::get();
  return 0;
}

static void checkFile(const SafetensorsFile &file, const uint8_t *data,
                      size_t size) {
  if (file.fileSize() != size)
    loomfuzz::fail("fileSize() differs from the file's size");
  if (size < 8)
    loomfuzz::fail("a file shorter than 8 bytes opened");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(data[i]) << (8 * i);
  if (headerSize > size - 8)
    loomfuzz::fail("a header longer than the file was accepted");
  const uint8_t *section = data + 8 + headerSize;
  uint64_t sectionSize = size - 8 - headerSize;

  // The views of non-empty tensors, by position in the data section: they
  // must be contiguous from the first one.
  std::vector<const TensorView *> views;
  for (const TensorView &t : file.tensors()) {
    std::optional<uint64_t> bytes = checkedByteSize(t.dtype, t.shape);
    if (!bytes || *bytes != t.nbytes)
      loomfuzz::fail("a tensor's size does not match its dtype and shape");
    if (file.find(t.name) != &t)
      loomfuzz::fail("find() does not return the tensor of that name");
    if (t.nbytes > 0)
      views.push_back(&t);
  }
  std::sort(views.begin(), views.end(),
            [](const TensorView *a, const TensorView *b) {
              return a->data < b->data;
            });
  const uint8_t *base = views.empty() ? nullptr : views.front()->data;
  uint64_t covered = 0;
  for (const TensorView *t : views) {
    uint64_t offset = static_cast<uint64_t>(t->data - base);
    if (offset != covered)
      loomfuzz::fail("the tensors do not tile the data section");
    if (offset + t->nbytes > sectionSize)
      loomfuzz::fail("a tensor reaches past the end of the file");
    if (std::memcmp(t->data, section + offset, t->nbytes) != 0)
      loomfuzz::fail("a tensor's bytes are not the file's");
    covered += t->nbytes;
  }
  if (covered != sectionSize)
    loomfuzz::fail("the data section has bytes no tensor indexes");
  for (const auto &[key, value] : file.metadata())
    (void)key, (void)value;
  std::string summary = formatSafetensorsSummary(file);
  if (!file.tensors().empty() && summary.empty())
    loomfuzz::fail("formatSafetensorsSummary failed");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  int fdBefore = loomfuzz::lowestFreeFd();
  std::string path = dir.write("input.safetensors", data, size);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  {
    std::unique_ptr<SafetensorsFile> file =
        SafetensorsFile::open(path, &error, &code);
    if (!file) {
      if (error.empty() || code == ErrorCode::Ok)
        loomfuzz::fail("a failure came back without a message or code");
    } else {
      checkFile(*file, data, size);
    }
  }
  dir.removeInput("input.safetensors");
  loomfuzz::checkNoFdLeak(fdBefore);
  return 0;
}
