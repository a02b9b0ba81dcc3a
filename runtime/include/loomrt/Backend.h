//===- Backend.h - The device interface a plan executes through -----------===//
//
// A Backend owns a device's memory and launches its work. The plan executor
// (Artifact) only speaks this interface, so a CUDA backend (driver API,
// cuBLASLt, reached through dlopen) slots in beside the CPU one. Nothing here
// assumes the arena is host memory: data moves in and out only through
// upload() and download(), and steps name buffers by byte offset.
//
// Every method reports failure as `false` plus a message; none throws.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_BACKEND_H
#define LOOMRT_BACKEND_H

#include "loomrt/DType.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

/// Device memory of one entry point: `size()` bytes, 64-byte aligned. Only the
/// Backend that allocated it may use it.
class Arena {
public:
  virtual ~Arena();
  virtual uint64_t size() const noexcept = 0;
};

/// Operands of one GEMM step, resolved to byte offsets in the arena.
struct GemmCall {
  DType dtype = DType::F32; ///< f32 or f64
  const GemmStep *step = nullptr;
  uint64_t offsetA = 0, offsetB = 0, offsetC = 0;
};

class Backend {
public:
  virtual ~Backend();

  /// "cpu", "cuda".
  virtual std::string_view name() const noexcept = 0;

  /// Loads the kernel image at `path` (kernels.so on CPU) and resolves each
  /// of `symbols`; kernel `i` of launchKernel is `symbols[i]`. Fails naming
  /// the first missing symbol. Called at most once.
  virtual bool loadKernels(const std::string &path,
                           const std::vector<std::string> &symbols,
                           std::string *error, ErrorCode *code) noexcept = 0;

  /// A zero-filled arena of `bytes` bytes (at least one byte is allocated).
  virtual std::unique_ptr<Arena> allocateArena(uint64_t bytes,
                                               std::string *error,
                                               ErrorCode *code) noexcept = 0;

  /// Host → device and device → host. The range must lie inside the arena.
  virtual bool upload(Arena &arena, uint64_t offset, const void *src,
                      uint64_t bytes, std::string *error) noexcept = 0;
  virtual bool download(Arena &arena, uint64_t offset, void *dst,
                        uint64_t bytes, std::string *error) noexcept = 0;

  /// Calls kernel `kernel` with buffers[i] = arena + offsets[i].
  virtual bool launchKernel(Arena &arena, uint32_t kernel,
                            const std::vector<uint64_t> &offsets,
                            std::string *error) noexcept = 0;

  /// C_i = op(A_i) * op(B_i) for each batch element (docs/plan-format.md).
  virtual bool gemm(Arena &arena, const GemmCall &call,
                    std::string *error) noexcept = 0;

  /// Copies `bytes` bytes inside the arena (ranges equal or disjoint).
  virtual bool copy(Arena &arena, uint64_t srcOffset, uint64_t dstOffset,
                    uint64_t bytes, std::string *error) noexcept = 0;

  /// Waits until all work issued so far has finished (no-op on CPU).
  virtual bool synchronize(std::string *error) noexcept = 0;
};

/// The backend for a plan's `target`: "cpu" today. Unsupported for others.
std::unique_ptr<Backend> createBackend(std::string_view target,
                                       std::string *error,
                                       ErrorCode *code = nullptr) noexcept;

} // namespace loomrt

#endif // LOOMRT_BACKEND_H
