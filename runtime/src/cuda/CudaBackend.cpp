//===- CudaBackend.cpp - Run plans on an NVIDIA GPU through the driver API
//-===//
//
// One stream carries everything, in plan order. Each arena is one cuMemAlloc
// (zeroed by cuMemsetD8Async on that stream). Uploads are copied into a
// pinned staging buffer and sent with cuMemcpyHtoDAsync, so the caller's
// memory is free at once and the host goes on (assembling the next batch)
// while the GPU works; downloads land in the same staging buffer and are
// copied out at synchronize(). Kernels come from the plan's cubin, or its PTX
// (JIT-compiled by the driver) when the cubin is for another architecture;
// each kernel takes one .u64 device pointer per buffer. GEMMs go to
// cuBLASLt in column-major form with the operands swapped (row-major
// C = A B is column-major C^T = B^T A^T), strided batches through the layout
// attributes, f32 without TF32 unless LOOMRT_CUDA_ALLOW_TF32=1. Recording is
// stream capture into a CUDA graph. Device collectives are NCCL
// (NcclCollectives) on this device's primary context and on the same
// stream, so a plan's collective steps are ordered with its kernels by the
// stream alone. Once they are, a wait for the stream may be stuck behind
// a collective whose peer died or hangs: every such wait (synchronize(), and
// freeing an arena or the backend) polls cuStreamQuery within the
// collectives' timeout instead of blocking in cuStreamSynchronize, and past
// it aborts the communicators queued on the stream (StreamWatch).
//
//===----------------------------------------------------------------------===//

#include "loomrt/Backend.h"

#include "../Backends.h"
#include "../Support.h"
#include "CudaApi.h"
#include "NcclApi.h"
#include "NcclCollectives.h"

#include "loomrt/Collectives.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <vector>

namespace loomrt {

namespace {

using namespace cuda;

/// Sets `*error` (if non-null) without ever throwing.
void setError(std::string *error, const std::string &message) noexcept {
  if (!error)
    return;
  try {
    *error = message;
  } catch (...) {
  }
}

std::string smName(int64_t sm) { return "sm_" + std::to_string(sm); }

/// "60", "1.5": seconds as a message says them.
std::string secondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string envString(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

/// How a wait for the backend's stream ends, shared by the backend and its
/// arenas. Until device collectives are started on
/// the stream, nothing on it waits for another rank: cuStreamSynchronize.
/// After, an NCCL collective on it may wait for a rank that died or hangs,
/// so the stream is polled (cuStreamQuery) for at most the collectives'
/// timeout; past it, every communicator started on the stream is aborted
/// (their kernels end, which drains the stream) and the stream given as
/// long again.
struct StreamWatch {
  StreamWatch(const DriverApi &cu, CUstream stream) : cu(cu), stream(stream) {}

  const DriverApi &cu;
  CUstream stream;
  bool collectives = false;  ///< device collectives were started on it
  double timeoutSeconds = 0; ///< theirs; 0: no limit
  /// NcclOptions::abort of each communicator started on the stream.
  std::vector<std::function<void(const std::string &)>> aborts;

  /// Whether waits poll (else cuStreamSynchronize: no collective on the
  /// stream, or a timeout of 0, none).
  bool polled() const noexcept { return collectives && timeoutSeconds > 0; }
  /// CUDA_SUCCESS, the stream's error, or CUDA_ERROR_NOT_READY: it timed
  /// out (the communicators were then aborted; `*drained` says whether the
  /// stream then drained within the limit).
  CUresult wait(bool *drained) noexcept {
    *drained = true;
    if (!polled())
      return cu.cuStreamSynchronize(stream);
    CUresult r = waitForStream(cu, stream, timeoutSeconds);
    if (r != CUDA_ERROR_NOT_READY)
      return r;
    try {
      std::string why = "the CUDA stream they are queued on did not drain "
                        "within " +
                        secondsText(timeoutSeconds) +
                        " s (a collective waits for a rank that died or "
                        "hangs)";
      for (auto &abort : aborts)
        if (abort)
          abort(why);
    } catch (...) {
    }
    *drained =
        waitForStream(cu, stream, timeoutSeconds) != CUDA_ERROR_NOT_READY;
    return CUDA_ERROR_NOT_READY;
  }
};

class CudaArena final : public Arena {
public:
  CudaArena(const DriverApi &cu, CUcontext ctx,
            std::shared_ptr<StreamWatch> watch, CUdeviceptr base,
            uint64_t bytes)
      : cu(cu), ctx(ctx), watch(std::move(watch)), base(base), bytes(bytes) {}
  ~CudaArena() override {
    // Work still queued may read this memory: let it finish first. Work
    // that does not finish (a collective stuck past the timeout, even
    // after its communicator was aborted) may still write it: the memory
    // is then left allocated (the run has failed; the process ends).
    cu.cuCtxSetCurrent(ctx);
    bool drained = true;
    watch->wait(&drained);
    if (drained)
      cu.cuMemFree(base);
  }
  uint64_t size() const noexcept override { return bytes; }
  CUdeviceptr data() const noexcept { return base; }

private:
  const DriverApi &cu;
  CUcontext ctx;
  std::shared_ptr<StreamWatch> watch;
  CUdeviceptr base;
  uint64_t bytes;
};

class CudaGraph final : public Recording {
public:
  CudaGraph(const DriverApi &cu, CUcontext ctx, CUgraph graph, CUgraphExec exec)
      : cu(cu), ctx(ctx), graph(graph), exec(exec) {}
  ~CudaGraph() override {
    cu.cuCtxSetCurrent(ctx);
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
  }
  CUgraphExec executable() const noexcept { return exec; }

private:
  const DriverApi &cu;
  CUcontext ctx;
  CUgraph graph;
  CUgraphExec exec;
};

/// The cuBLASLt descriptors of one GEMM step, made on its first call.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

class CudaBackend final : public Backend {
public:
  CudaBackend(const DriverApi &cu, const BackendOptions &options)
      : cu(cu), log(options.log ? options.log : stderr),
        localRank(options.localRank) {}

  ~CudaBackend() override {
    if (!ctx)
      return;
    cu.cuCtxSetCurrent(ctx);
    // Within the collectives' timeout (StreamWatch); work that does not
    // drain may still use the device memory, the staging buffer, the
    // module and the context: they are left as they are (the run failed).
    bool drained = true;
    if (watch)
      watch->wait(&drained);
    if (!drained)
      return;
    if (lt) {
      for (auto &[step, plan] : gemmPlans) {
        lt->cublasLtMatrixLayoutDestroy(plan.a);
        lt->cublasLtMatrixLayoutDestroy(plan.b);
        lt->cublasLtMatrixLayoutDestroy(plan.c);
        lt->cublasLtMatmulDescDestroy(plan.desc);
      }
      if (ltHandle)
        lt->cublasLtDestroy(ltHandle);
    }
    if (workspace)
      cu.cuMemFree(workspace);
    if (module)
      cu.cuModuleUnload(module);
    if (pinned)
      cu.cuMemFreeHost(pinned);
    if (stream)
      cu.cuStreamDestroy(stream);
    cu.cuDevicePrimaryCtxRelease(device);
  }

  /// Picks the device and makes the context current and the stream.
  bool open(std::string *error) {
    int count = 0;
    CUresult r = cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
      setError(error, "no CUDA device: the driver (" + cu.path + ") reports " +
                          (r == CUDA_SUCCESS ? std::string("0 GPUs")
                                             : cu.describe(r)));
      return false;
    }
    int ordinal = 0;
    std::string wanted = envString("LOOMRT_CUDA_DEVICE");
    if (!wanted.empty()) {
      char *end = nullptr;
      long v = std::strtol(wanted.c_str(), &end, 10);
      if (*end || v < 0 || v >= count) {
        setError(error, "LOOMRT_CUDA_DEVICE=" + wanted +
                            " is not a device ordinal (this machine has " +
                            std::to_string(count) + " CUDA device(s))");
        return false;
      }
      ordinal = static_cast<int>(v);
    } else if (localRank > 0) {
      // One GPU per rank of a machine (NCCL refuses two ranks on one).
      ordinal = localRank % count;
    }
    deviceOrdinal = ordinal;
    if (!call(cu.cuDeviceGet(&device, ordinal), "cuDeviceGet", error))
      return false;
    char nameBuf[256] = {0};
    cu.cuDeviceGetName(nameBuf, sizeof nameBuf - 1, device);
    deviceName = nameBuf;
    int major = 0, minor = 0;
    if (!call(cu.cuDeviceGetAttribute(
                  &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
              "cuDeviceGetAttribute", error) ||
        !call(cu.cuDeviceGetAttribute(
                  &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
              "cuDeviceGetAttribute", error))
      return false;
    deviceSm = major * 10 + minor;
    cu.cuDeviceGetAttribute(
        &maxSharedOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        device);
    CUcontext context = nullptr;
    if (!call(cu.cuDevicePrimaryCtxRetain(&context, device),
              "cuDevicePrimaryCtxRetain", error))
      return false;
    ctx = context;
    if (!call(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", error) ||
        !call(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate", error))
      return false;
    try {
      watch = std::make_shared<StreamWatch>(cu, stream);
    } catch (...) {
      setError(error, "out of memory");
      return false;
    }
    return true;
  }

  std::string_view name() const noexcept override { return "cuda"; }

  bool load(const Plan &plan, const std::string &dir, std::string *error,
            ErrorCode *code) noexcept override {
    detail::ErrorSink sink{error, code};
    try {
      bind();
      std::string why;
      ErrorCode failCode = ErrorCode::Format;
      if (!loadImpl(plan, dir, why, failCode)) {
        sink.set(failCode, why);
        return false;
      }
      sink.ok();
      return true;
    } catch (...) {
      sink.outOfMemory(dir);
    }
    return false;
  }

  std::unique_ptr<Arena> allocateArena(uint64_t bytes, std::string *error,
                                       ErrorCode *code) noexcept override {
    detail::ErrorSink sink{error, code};
    try {
      bind();
      uint64_t wanted = bytes == 0 ? 1 : bytes;
      size_t freeBytes = 0, totalBytes = 0;
      cu.cuMemGetInfo(&freeBytes, &totalBytes);
      auto outOfMemory = [&](const std::string &detail) {
        sink.set(ErrorCode::OutOfMemory,
                 "cannot allocate an arena of " + std::to_string(bytes) +
                     " bytes on GPU " + deviceLabel() + ": asked for " +
                     std::to_string(wanted) + " bytes, " +
                     std::to_string(freeBytes) + " bytes free of " +
                     std::to_string(totalBytes) + detail);
        return nullptr;
      };
      if (wanted > SIZE_MAX || (totalBytes && wanted > freeBytes))
        return outOfMemory("");
      CUdeviceptr base = 0;
      CUresult r = cu.cuMemAlloc(&base, static_cast<size_t>(wanted));
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        cu.cuMemGetInfo(&freeBytes, &totalBytes);
        return outOfMemory(" (cuMemAlloc: " + cu.describe(r) + ")");
      }
      if (r != CUDA_SUCCESS) {
        sink.set(ErrorCode::IO, "cuMemAlloc of " + std::to_string(wanted) +
                                    " bytes: " + cu.describe(r));
        return nullptr;
      }
      // 256-byte alignment from the driver covers the plan's 64.
      std::unique_ptr<CudaArena> arena(
          new CudaArena(cu, ctx, watch, base, bytes));
      r = cu.cuMemsetD8Async(base, 0, static_cast<size_t>(wanted), stream);
      if (r != CUDA_SUCCESS) {
        sink.set(ErrorCode::IO, "cuMemsetD8Async: " + cu.describe(r));
        return nullptr;
      }
      sink.ok();
      return arena;
    } catch (...) {
      sink.outOfMemory("arena");
    }
    return nullptr;
  }

  bool upload(Arena &arena, uint64_t offset, const void *src, uint64_t bytes,
              std::string *error) noexcept override {
    if (!arenaRangeOk(arena, offset, bytes, error))
      return false;
    if (!bytes)
      return true;
    bind();
    uint8_t *stage = staging(bytes, error);
    if (!stage)
      return false;
    std::memcpy(stage, src, bytes);
    return call(cu.cuMemcpyHtoDAsync(dev(arena) + offset, stage, bytes, stream),
                "cuMemcpyHtoDAsync", error);
  }

  bool download(Arena &arena, uint64_t offset, void *dst, uint64_t bytes,
                std::string *error) noexcept override {
    if (!arenaRangeOk(arena, offset, bytes, error))
      return false;
    if (!bytes)
      return true;
    bind();
    uint8_t *stage = staging(bytes, error);
    if (!stage)
      return false;
    if (!call(cu.cuMemcpyDtoHAsync(stage, dev(arena) + offset, bytes, stream),
              "cuMemcpyDtoHAsync", error))
      return false;
    try {
      pending.push_back({stage, dst, static_cast<size_t>(bytes)});
    } catch (...) {
      setError(error, "out of memory");
      return false;
    }
    return true;
  }

  bool launchKernel(Arena &arena, const PlanStep &step,
                    const std::vector<uint64_t> &offsets,
                    std::string *error) noexcept override {
    if (step.kernelIndex >= functions.size()) {
      setError(error, "kernel index " + std::to_string(step.kernelIndex) +
                          " was not loaded");
      return false;
    }
    bind();
    // One .u64 parameter per buffer: the driver copies the values at the
    // call (and stream capture copies them into the graph node).
    CUdeviceptr smallPtrs[32];
    void *smallArgs[32];
    std::unique_ptr<CUdeviceptr[]> largePtrs;
    std::unique_ptr<void *[]> largeArgs;
    CUdeviceptr *ptrs = smallPtrs;
    void **args = smallArgs;
    if (offsets.size() > 32) {
      largePtrs.reset(new (std::nothrow) CUdeviceptr[offsets.size()]);
      largeArgs.reset(new (std::nothrow) void *[offsets.size()]);
      if (!largePtrs || !largeArgs) {
        setError(error, "out of memory");
        return false;
      }
      ptrs = largePtrs.get();
      args = largeArgs.get();
    }
    CUdeviceptr base = dev(arena);
    for (size_t i = 0; i < offsets.size(); ++i) {
      ptrs[i] = base + offsets[i];
      args[i] = &ptrs[i];
    }
    const KernelLaunchDims &d = step.launch;
    CUresult r =
        cu.cuLaunchKernel(functions[step.kernelIndex], d.grid[0], d.grid[1],
                          d.grid[2], d.block[0], d.block[1], d.block[2],
                          d.sharedBytes, stream, args, nullptr);
    if (r != CUDA_SUCCESS) {
      setError(error, "cuLaunchKernel(" + step.kernel + "): " + cu.describe(r));
      return false;
    }
    return true;
  }

  bool gemm(Arena &arena, const GemmCall &call,
            std::string *error) noexcept override {
    try {
      bind();
      GemmPlan *plan = gemmPlan(arena, call, error);
      if (!plan)
        return false;
      const GemmStep &g = *call.step;
      CUdeviceptr base = dev(arena);
      const void *alpha = call.dtype == DType::F64
                              ? static_cast<const void *>(&oneF64)
                              : static_cast<const void *>(&oneF32);
      const void *beta = call.dtype == DType::F64
                             ? static_cast<const void *>(&zeroF64)
                             : static_cast<const void *>(&zeroF32);
      auto ptr = [&](uint64_t offset) {
        return reinterpret_cast<void *>(static_cast<uintptr_t>(base + offset));
      };
      // Swapped operands: cuBLASLt's A is the plan's B, its B the plan's A.
      cublasStatus_t s = lt->cublasLtMatmul(
          ltHandle, plan->desc, alpha, ptr(call.offsetB), plan->a,
          ptr(call.offsetA), plan->b, beta, ptr(call.offsetC), plan->c,
          ptr(call.offsetC), plan->c, &plan->algo,
          reinterpret_cast<void *>(static_cast<uintptr_t>(workspace)),
          plan->workspace, stream);
      if (s != CUBLAS_STATUS_SUCCESS) {
        setError(error, "cublasLtMatmul (m " + std::to_string(g.m) + ", n " +
                            std::to_string(g.n) + ", k " + std::to_string(g.k) +
                            ", batch " + std::to_string(g.batch) +
                            "): " + lt->describe(s));
        return false;
      }
      return true;
    } catch (...) {
      setError(error, "out of memory");
    }
    return false;
  }

  bool copy(Arena &arena, uint64_t srcOffset, uint64_t dstOffset,
            uint64_t bytes, std::string *error) noexcept override {
    return copyBetween(arena, srcOffset, arena, dstOffset, bytes, error);
  }

  bool copyBetween(Arena &src, uint64_t srcOffset, Arena &dst,
                   uint64_t dstOffset, uint64_t bytes,
                   std::string *error) noexcept override {
    if (!arenaRangeOk(src, srcOffset, bytes, error) ||
        !arenaRangeOk(dst, dstOffset, bytes, error))
      return false;
    if (!bytes || (&src == &dst && srcOffset == dstOffset))
      return true;
    bind();
    return call(cu.cuMemcpyDtoDAsync(dev(dst) + dstOffset, dev(src) + srcOffset,
                                     bytes, stream),
                "cuMemcpyDtoDAsync", error);
  }

  bool synchronize(std::string *error) noexcept override {
    bind();
    return flush(error);
  }

  void *deviceAddress(Arena &arena, uint64_t offset) noexcept override {
    return reinterpret_cast<void *>(
        static_cast<uintptr_t>(dev(arena) + offset));
  }

  std::unique_ptr<Collectives>
  startDeviceCollectives(Collectives &bootstrap, double timeoutSeconds,
                         std::string *error) noexcept override {
    // NCCL on this backend's device (its primary context, which the
    // arenas live in) and stream: queued behind the kernels, GEMMs and
    // copies issued before, ahead of those issued after.
    NcclOptions options;
    options.device = deviceOrdinal;
    options.stream = stream;
    options.timeoutSeconds = timeoutSeconds;
    std::function<void(const std::string &)> abort;
    options.abort = &abort;
    std::unique_ptr<Collectives> comm = startNccl(bootstrap, options, error);
    bind(); // startNccl made the same context current; no harm
    if (comm) {
      // From now on a wait for the stream may be stuck behind one of its
      // collectives: the stream's waits take the longest timeout (0, none,
      // wins) and can abort it.
      try {
        watch->aborts.push_back(std::move(abort));
      } catch (...) {
        setError(error, "out of memory");
        return nullptr;
      }
      if (!watch->collectives || timeoutSeconds <= 0 ||
          (watch->timeoutSeconds > 0 && timeoutSeconds > watch->timeoutSeconds))
        watch->timeoutSeconds = timeoutSeconds;
      watch->collectives = true;
    }
    return comm;
  }

  bool deviceCollectivesAvailable(std::string *error) const noexcept override {
    try {
      std::string why;
      if (nccl::loadNccl(&why))
        return true;
      setError(error, why);
    } catch (...) {
      setError(error, "out of memory loading NCCL");
    }
    return false;
  }

  bool canRecord() const noexcept override { return true; }

  bool beginRecording(std::string *error) noexcept override {
    bind();
    return call(
        cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture", error);
  }

  std::unique_ptr<Recording>
  endRecording(std::string *error) noexcept override {
    bind();
    CUgraph graph = nullptr;
    if (!call(cu.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture",
              error))
      return nullptr;
    CUgraphExec exec = nullptr;
    CUresult r = cu.cuGraphInstantiateWithFlags(&exec, graph, 0);
    if (r != CUDA_SUCCESS) {
      cu.cuGraphDestroy(graph);
      setError(error, "cuGraphInstantiateWithFlags: " + cu.describe(r));
      return nullptr;
    }
    std::unique_ptr<Recording> recording(new (std::nothrow)
                                             CudaGraph(cu, ctx, graph, exec));
    if (!recording) {
      cu.cuGraphExecDestroy(exec);
      cu.cuGraphDestroy(graph);
      setError(error, "out of memory");
    }
    return recording;
  }

  bool replay(Recording &recording, std::string *error) noexcept override {
    bind();
    return call(cu.cuGraphLaunch(
                    static_cast<CudaGraph &>(recording).executable(), stream),
                "cuGraphLaunch", error);
  }

private:
  struct PendingDownload {
    const uint8_t *from;
    void *to;
    size_t bytes;
  };

  void bind() noexcept { cu.cuCtxSetCurrent(ctx); }

  std::string deviceLabel() const {
    return "'" + deviceName + "' (" + smName(deviceSm) + ")";
  }

  bool call(CUresult r, const char *what, std::string *error) const noexcept {
    if (r == CUDA_SUCCESS)
      return true;
    try {
      setError(error, std::string(what) + ": " + cu.describe(r));
    } catch (...) {
    }
    return false;
  }

  static CUdeviceptr dev(Arena &arena) {
    return static_cast<CudaArena &>(arena).data();
  }

  /// Waits for the stream, hands pending downloads to their owners and frees
  /// the staging buffer for reuse.
  bool flush(std::string *error) noexcept {
    bool drained = true;
    CUresult r = watch->wait(&drained);
    if (r == CUDA_ERROR_NOT_READY) {
      pending.clear();
      try {
        setError(error,
                 "synchronizing the CUDA stream: its work (kernels, copies "
                 "and NCCL collectives) did not complete within " +
                     secondsText(watch->timeoutSeconds) +
                     " s: a collective waits for a rank that died or hangs; "
                     "the NCCL communicators on the stream were aborted" +
                     (drained ? "" : ", and the stream still did not drain"));
      } catch (...) {
      }
      // The staging memory may still be written by a copy that never ran:
      // not reused.
      if (!drained) {
        pinned = nullptr;
        stagingSize = 0;
      }
      stagingUsed = 0;
      return false;
    }
    if (r != CUDA_SUCCESS) {
      pending.clear();
      stagingUsed = 0;
      setError(error, std::string(watch->polled() ? "cuStreamQuery"
                                                  : "cuStreamSynchronize") +
                          ": " + cu.describe(r) +
                          " (a kernel or copy of this run failed)");
      return false;
    }
    for (const PendingDownload &p : pending)
      std::memcpy(p.to, p.from, p.bytes);
    pending.clear();
    stagingUsed = 0;
    return true;
  }

  /// `bytes` of pinned staging memory that no queued copy still uses.
  uint8_t *staging(uint64_t bytes, std::string *error) noexcept {
    uint64_t rounded = (bytes + 255) / 256 * 256;
    if (rounded > stagingSize - stagingUsed) {
      if (!flush(error))
        return nullptr;
      if (rounded > stagingSize) {
        if (pinned)
          cu.cuMemFreeHost(pinned);
        pinned = nullptr;
        stagingSize = 0;
        uint64_t size = std::max<uint64_t>(rounded, uint64_t(4) << 20);
        void *p = nullptr;
        CUresult r = cu.cuMemAllocHost(&p, static_cast<size_t>(size));
        if (r != CUDA_SUCCESS) {
          setError(error, "cuMemAllocHost of " + std::to_string(size) +
                              " bytes (pinned staging): " + cu.describe(r));
          return nullptr;
        }
        pinned = static_cast<uint8_t *>(p);
        stagingSize = size;
      }
    }
    uint8_t *out = pinned + stagingUsed;
    stagingUsed += rounded;
    return out;
  }

  bool loadImpl(const Plan &plan, const std::string &dir, std::string &why,
                ErrorCode &failCode) {
    bool hasGemm = false;
    for (const PlanEntry &e : plan.entries)
      for (size_t i = 0; i < e.steps.size(); ++i) {
        const PlanStep &s = e.steps[i];
        hasGemm |= s.kind == PlanStep::Kind::Gemm;
        // The plan format has attention and linear_cross_entropy steps
        // for every target; this backend runs neither (loomc makes a CUDA
        // attention a generated kernel; the fused LM head is CPU-only).
        if (s.kind == PlanStep::Kind::Attention) {
          why = "entry " + detail::quoteName(e.name) + ": step " +
                std::to_string(i) +
                " (attention): attention steps run on the CPU target only "
                "in this runtime (loomc --target=cuda makes a fused "
                "attention a generated kernel instead)";
          failCode = ErrorCode::Unsupported;
          return false;
        }
        if (s.kind == PlanStep::Kind::LinearCrossEntropy) {
          const std::string &node = s.linearCrossEntropy.node;
          why = "entry " + detail::quoteName(e.name) + ": step " +
                std::to_string(i) + " (linear_cross_entropy" +
                (node.empty() ? "" : ", node " + detail::quoteName(node)) +
                "): linear_cross_entropy steps run on the CPU target only "
                "in this runtime; the CUDA linear_cross_entropy is not built "
                "yet";
          failCode = ErrorCode::Unsupported;
          return false;
        }
      }
    if (hasGemm) {
      lt = loadBlasLt(&why);
      if (!lt) {
        failCode = ErrorCode::Unsupported;
        return false;
      }
      cublasStatus_t s = lt->cublasLtCreate(&ltHandle);
      if (s != CUBLAS_STATUS_SUCCESS) {
        why = "cublasLtCreate: " + lt->describe(s);
        failCode = ErrorCode::IO;
        return false;
      }
      workspaceSize = size_t(32) << 20;
      if (cu.cuMemAlloc(&workspace, workspaceSize) != CUDA_SUCCESS) {
        workspace = 0;
        workspaceSize = 0; // cuBLASLt then picks algorithms without one
      }
    }
    if (plan.kernelSymbols.empty())
      return true;
    if (!loadModule(plan, dir, why, failCode))
      return false;
    // Resolve every kernel; raise the dynamic shared memory limit where a
    // step asks for more than the default 48 KiB.
    std::vector<uint32_t> shared(plan.kernelSymbols.size(), 0);
    for (const PlanEntry &e : plan.entries)
      for (const PlanStep &s : e.steps)
        if (s.kind == PlanStep::Kind::Kernel)
          shared[s.kernelIndex] =
              std::max(shared[s.kernelIndex], s.launch.sharedBytes);
    std::string file =
        plan.kernels.empty() || usedPtx ? plan.ptx : plan.kernels;
    for (size_t i = 0; i < plan.kernelSymbols.size(); ++i) {
      const std::string &symbol = plan.kernelSymbols[i];
      CUfunction fn = nullptr;
      CUresult r = cu.cuModuleGetFunction(&fn, module, symbol.c_str());
      if (r != CUDA_SUCCESS) {
        why = detail::joinPath(dir, file) + ": kernel symbol " +
              detail::quoteName(symbol) +
              " not found (the plan calls it; was " + file +
              " built from the same compile?)";
        return false;
      }
      if (shared[i] > 48 * 1024) {
        if (maxSharedOptin > 0 && shared[i] > uint32_t(maxSharedOptin)) {
          why = "kernel " + detail::quoteName(symbol) + " asks for " +
                std::to_string(shared[i]) +
                " bytes of shared memory per block; GPU " + deviceLabel() +
                " allows " + std::to_string(maxSharedOptin);
          failCode = ErrorCode::Unsupported;
          return false;
        }
        r = cu.cuFuncSetAttribute(
            fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(shared[i]));
        if (r != CUDA_SUCCESS) {
          why = "cuFuncSetAttribute(" + symbol + "): " + cu.describe(r);
          return false;
        }
      }
      functions.push_back(fn);
    }
    return true;
  }

  /// A cubin runs on its own architecture and on later minor revisions of
  /// the same major (sm_80 code on sm_86); anything else needs the PTX.
  bool cubinFits(int64_t planSm) const {
    return planSm / 10 == deviceSm / 10 && deviceSm % 10 >= planSm % 10;
  }

  bool loadModule(const Plan &plan, const std::string &dir, std::string &why,
                  ErrorCode &failCode) {
    std::string cubinPath =
        plan.kernels.empty() ? "" : detail::joinPath(dir, plan.kernels);
    std::string ptxPath =
        plan.ptx.empty() ? "" : detail::joinPath(dir, plan.ptx);
    std::string reason;
    if (!cubinPath.empty()) {
      if (cubinFits(plan.sm)) {
        std::vector<uint8_t> image;
        detail::ErrorSink sink{&why, &failCode};
        if (!detail::readWholeFile(cubinPath, image, sink))
          return false;
        CUresult r = cu.cuModuleLoadData(&module, image.data());
        if (r == CUDA_SUCCESS)
          return true;
        module = nullptr;
        if (r != CUDA_ERROR_NO_BINARY_FOR_GPU &&
            r != CUDA_ERROR_INVALID_IMAGE) {
          why = cubinPath + ": cuModuleLoadData: " + cu.describe(r);
          return false;
        }
        reason = plan.kernels + " (" + smName(plan.sm) +
                 ") does not load on GPU " + deviceLabel() + ": " +
                 cu.describe(r);
      } else {
        reason = plan.kernels + " is for " + smName(plan.sm) + ", GPU " +
                 deviceLabel() + " cannot run it";
      }
      if (ptxPath.empty()) {
        why = reason +
              ", and the plan has no ptx to JIT-compile (recompile "
              "with loomc --target=cuda:" +
              smName(deviceSm) + ")";
        failCode = ErrorCode::Unsupported;
        return false;
      }
    }
    // PTX: the driver JIT-compiles it for this GPU (cached by the driver in
    // ~/.nv/ComputeCache).
    if (!reason.empty()) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        std::fprintf(log, "loomrt: note: %s: JIT-compiling %s instead\n",
                     reason.c_str(), plan.ptx.c_str());
    }
    std::vector<uint8_t> text;
    detail::ErrorSink sink{&why, &failCode};
    if (!detail::readWholeFile(ptxPath, text, sink))
      return false;
    text.push_back(0);
    char jitLog[8192] = {0};
    CUjit_option options[2] = {CU_JIT_ERROR_LOG_BUFFER,
                               CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[2] = {jitLog,
                       reinterpret_cast<void *>(uintptr_t(sizeof jitLog - 1))};
    CUresult r =
        cu.cuModuleLoadDataEx(&module, text.data(), 2, options, values);
    if (r != CUDA_SUCCESS) {
      module = nullptr;
      why = ptxPath + ": the driver cannot JIT-compile it for GPU " +
            deviceLabel() + ": " + cu.describe(r) +
            (jitLog[0] ? std::string(": ") + jitLog : std::string());
      failCode = r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                     ? ErrorCode::Unsupported
                     : ErrorCode::Format;
      if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        why += " (the PTX is newer than this driver: update the NVIDIA "
               "driver)";
      return false;
    }
    usedPtx = true;
    return true;
  }

  GemmPlan *gemmPlan(Arena &arena, const GemmCall &call, std::string *error) {
    auto it = gemmPlans.find(call.step);
    if (it != gemmPlans.end())
      return &it->second;
    const GemmStep &g = *call.step;
    GemmPlan plan;
    bool f64 = call.dtype == DType::F64;
    bool half = call.dtype == DType::BF16 || call.dtype == DType::F16;
    // 16-bit operands and results, f32 sums and scalars (alpha, beta).
    int type = f64                          ? CUDA_R_64F
               : call.dtype == DType::BF16 ? CUDA_R_16BF
               : call.dtype == DType::F16  ? CUDA_R_16F
                                           : CUDA_R_32F;
    int scaleType = f64 ? CUDA_R_64F : CUDA_R_32F;
    int compute = f64 ? CUBLAS_COMPUTE_64F
                  : !half && envString("LOOMRT_CUDA_ALLOW_TF32") == "1"
                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                      : CUBLAS_COMPUTE_32F;
    std::string failed;
    auto check = [&](cublasStatus_t s, const char *what) {
      if (s != CUBLAS_STATUS_SUCCESS && failed.empty())
        failed = std::string(what) + ": " + lt->describe(s);
    };
    auto cleanup = [&] {
      if (plan.a)
        lt->cublasLtMatrixLayoutDestroy(plan.a);
      if (plan.b)
        lt->cublasLtMatrixLayoutDestroy(plan.b);
      if (plan.c)
        lt->cublasLtMatrixLayoutDestroy(plan.c);
      if (plan.desc)
        lt->cublasLtMatmulDescDestroy(plan.desc);
    };
    check(lt->cublasLtMatmulDescCreate(&plan.desc, compute, scaleType),
          "cublasLtMatmulDescCreate");
    // Column-major view: D (n x m) = opA(plan B) (n x k) * opB(plan A) (k x m).
    int32_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t opB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t m = g.m, n = g.n, k = g.k;
    if (failed.empty()) {
      check(lt->cublasLtMatmulDescSetAttribute(
                plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA),
            "TRANSA");
      check(lt->cublasLtMatmulDescSetAttribute(
                plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB),
            "TRANSB");
      uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
      switch (g.epilogue) {
      case GemmEpilogue::None:
        break;
      case GemmEpilogue::Bias:
        epilogue = CUBLASLT_EPILOGUE_BIAS;
        break;
      case GemmEpilogue::Relu:
        epilogue = CUBLASLT_EPILOGUE_RELU;
        break;
      case GemmEpilogue::Gelu:
        epilogue = CUBLASLT_EPILOGUE_GELU;
        break;
      case GemmEpilogue::BiasRelu:
        epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
        break;
      case GemmEpilogue::BiasGelu:
        epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
        break;
      }
      if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
        check(lt->cublasLtMatmulDescSetAttribute(plan.desc,
                                                 CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                 &epilogue, sizeof epilogue),
              "EPILOGUE");
      if (gemmEpilogueHasBias(g.epilogue)) {
        // Bias per row of the column-major D = per column of the plan's C.
        void *bias = reinterpret_cast<void *>(
            static_cast<uintptr_t>(dev(arena) + call.offsetBias));
        check(lt->cublasLtMatmulDescSetAttribute(
                  plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                  sizeof bias),
              "BIAS_POINTER");
      }
    }
    auto layout = [&](cublasLtMatrixLayout_t *out, uint64_t rows, uint64_t cols,
                      uint64_t stride) {
      if (!failed.empty())
        return;
      check(lt->cublasLtMatrixLayoutCreate(out, type, rows, cols,
                                           static_cast<int64_t>(rows)),
            "cublasLtMatrixLayoutCreate");
      if (!failed.empty() || g.batch == 1)
        return;
      int32_t count = static_cast<int32_t>(g.batch);
      int64_t offset = static_cast<int64_t>(stride);
      check(lt->cublasLtMatrixLayoutSetAttribute(
                *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "BATCH_COUNT");
      check(lt->cublasLtMatrixLayoutSetAttribute(
                *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                sizeof offset),
            "STRIDED_BATCH_OFFSET");
    };
    // Stored row-major R x C is column-major C x R with ld = C.
    layout(&plan.a, g.transB ? k : n, g.transB ? n : k, g.strideB);
    layout(&plan.b, g.transA ? m : k, g.transA ? k : m, g.strideA);
    layout(&plan.c, n, m, g.strideC);
    if (failed.empty()) {
      cublasLtMatmulPreference_t pref = nullptr;
      check(lt->cublasLtMatmulPreferenceCreate(&pref),
            "cublasLtMatmulPreferenceCreate");
      if (failed.empty()) {
        uint64_t ws = workspaceSize;
        check(
            lt->cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
            "MAX_WORKSPACE_BYTES");
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        if (failed.empty())
          check(lt->cublasLtMatmulAlgoGetHeuristic(ltHandle, plan.desc, plan.a,
                                                   plan.b, plan.c, plan.c, pref,
                                                   1, &result, &found),
                "cublasLtMatmulAlgoGetHeuristic");
        if (failed.empty() && found == 0)
          failed = "cuBLASLt has no algorithm for this gemm";
        plan.algo = result.algo;
        plan.workspace = result.workspaceSize;
        lt->cublasLtMatmulPreferenceDestroy(pref);
      }
    }
    if (!failed.empty()) {
      cleanup();
      setError(error, "gemm " + std::string(dtypeToShortName(call.dtype)) +
                          " (batch " + std::to_string(g.batch) + ", m " +
                          std::to_string(g.m) + ", n " + std::to_string(g.n) +
                          ", k " + std::to_string(g.k) + ", epilogue " +
                          gemmEpilogueName(g.epilogue) + "): " + failed);
      return nullptr;
    }
    return &gemmPlans.emplace(call.step, plan).first->second;
  }

  const DriverApi &cu;
  std::FILE *log;
  int localRank = -1;
  int deviceOrdinal = 0;
  const BlasLtApi *lt = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  std::shared_ptr<StreamWatch> watch; ///< made with the stream
  std::string deviceName;
  int deviceSm = 0;
  int maxSharedOptin = 0;
  CUmodule module = nullptr;
  bool usedPtx = false;
  std::vector<CUfunction> functions;
  uint8_t *pinned = nullptr;
  uint64_t stagingSize = 0, stagingUsed = 0;
  std::vector<PendingDownload> pending;
  cublasLtHandle_t ltHandle = nullptr;
  CUdeviceptr workspace = 0;
  size_t workspaceSize = 0;
  std::map<const GemmStep *, GemmPlan> gemmPlans;
  const float oneF32 = 1.0f, zeroF32 = 0.0f;
  const double oneF64 = 1.0, zeroF64 = 0.0;
};

} // namespace

std::unique_ptr<Backend> createCudaBackend(const BackendOptions &options,
                                           std::string *error,
                                           ErrorCode *code) noexcept {
  detail::ErrorSink sink{error, code};
  try {
    std::string why;
    const DriverApi *cu = loadDriver(&why);
    if (!cu) {
      sink.set(ErrorCode::Unsupported, why);
      return nullptr;
    }
    auto backend = std::make_unique<CudaBackend>(*cu, options);
    if (!backend->open(&why)) {
      sink.set(ErrorCode::Unsupported, why);
      return nullptr;
    }
    sink.ok();
    return backend;
  } catch (...) {
    sink.outOfMemory("cuda backend");
  }
  return nullptr;
}

} // namespace loomrt
