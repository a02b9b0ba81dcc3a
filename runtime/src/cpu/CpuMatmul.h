//===- CpuMatmul.h - bf16 and f16 GEMM steps on the CPU ---------*- C++ -*-===//
//
// A gemm step on bf16 or f16 buffers (mixed precision) multiplies in 16
// bits and sums in f32, then rounds each result once to 16 bits, as
// PyTorch's 16-bit matmuls do. It runs on oneDNN's matmul primitive where
// libdnnl is installed and has one for the CPU (avx512_bf16 or avx512_fp16
// instructions where the CPU has them); otherwise, or with
// LOOMRT_CPU_GEMM=openblas, the operands are widened to f32 (exactly), the
// f32 GEMM of the CBLAS runs, and the results are rounded to nearest even.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUMATMUL_H
#define LOOMRT_SRC_CPU_CPUMATMUL_H

#include "../Half.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loomrt {

class CpuMatmul {
public:
  CpuMatmul();
  ~CpuMatmul();
  /// C = op(A) op(B) for each of the step's batch, on bf16 buffers (f16
  /// ones with `f16`). `useDnnl` false: the CBLAS fallback. False (with
  /// `error`) only when memory runs out or oneDNN fails.
  bool runHalf(const GemmStep &g, bool f16, const uint16_t *a,
               const uint16_t *b, uint16_t *c, bool useDnnl,
               std::string *error) noexcept;
  /// "onednn" or "cblas": what the last 16-bit GEMM ran on.
  const char *lastLibrary() const noexcept { return last; }

private:
  struct Dnnl;
  std::unique_ptr<Dnnl> dnnl;
  bool dnnlTried = false;
  const char *last = "cblas";
};

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUMATMUL_H
