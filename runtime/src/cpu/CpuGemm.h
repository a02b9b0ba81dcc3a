//===- CpuGemm.h - The CPU backend's GEMM library ---------------*- C++ -*-===//
//
// f32 GEMMs go to oneDNN's dnnl_sgemm where libdnnl is installed (reached by
// dlopen, like CUDA: one runtime binary, with or without it), else to the
// CBLAS the runtime links (OpenBLAS). oneDNN picks its kernels from the
// CPU's features (cpuid); Debian's OpenBLAS 0.3.21 picks them from the CPU
// model, which it does not know on recent CPUs (it then runs SSE3 or AVX2
// code on an AVX-512 machine: half the speed or less, docs/performance.md).
// LOOMRT_CPU_GEMM=openblas chooses OpenBLAS; CpuDnnl.h opens the library.
// Either way a GEMM is split into tiles of C fixed by its shape, each one
// library call on one thread of the OpenMP team, so that results do not
// depend on the number of threads (CpuGemm.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUGEMM_H
#define LOOMRT_SRC_CPU_CPUGEMM_H

#include <cstdint>

namespace loomrt {

/// Row-major C = op(A) op(B) + beta C for f32, with the leading dimensions
/// as stored; false if oneDNN is not in use (the caller uses CBLAS).
class DnnlGemm {
public:
  /// Opens oneDNN (dnnlLibrary(): call after the kernels are loaded) unless
  /// LOOMRT_CPU_GEMM says otherwise.
  void open() noexcept;
  bool available() const noexcept { return sgemm != nullptr; }
  /// beta 0: C is only written (whatever it held, NaN included).
  bool run(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
           int64_t ldc, float beta = 0.0f) const noexcept;

private:
  using Sgemm = int (*)(char, char, int64_t, int64_t, int64_t, float,
                        const float *, int64_t, const float *, int64_t, float,
                        float *, int64_t);
  Sgemm sgemm = nullptr;
  bool opened = false;
};

/// `count` products, each operand's i-th at its base + i * stride (in
/// elements): one GEMM step's batch, whose tiles share one team.
struct GemmBatch {
  int64_t count = 1, strideA = 0, strideB = 0, strideC = 0;
};

/// Row-major C = op(A) op(B) + beta C for f32 on oneDNN where `dnnl` has it
/// open, else on CBLAS (OpenBLAS): the CPU backend's one f32 GEMM path.
/// Bitwise the same for any thread count.
/// Dimensions and leading dimensions fit int (the plan checked them).
void cpuSgemm(const DnnlGemm &dnnl, bool transA, bool transB, int64_t m,
              int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc,
              GemmBatch batch = {}) noexcept;

/// Row-major C = op(A) op(B) for f64 on CBLAS, tiled as cpuSgemm.
void cpuDgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const double *a, int64_t lda, const double *b, int64_t ldb,
              double *c, int64_t ldc, GemmBatch batch = {}) noexcept;

/// "onednn" or "openblas": the library f32 GEMMs go to.
const char *cpuGemmLibrary(const DnnlGemm &dnnl) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUGEMM_H
