//===- CpuMatmul.h - bf16 GEMM steps on the CPU -----------------*- C++ -*-===//
//
// A gemm step on bf16 buffers (mixed precision) multiplies in bf16 and sums
// in f32, then rounds each result once to bf16, as PyTorch's bf16 matmul
// does. It runs on oneDNN's matmul primitive where libdnnl is installed
// (avx512_bf16 instructions where the CPU has them); otherwise, or with
// LOOMRT_CPU_GEMM=openblas, the operands are widened to f32 (exactly), the
// f32 GEMM of the CBLAS runs, and the results are rounded to nearest even.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUMATMUL_H
#define LOOMRT_SRC_CPU_CPUMATMUL_H

#include "loomrt/Plan.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loomrt {

/// bf16 <-> f32: widening is exact; narrowing rounds to nearest even (NaN
/// stays NaN).
float bf16ToFloat(uint16_t v) noexcept;
uint16_t floatToBf16(float v) noexcept;

class CpuMatmul {
public:
  CpuMatmul();
  ~CpuMatmul();
  /// C = op(A) op(B) for each of the step's batch, on bf16 buffers.
  /// `useDnnl` false: the CBLAS fallback. False (with `error`) only when
  /// memory runs out.
  bool runBf16(const GemmStep &g, const uint16_t *a, const uint16_t *b,
               uint16_t *c, bool useDnnl, std::string *error) noexcept;
  /// "onednn" or "cblas": what the last bf16 GEMM ran on.
  const char *lastLibrary() const noexcept { return last; }

private:
  struct Dnnl;
  std::unique_ptr<Dnnl> dnnl;
  bool dnnlTried = false;
  const char *last = "cblas";
};

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUMATMUL_H
