//===- Safetensors.h - Read and write safetensors files -------------------===//
//
// Parameters, optimizer state and checkpoints live in safetensors files
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON describing each tensor, then the raw bytes.
//
// Nothing here throws: the compiler that includes this header builds with
// -fno-exceptions, so every failure comes back as `false`/nullptr plus a
// message naming the file and the offending tensor.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SAFETENSORS_H
#define LOOMRT_SAFETENSORS_H

#include "loomrt/DType.h"
#include "loomrt/ErrorCode.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

/// Largest JSON header accepted, as in the reference implementation: a bound
/// on what a hostile file can make us allocate and parse.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100u * 1000u * 1000u;

/// A tensor inside an open SafetensorsFile. `data` points into the file's
/// mapping and is valid while the SafetensorsFile lives. The format does not
/// align tensors, so `data` may be misaligned for its dtype: copy it (memcpy)
/// rather than casting to `const float *`.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data;
  size_t nbytes;
};

/// Collects tensors, then writes them as one safetensors file. Tensors are
/// laid out in insertion order with no padding between them (the format
/// forbids holes); the JSON header is padded with spaces so the data starts
/// 8-byte aligned in the file.
///
/// Invalid input to add() (a size that does not match the shape, a duplicate
/// name, ...) is remembered and reported by write(), so a sequence of add()
/// calls needs no error checks of its own.
class SafetensorsWriter {
public:
  /// Adds a tensor, copying its `nbytes` bytes.
  void add(std::string name, DType dtype, std::vector<int64_t> shape,
           const void *data, size_t nbytes) noexcept;

  /// Adds a tensor without copying: `data` must stay valid until the last
  /// write() returns. Suited to checkpointing large live buffers.
  void addBorrowed(std::string name, DType dtype, std::vector<int64_t> shape,
                   const void *data, size_t nbytes) noexcept;

  /// Adds a tensor of zeros without holding its bytes: written as a hole
  /// (a sparse file where the file system allows it). Optimizer state
  /// starts so.
  void addZeros(std::string name, DType dtype,
                std::vector<int64_t> shape) noexcept;

  /// Sets a "__metadata__" entry (a later call with the same key replaces it).
  void setMetadata(std::string key, std::string value) noexcept;

  /// Number of tensors added so far.
  size_t size() const noexcept { return entries.size(); }

  /// Writes the file atomically: to "<path>.tmp.<pid>", fsync, rename over
  /// `path`, fsync the directory. Readers see the old file or the new one,
  /// never a partial one, and a failure leaves no temporary file behind.
  /// On failure returns false and, if non-null, sets `*error` and `*code`.
  bool write(const std::string &path, std::string *error,
             ErrorCode *code = nullptr) const noexcept;

private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> owned; // The copy made by add(); empty if borrowed.
    const uint8_t *borrowed;    // The caller's bytes for addBorrowed().
    size_t nbytes;
    bool zeros = false;         // addZeros(): nbytes zero bytes, no data.
  };
  void addEntry(std::string &name, DType dtype, std::vector<int64_t> &shape,
                const void *data, size_t nbytes, bool copy,
                bool zeros = false) noexcept;
  void fail(ErrorCode code, std::string message) noexcept;

  std::vector<Entry> entries;
  std::map<std::string, std::string> meta;
  // The first problem found by add()/setMetadata(), reported by write();
  // deferredCode != Ok marks the writer as failed.
  std::string deferredError;
  ErrorCode deferredCode = ErrorCode::Ok;
};

/// A validated, read-only, memory-mapped safetensors file.
class SafetensorsFile {
public:
  /// Opens and validates `path`. Every header entry is checked (known dtype,
  /// shape, offsets inside the buffer, size == product(shape) * dtype size,
  /// no overlaps, no unindexed bytes) before any TensorView is exposed. On
  /// failure returns nullptr and, if non-null, sets `*error` (naming the file
  /// and the tensor) and `*code` (IO when the file cannot be read, Format when
  /// it is malformed, Unsupported for a dtype Loom does not handle).
  ///
  /// The file is mapped, not copied: truncating it while it is open is
  /// undefined behaviour (SIGBUS), as for any mmap reader. The writer above
  /// replaces files by rename, which is safe.
  static std::unique_ptr<SafetensorsFile>
  open(const std::string &path, std::string *error,
       ErrorCode *code = nullptr) noexcept;

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  /// Tensors in the order of their data in the file (for files this library
  /// wrote: insertion order).
  const std::vector<TensorView> &tensors() const noexcept;

  /// The tensor called `name`, or nullptr.
  const TensorView *find(std::string_view name) const noexcept;

  /// The "__metadata__" entries (empty if the file has none).
  const std::map<std::string, std::string> &metadata() const noexcept;

  /// The path given to open().
  const std::string &path() const noexcept;

  /// Total file size in bytes.
  uint64_t fileSize() const noexcept;

private:
  SafetensorsFile() noexcept;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Human-readable summary: one line per tensor, "name dtype [d0, d1] nbytes",
/// then one line per metadata entry, "__metadata__ key=value". Control bytes in
/// names and values are escaped so each entry stays on one line. Returns an
/// empty string if memory runs out.
std::string formatSafetensorsSummary(const SafetensorsFile &file) noexcept;

} // namespace loomrt

#endif // LOOMRT_SAFETENSORS_H
