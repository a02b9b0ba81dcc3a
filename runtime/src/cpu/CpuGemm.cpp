//===- CpuGemm.cpp - oneDNN's sgemm, reached by dlopen --------------------===//

#include "CpuGemm.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <initializer_list>

namespace loomrt {

void DnnlGemm::open() noexcept {
  if (opened)
    return;
  opened = true;
  const char *choice = std::getenv("LOOMRT_CPU_GEMM");
  if (choice && std::strcmp(choice, "openblas") == 0)
    return;
  // LLVM's OpenMP runtime, if the kernels loaded it (RTLD_LOCAL), becomes
  // global: libdnnl then binds its GOMP_* calls to it rather than to libgomp.
  ::dlopen("libomp.so.5", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  void *lib = nullptr;
  if (const char *path = std::getenv("LOOMRT_DNNL_LIBRARY"))
    lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  for (const char *name : {"libdnnl.so.3", "libdnnl.so.2"})
    if (!lib)
      lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return;
  // The library stays open for the process: its thread team may outlive us.
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
