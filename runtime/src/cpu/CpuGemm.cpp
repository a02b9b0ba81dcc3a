//===- CpuGemm.cpp - oneDNN's sgemm, reached by dlopen --------------------===//

#include "CpuGemm.h"
#include "CpuDnnl.h"

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
                   float *c, int64_t ldc) const noexcept {
  if (!sgemm)
    return false;
  // dnnl_sgemm is row-major, as the plan's GEMM steps are. 0: dnnl_success.
  return sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda,
               b, ldb, 0.0f, c, ldc) == 0;
}

const char *cpuGemmLibrary(const DnnlGemm &dnnl) noexcept {
  return dnnl.available() ? "onednn" : "openblas";
}

} // namespace loomrt
