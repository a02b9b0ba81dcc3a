//===- Backend.h - The device interface a plan executes through -----------===//
//
// A Backend owns a device's memory and launches its work. The plan executor
// (Artifact) only speaks this interface, so a CUDA backend (driver API,
// cuBLASLt, reached through dlopen) slots in beside the CPU one. Nothing here
// assumes the arena is host memory: data moves in and out only through
// upload() and download(), and steps name buffers by byte offset. Work is
// issued in order and may run asynchronously until synchronize().
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
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

class Collectives;

/// Device memory of one entry point (or of the resident training state):
/// `size()` bytes, 64-byte aligned. Only the Backend that allocated it may use
/// it.
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
  uint64_t offsetBias = 0; ///< when gemmEpilogueHasBias(step->epilogue)
};

/// Operands of one conv step: its buffers as the plan declares them (shape
/// and arena offset).
struct ConvCall {
  const ConvStep *step = nullptr;
  const PlanBuffer *x = nullptr, *w = nullptr, *y = nullptr;
};

/// Operands of one attention step: its buffers as the plan declares them
/// (null where the step has none: mask, bias, and the backward's dout, dq,
/// dk, dv, dbias in a forward step).
struct AttentionCall {
  const AttentionStep *step = nullptr;
  const PlanBuffer *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr,
                   *lse = nullptr;
  const PlanBuffer *mask = nullptr, *bias = nullptr, *segments = nullptr,
                   *seed = nullptr;
  const PlanBuffer *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr,
                   *dbias = nullptr;
};

/// Operands of one linear_cross_entropy step: its buffers as the plan
/// declares them (null where its direction has none: loss in a backward
/// step; dloss, dx and dw in a forward one).
struct LinearCrossEntropyCall {
  const LinearCrossEntropyStep *step = nullptr;
  const PlanBuffer *x = nullptr, *w = nullptr, *labels = nullptr,
                   *lse = nullptr, *loss = nullptr;
  const PlanBuffer *dloss = nullptr, *dx = nullptr, *dw = nullptr;
};

/// Work recorded once and replayed (a CUDA graph). Only the Backend that
/// recorded it may replay it.
class Recording {
public:
  virtual ~Recording();
};

/// How a backend is created: CUDA reads its environment (LOOMRT_CUDA_DRIVER,
/// LOOMRT_CUDA_DEVICE, ...) at creation; these are the options a caller sets.
struct BackendOptions {
  /// Where a note goes (e.g. "JIT-compiling kernels.ptx"); null: stderr.
  std::FILE *log = nullptr;
  /// This process's rank among the processes of its machine (from the
  /// launcher), or -1. CUDA: unless LOOMRT_CUDA_DEVICE names a device, a
  /// process of local rank r >= 0 takes device r modulo the device count
  /// (one GPU per rank, as NCCL needs); -1 takes device 0.
  int localRank = -1;
};

class Backend {
public:
  virtual ~Backend();

  /// "cpu", "cuda".
  virtual std::string_view name() const noexcept = 0;

  /// Loads the plan's kernel image(s) from the artifact directory `dir` and
  /// resolves every symbol of plan.kernelSymbols (kernel `i` of launchKernel
  /// is kernelSymbols[i]), plus whatever else the plan needs before it runs
  /// (cuBLASLt on CUDA when an entry has a gemm step). Fails naming the file
  /// and the first missing symbol. Called once, before anything else.
  virtual bool load(const Plan &plan, const std::string &dir,
                    std::string *error, ErrorCode *code) noexcept = 0;

  /// A zero-filled arena of `bytes` bytes (at least one byte is allocated).
  virtual std::unique_ptr<Arena> allocateArena(uint64_t bytes,
                                               std::string *error,
                                               ErrorCode *code) noexcept = 0;

  /// Host → device: `src` may be reused as soon as the call returns (a
  /// device backend copies it into pinned staging memory first), and the
  /// copy is ordered before every later operation. The range must lie
  /// inside the arena.
  virtual bool upload(Arena &arena, uint64_t offset, const void *src,
                      uint64_t bytes, std::string *error) noexcept = 0;
  /// Device → host, ordered after every earlier operation: `dst` holds the
  /// bytes once the next synchronize() has returned true (the CPU backend
  /// copies at once).
  virtual bool download(Arena &arena, uint64_t offset, void *dst,
                        uint64_t bytes, std::string *error) noexcept = 0;

  /// Calls kernel `step.kernelIndex` with buffers[i] = arena + offsets[i]
  /// (on CUDA with the step's grid, block and shared memory).
  virtual bool launchKernel(Arena &arena, const PlanStep &step,
                            const std::vector<uint64_t> &offsets,
                            std::string *error) noexcept = 0;

  /// C_i = epilogue(op(A_i) * op(B_i)) for each batch element
  /// (docs/plan-format.md).
  virtual bool gemm(Arena &arena, const GemmCall &call,
                    std::string *error) noexcept = 0;

  /// Writes the conv step's output (docs/plan-format.md). Only the CPU
  /// backend runs conv steps (parsePlan refuses them in other plans); the
  /// default fails.
  virtual bool conv(Arena &arena, const ConvCall &call,
                    std::string *error) noexcept;

  /// Writes the attention step's outputs (docs/plan-format.md): out and
  /// lse, or dq, dk, dv (and dbias). Only the CPU backend runs attention
  /// steps (the CUDA backend refuses them at load); the default fails.
  virtual bool attention(Arena &arena, const AttentionCall &call,
                         std::string *error) noexcept;

  /// Writes the linear_cross_entropy step's outputs (docs/plan-format.md):
  /// loss and lse, or dx and dw. False with a message naming the node and
  /// the row for a label outside [0, V) that is not the ignore_index. Only
  /// the CPU backend runs these steps (the CUDA backend refuses them at
  /// load); the default fails.
  virtual bool linearCrossEntropy(Arena &arena,
                                  const LinearCrossEntropyCall &call,
                                  std::string *error) noexcept;

  /// Copies `bytes` bytes inside the arena (ranges equal or disjoint).
  virtual bool copy(Arena &arena, uint64_t srcOffset, uint64_t dstOffset,
                    uint64_t bytes, std::string *error) noexcept = 0;

  /// Copies `bytes` bytes from one arena to another (the resident training
  /// state to and from an entry's arena), device to device.
  virtual bool copyBetween(Arena &src, uint64_t srcOffset, Arena &dst,
                           uint64_t dstOffset, uint64_t bytes,
                           std::string *error) noexcept = 0;

  /// Whether arenas are host memory the host may read and write between
  /// operations (the CPU's), and the address of `offset` in one (null
  /// elsewhere).
  virtual bool hostArenas() const noexcept { return false; }
  virtual void *hostAddress(Arena & /*arena*/, uint64_t /*offset*/) noexcept {
    return nullptr;
  }
  /// The device address of `offset` in `arena` (CUDA: the CUdeviceptr), as
  /// the backend's device collectives take it; null where the arenas are
  /// host memory.
  virtual void *deviceAddress(Arena & /*arena*/, uint64_t /*offset*/) noexcept {
    return nullptr;
  }

  /// Device collectives: communication between the ranks of `bootstrap`
  /// (host collectives, e.g. MPI) on this backend's device memory (the
  /// pointers of deviceAddress), queued on the stream that carries the
  /// backend's other work, so each is ordered after the steps before it
  /// and before the steps after it with no host round trip. CUDA: one NCCL
  /// communicator over `bootstrap`'s ranks on this backend's device, rank
  /// 0's unique id sent to the others over `bootstrap`; a collective: every
  /// rank of `bootstrap` calls it at the same time. A Request of theirs
  /// gives up after `timeoutSeconds` (0: never), aborting the
  /// communicator. Null with the reason where the backend has none (the
  /// default; the CPU's arenas are host memory) or they cannot start (no
  /// libnccl.so.2, another rank failed).
  virtual std::unique_ptr<Collectives>
  startDeviceCollectives(Collectives &bootstrap, double timeoutSeconds,
                         std::string *error) noexcept;
  /// Whether startDeviceCollectives can work on this machine (CUDA: NCCL
  /// loads, and is 2.10 or newer); false with the reason ("no NCCL
  /// (libnccl.so.2 not found): install NCCL ... or set
  /// LOOMRT_NCCL_LIBRARY") otherwise. Starts nothing.
  virtual bool deviceCollectivesAvailable(std::string *error) const noexcept;

  /// Waits until all work issued so far has finished (no-op on CPU) and
  /// completes pending downloads.
  virtual bool synchronize(std::string *error) noexcept = 0;

  /// Recording: when canRecord(), the launches, GEMMs and copies issued
  /// between beginRecording() and endRecording() are not run but recorded
  /// (a CUDA graph); replay() runs them again, ordered like any other
  /// operation. upload, download and synchronize may not be called while
  /// recording. The CPU backend cannot record.
  virtual bool canRecord() const noexcept { return false; }
  virtual bool beginRecording(std::string *error) noexcept;
  virtual std::unique_ptr<Recording> endRecording(std::string *error) noexcept;
  virtual bool replay(Recording &recording, std::string *error) noexcept;
};

/// Threads of the CPU backend: its kernels' (OpenMP) and its GEMMs'
/// (OpenBLAS). `n` >= 1, or 0 for the libraries' default (all cores). Call
/// before loading a CPU artifact: the kernels' OpenMP runtime reads
/// OMP_NUM_THREADS, which this sets, when it starts.
void setCpuThreads(int n) noexcept;

/// The backend for a plan's `target`: "cpu" or "cuda". Unsupported for
/// others; for "cuda" without a usable driver or device, Unsupported with
/// the reason ("no CUDA driver (libcuda.so.1 not found): ...").
std::unique_ptr<Backend>
createBackend(std::string_view target, std::string *error,
              ErrorCode *code = nullptr,
              const BackendOptions &options = {}) noexcept;

} // namespace loomrt

#endif // LOOMRT_BACKEND_H
