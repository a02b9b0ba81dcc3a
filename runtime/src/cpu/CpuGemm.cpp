//===- CpuGemm.cpp - oneDNN's sgemm (reached by dlopen), else CBLAS -------===//

#include "CpuGemm.h"
#include "CpuDnnl.h"

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace loomrt {

void DnnlGemm::open() noexcept {
  if (opened)
    return;
  opened = true;
  const char *choice = std::getenv("LOOMRT_CPU_GEMM");
  if (choice && std::strcmp(choice, "openblas") == 0)
    return;
  if (void *lib = dnnlLibrary())
    sgemm = reinterpret_cast<Sgemm>(::dlsym(lib, "dnnl_sgemm"));
}

bool DnnlGemm::run(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float beta) const noexcept {
  if (!sgemm)
    return false;
  // dnnl_sgemm is row-major, as the plan's GEMM steps are. 0: dnnl_success.
  return sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
               ldb, beta, c, ldc) == 0;
}

void cpuSgemm(const DnnlGemm &dnnl, bool transA, bool transB, int64_t m,
              int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc) noexcept {
  if (dnnl.run(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, beta))
    return;
  // Plain int: OpenBLAS's blasint is int unless built for ILP64.
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

const char *cpuGemmLibrary(const DnnlGemm &dnnl) noexcept {
  return dnnl.available() ? "onednn" : "openblas";
}

} // namespace loomrt
