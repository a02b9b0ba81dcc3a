//===- CpuBackend.cpp - Run plans on the host: dlopen kernels, BLAS GEMMs -===//
//
// The arena is one page-aligned anonymous mapping (64-byte alignment and zero
// fill for free). Kernels come from kernels.so, opened RTLD_NOW (every
// undefined symbol resolved at load, not at the first call) and RTLD_LOCAL
// (two artifacts' kernels may share names).
// GEMMs go to oneDNN's dnnl_sgemm where it is installed (f32; CpuGemm.h says
// why), else to OpenBLAS's cblas_sgemm/cblas_dgemm, row-major, one call per
// batch element, each split into tiles fixed by its shape (results do not
// depend on the thread count). Convolutions go to oneDNN's primitives (CpuConv.h),
// attention steps to tiled online-softmax loops (CpuAttention.h),
// linear_cross_entropy steps to tiles of logits between GEMMs on the same
// path (CpuLinearCrossEntropy.h).
//
//===----------------------------------------------------------------------===//

#include "loomrt/Backend.h"

#include "../Backends.h"
#include "../Support.h"
#include "CpuAttention.h"
#include "CpuConv.h"
#include "CpuGemm.h"
#include "CpuLinearCrossEntropy.h"
#include "CpuMatmul.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace loomrt {

void setCpuThreads(int n) noexcept {
  if (n <= 0)
    return;
  ::setenv("OMP_NUM_THREADS", std::to_string(n).c_str(), /*overwrite=*/1);
#ifdef _OPENMP
  // The attention steps' and GEMMs' team (libloomrt's own OpenMP, the
  // kernels' libomp where the compiler is clang), even if the runtime
  // already started. OpenBLAS keeps one thread: GEMMs run their tiles on
  // this team (CpuGemm.cpp).
  omp_set_num_threads(n);
#endif
}

namespace {

/// Anonymous mmap rather than malloc: the pages arrive zero-filled and are
/// faulted in only when touched, so zeroing a large arena costs nothing up
/// front. Without MAP_NORESERVE the kernel still refuses an arena that could
/// never be backed, so an absurd arena_bytes fails here with a message rather
/// than later with the OOM killer. Page alignment satisfies the 64-byte
/// buffer alignment.
class CpuArena final : public Arena {
public:
  CpuArena(uint8_t *base, uint64_t bytes, size_t mapped)
      : base(base), bytes(bytes), mapped(mapped) {}
  ~CpuArena() override { ::munmap(base, mapped); }
  uint64_t size() const noexcept override { return bytes; }
  uint8_t *data() const noexcept { return base; }

private:
  uint8_t *base;
  uint64_t bytes;
  size_t mapped;
};

using KernelFn = void (*)(void **);

class CpuBackend final : public Backend {
public:
  ~CpuBackend() override {
    // Kernels hold no state past a call (kernel ABI 1), so unloading is safe
    // once no call is running, which the owner guarantees by destroying us.
    if (library)
      ::dlclose(library);
  }

  std::string_view name() const noexcept override { return "cpu"; }

  bool load(const Plan &plan, const std::string &dir, std::string *error,
            ErrorCode *code) noexcept override {
    detail::ErrorSink sink{error, code};
    if (plan.kernels.empty()) {
      sink.ok();
      return true;
    }
    std::string path;
    try {
      path = detail::joinPath(dir, plan.kernels);
      const std::vector<std::string> &symbols = plan.kernelSymbols;
      // dlopen only searches the library path for names without a '/'.
      std::string resolved =
          path.find('/') == std::string::npos ? "./" + path : path;
      // Kernels split their large loops over an OpenMP team (libomp). Its
      // threads spin for 200 ms after each loop by default, ready for the
      // next one: GEMMs (their tiles, whichever library) and oneDNN's
      // convolutions run on that same team, so the spinning saves a
      // wake-up per step (GPT-2 d256, 2 threads: 369 -> 308 ms).
      ::dlerror();
      void *handle = ::dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        const char *why = ::dlerror();
        sink.set(ErrorCode::IO, path + ": cannot load kernels: " +
                                    (why ? why : "unknown dlopen error"));
        return false;
      }
      std::vector<KernelFn> resolvedKernels;
      for (const std::string &symbol : symbols) {
        ::dlerror();
        void *address = ::dlsym(handle, symbol.c_str());
        const char *why = ::dlerror();
        if (!address || why) {
          ::dlclose(handle);
          sink.set(ErrorCode::Format,
                   path + ": kernel symbol " + detail::quoteName(symbol) +
                       " not found (the plan calls it; was kernels.so built "
                       "from the same compile?)");
          return false;
        }
        resolvedKernels.push_back(reinterpret_cast<KernelFn>(address));
      }
      if (library)
        ::dlclose(library);
      library = handle;
      kernels = std::move(resolvedKernels);
      // After the kernels: oneDNN shares their OpenMP runtime.
      dnnl.open();
      sink.ok();
      return true;
    } catch (...) {
      sink.outOfMemory(path);
      return false;
    }
  }

  std::unique_ptr<Arena> allocateArena(uint64_t bytes, std::string *error,
                                       ErrorCode *code) noexcept override {
    detail::ErrorSink sink{error, code};
    auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    if (page == 0 || page % kBufferAlignment != 0)
      page = 4096;
    uint64_t wanted = bytes == 0 ? 1 : bytes;
    if (wanted > UINT64_MAX - page || wanted + page > SIZE_MAX) {
      sink.set(ErrorCode::OutOfMemory,
               "arena of " + std::to_string(bytes) + " bytes is too large");
      return nullptr;
    }
    auto mapped = static_cast<size_t>((wanted + page - 1) / page * page);
    void *base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      int err = errno;
      sink.set(ErrorCode::OutOfMemory, "cannot allocate an arena of " +
                                           std::to_string(bytes) +
                                           " bytes: " + detail::errnoText(err));
      return nullptr;
    }
    std::unique_ptr<Arena> arena(new (std::nothrow) CpuArena(
        static_cast<uint8_t *>(base), bytes, mapped));
    if (!arena) {
      ::munmap(base, mapped);
      sink.set(ErrorCode::OutOfMemory, "out of memory");
      return nullptr;
    }
    sink.ok();
    return arena;
  }

  bool upload(Arena &arena, uint64_t offset, const void *src, uint64_t bytes,
              std::string *error) noexcept override {
    if (!arenaRangeOk(arena, offset, bytes, error))
      return false;
    if (bytes)
      std::memcpy(cpu(arena).data() + offset, src, bytes);
    return true;
  }

  bool download(Arena &arena, uint64_t offset, void *dst, uint64_t bytes,
                std::string *error) noexcept override {
    if (!arenaRangeOk(arena, offset, bytes, error))
      return false;
    if (bytes)
      std::memcpy(dst, cpu(arena).data() + offset, bytes);
    return true;
  }

  bool launchKernel(Arena &arena, const PlanStep &step,
                    const std::vector<uint64_t> &offsets,
                    std::string *error) noexcept override {
    uint32_t kernel = step.kernelIndex;
    if (kernel >= kernels.size()) {
      setError(error,
               "kernel index " + std::to_string(kernel) + " was not loaded");
      return false;
    }
    // Kernels may be called with many buffers; a small array covers the
    // common case without allocating.
    void *small[32];
    std::unique_ptr<void *[]> large;
    void **pointers = small;
    if (offsets.size() > 32) {
      large.reset(new (std::nothrow) void *[offsets.size()]);
      if (!large) {
        setError(error, "out of memory");
        return false;
      }
      pointers = large.get();
    }
    uint8_t *base = cpu(arena).data();
    for (size_t i = 0; i < offsets.size(); ++i)
      pointers[i] = base + offsets[i];
    kernels[kernel](pointers);
    return true;
  }

  bool gemm(Arena &arena, const GemmCall &call,
            std::string *error) noexcept override {
    const GemmStep &g = *call.step;
    uint8_t *base = cpu(arena).data();
    // Plain int: OpenBLAS's blasint is int unless built for ILP64, and the
    // plan checked every dimension fits int32.
    int m = static_cast<int>(g.m), n = static_cast<int>(g.n),
        k = static_cast<int>(g.k);
    // Row-major leading dimensions of the matrices as stored.
    int lda = g.transA ? m : k;
    int ldb = g.transB ? k : n;
    int ldc = n;
    if (call.dtype == DType::F32) {
      auto *a = reinterpret_cast<float *>(base + call.offsetA);
      auto *b = reinterpret_cast<float *>(base + call.offsetB);
      auto *c = reinterpret_cast<float *>(base + call.offsetC);
      dnnl.open(); // no-op once done; plans without kernels open it here
      cpuSgemm(dnnl, g.transA, g.transB, m, n, k, a, lda, b, ldb, 0.0f, c, ldc,
               batchOf(g));
      applyEpilogue(g, c,
                    reinterpret_cast<const float *>(base + call.offsetBias));
      return true;
    }
    if (call.dtype == DType::F64) {
      auto *a = reinterpret_cast<double *>(base + call.offsetA);
      auto *b = reinterpret_cast<double *>(base + call.offsetB);
      auto *c = reinterpret_cast<double *>(base + call.offsetC);
      cpuDgemm(g.transA, g.transB, m, n, k, a, lda, b, ldb, c, ldc,
               batchOf(g));
      applyEpilogue(g, c,
                    reinterpret_cast<const double *>(base + call.offsetBias));
      return true;
    }
    if (call.dtype == DType::BF16 || call.dtype == DType::F16) {
      // The plan refused epilogues on 16-bit GEMMs. oneDNN unless
      // LOOMRT_CPU_GEMM chose OpenBLAS (then, as without oneDNN, CBLAS on
      // the operands widened to f32).
      dnnl.open();
      return matmuls.runHalf(
          g, call.dtype == DType::F16,
          reinterpret_cast<const uint16_t *>(base + call.offsetA),
          reinterpret_cast<const uint16_t *>(base + call.offsetB),
          reinterpret_cast<uint16_t *>(base + call.offsetC),
          dnnl.available(), error);
    }
    setError(error, "gemm on dtype " +
                        std::string(dtypeToShortName(call.dtype)) +
                        " is not supported");
    return false;
  }

  bool conv(Arena &arena, const ConvCall &call,
            std::string *error) noexcept override {
    uint8_t *base = cpu(arena).data();
    auto at = [&](const PlanBuffer *b) {
      return reinterpret_cast<float *>(base + b->offset);
    };
    return convs.run(*call.step, convShape(*call.step, *call.x, *call.w, *call.y),
                     at(call.x), at(call.w), at(call.y), error);
  }

  bool attention(Arena &arena, const AttentionCall &call,
                 std::string *error) noexcept override {
    uint8_t *base = cpu(arena).data();
    auto at = [&](const PlanBuffer *b) {
      return b ? reinterpret_cast<float *>(base + b->offset) : nullptr;
    };
    AttentionTensors t;
    t.q = at(call.q);
    t.k = at(call.k);
    t.v = at(call.v);
    t.out = at(call.out);
    t.lse = at(call.lse);
    t.mask = call.mask ? base + call.mask->offset : nullptr;
    t.bias = at(call.bias);
    t.segments = call.segments ? base + call.segments->offset : nullptr;
    t.segments64 = call.segments && call.segments->dtype == DType::I64;
    if (call.seed)
      std::memcpy(&t.seed, base + call.seed->offset, sizeof(int64_t));
    t.dout = at(call.dout);
    t.dq = at(call.dq);
    t.dk = at(call.dk);
    t.dv = at(call.dv);
    t.dbias = at(call.dbias);
    return runAttention(
        *call.step,
        attentionShape(*call.q, *call.k, *call.v, call.mask, call.bias), t,
        error);
  }

  bool linearCrossEntropy(Arena &arena, const LinearCrossEntropyCall &call,
                          std::string *error) noexcept override {
    const LinearCrossEntropyStep &l = *call.step;
    uint8_t *base = cpu(arena).data();
    auto at = [&](const PlanBuffer *b) {
      return b ? reinterpret_cast<float *>(base + b->offset) : nullptr;
    };
    LinearCrossEntropyTensors t;
    t.x = at(call.x);
    t.w = at(call.w);
    t.labels = base + call.labels->offset;
    t.labels64 = call.labels->dtype == DType::I64;
    t.lse = at(call.lse);
    t.loss = at(call.loss);
    t.dloss = at(call.dloss);
    t.dx = at(call.dx);
    t.dw = at(call.dw);
    dnnl.open(); // as for a gemm step: its GEMMs take the same path
    return runLinearCrossEntropy(
        l, linearCrossEntropyShape(*call.x, *call.w, l.transposeW), t, dnnl,
        error);
  }

  bool copy(Arena &arena, uint64_t srcOffset, uint64_t dstOffset,
            uint64_t bytes, std::string *error) noexcept override {
    if (!arenaRangeOk(arena, srcOffset, bytes, error) ||
        !arenaRangeOk(arena, dstOffset, bytes, error))
      return false;
    if (srcOffset != dstOffset && bytes)
      std::memmove(cpu(arena).data() + dstOffset, cpu(arena).data() + srcOffset,
                   bytes);
    return true;
  }

  bool copyBetween(Arena &src, uint64_t srcOffset, Arena &dst,
                   uint64_t dstOffset, uint64_t bytes,
                   std::string *error) noexcept override {
    if (!arenaRangeOk(src, srcOffset, bytes, error) ||
        !arenaRangeOk(dst, dstOffset, bytes, error))
      return false;
    if (bytes)
      std::memmove(cpu(dst).data() + dstOffset, cpu(src).data() + srcOffset,
                   bytes);
    return true;
  }

  bool hostArenas() const noexcept override { return true; }
  void *hostAddress(Arena &arena, uint64_t offset) noexcept override {
    return offset <= arena.size() ? cpu(arena).data() + offset : nullptr;
  }

  bool synchronize(std::string *) noexcept override { return true; }

private:
  /// The epilogue of a GEMM step, over every C_i: as cuBLASLt computes it
  /// (bias per column of the row-major C, GELU's tanh approximation).
  template <typename T>
  static void applyEpilogue(const GemmStep &g, T *c, const T *bias) {
    if (g.epilogue == GemmEpilogue::None)
      return;
    bool addBias = gemmEpilogueHasBias(g.epilogue);
    bool relu = g.epilogue == GemmEpilogue::Relu ||
                g.epilogue == GemmEpilogue::BiasRelu;
    bool gelu = g.epilogue == GemmEpilogue::Gelu ||
                g.epilogue == GemmEpilogue::BiasGelu;
    for (int64_t i = 0; i < g.batch; ++i) {
      T *ci = c + i * g.strideC;
      for (int64_t r = 0; r < g.m; ++r)
        for (int64_t col = 0; col < g.n; ++col) {
          T v = ci[r * g.n + col];
          if (addBias)
            v += bias[col];
          if (relu)
            v = v > T(0) ? v : T(0);
          if (gelu)
            v = T(0.5) * v *
                (T(1) + std::tanh(T(0.7978845608028654) *
                                  (v + T(0.044715) * v * v * v)));
          ci[r * g.n + col] = v;
        }
    }
  }

  static GemmBatch batchOf(const GemmStep &g) {
    return {g.batch, int64_t(g.strideA), int64_t(g.strideB),
            int64_t(g.strideC)};
  }

  static CpuArena &cpu(Arena &arena) { return static_cast<CpuArena &>(arena); }

  static void setError(std::string *error, const std::string &message) {
    if (error) {
      try {
        *error = message;
      } catch (...) {
      }
    }
  }

  void *library = nullptr;
  std::vector<KernelFn> kernels;
  DnnlGemm dnnl;
  CpuMatmul matmuls; ///< bf16 GEMMs
  CpuConv convs;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace loomrt
