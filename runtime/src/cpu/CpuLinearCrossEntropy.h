//===- CpuLinearCrossEntropy.h - Fused LM head on the CPU -------*- C++ -*-===//
//
// A plan's linear_cross_entropy steps (docs/plan-format.md): a language
// model's last linear layer, log-softmax and cross-entropy in one step, run
// over tiles of (rows of x) x (classes) so that the [N, V] logits are never
// stored: each tile's logits are made by one GEMM into a scratch bounded by
// a budget (4 MiB by default), used and dropped.
//
// Forward: for each block of rows, the class blocks in turn; each row keeps
// a running maximum and sum of exponentials (the online softmax: the sum is
// rescaled when the maximum grows) and picks its label's logit from the
// block that holds it; lse = max + log(sum), the row's loss lse - logit.
//
// Backward: per tile, the logits again (one GEMM), turned in place into
// dlogits = weight * (exp(logits - lse) - onehot(label)) with the
// forward's lse, then dx[rows] += dlogits W[classes] (one GEMM,
// accumulating over the class blocks) and dw[classes] += dlogits^T x[rows]
// (one GEMM, accumulating over the row blocks); the first of each writes
// with beta 0, so dx and dw are overwritten, not accumulated into.
//
// Why tiles rather than whole rows: with V = 50304 classes a 4 MiB budget
// holds 20 rows of logits, and GEMMs of 20 rows re-read (and re-pack) all
// of W 100 times per pass; dw's rank-20 updates re-read and re-write it as
// often. On GPT-2 small's head (N 2048, C 768) and 2 Zen 4 cores (oneDNN)
// 16 whole rows at a time ran 4.1x the unfused head's forward time and
// 3.3x its backward's; tiles of 512 rows x 2048 classes, the same 4 MiB,
// ran 1.12x and 1.04x (tests/loomrt-linear-cross-entropy-bench). Where
// 256 whole rows or more fit the budget (V <= 4096), a tile is whole rows.
//
// GEMMs go through the backend's f32 path (cpuSgemm: oneDNN, else CBLAS),
// which runs them on its own threads; the row work between them (max, exp,
// sums, dlogits) runs over the OpenMP team, vectorized (CpuSoftmaxMath.h)
// and built, like the attention loops, for AVX-512, AVX2 + FMA and
// baseline SIMD, picked at run time; in f32 with each row's running sum
// across class blocks in double. Labels are checked (and
// the rows not ignored counted, for the mean) before anything is written.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPULINEARCROSSENTROPY_H
#define LOOMRT_SRC_CPU_CPULINEARCROSSENTROPY_H

#include "CpuAttention.h" // AttentionIsa: the row loops' instruction sets

#include "loomrt/Plan.h"

#include <cstdint>
#include <string>

namespace loomrt {

class DnnlGemm;

/// The sizes of a step: x [N, C], V classes.
struct LinearCrossEntropyShape {
  int64_t rows = 0, features = 0, classes = 0; ///< N, C, V
};

/// The shape of a step whose x and w are these (checked by parsePlan).
LinearCrossEntropyShape linearCrossEntropyShape(const PlanBuffer &x,
                                                const PlanBuffer &w,
                                                bool transposeW) noexcept;

/// The tensors of a step: dense, row-major, f32 but for the labels; null
/// where the step's direction has none.
struct LinearCrossEntropyTensors {
  const float *x = nullptr, *w = nullptr;
  const void *labels = nullptr;
  bool labels64 = true;  ///< i64 labels, else i32
  float *lse = nullptr;  ///< written by the forward, read by the backward
  float *loss = nullptr; ///< forward
  const float *dloss = nullptr;       ///< backward
  float *dx = nullptr, *dw = nullptr; ///< backward
};

/// A tile: rows of x by classes. Zero: chosen by linearCrossEntropyBlocks.
struct LinearCrossEntropyBlocks {
  int64_t rows = 0, classes = 0;
};

/// The default scratch budget of a tile's logits, in floats (4 MiB).
inline constexpr int64_t kLinearCrossEntropyScratchFloats = int64_t(1) << 20;

/// The tile for `shape` whose logits fit `scratchFloats`: all of [N, V]
/// where it fits; else whole rows (a multiple of 16 of them) where 256 rows
/// or more fit; else 512 rows (N if fewer) by a multiple of 16 classes.
LinearCrossEntropyBlocks linearCrossEntropyBlocks(
    const LinearCrossEntropyShape &shape,
    int64_t scratchFloats = kLinearCrossEntropyScratchFloats) noexcept;

/// The scratch a run with `blocks` (as clamped to `shape`) allocates.
uint64_t
linearCrossEntropyScratchBytes(const LinearCrossEntropyShape &shape,
                               LinearCrossEntropyBlocks blocks) noexcept;

/// Runs the step: loss and lse (forward) or dx and dw (backward)
/// overwritten; GEMMs on `gemm` (oneDNN where it is open, else CBLAS).
/// `blocks` (zero: linearCrossEntropyBlocks) sets the tile; tests and the
/// benchmark pick others. `scratch`: linearCrossEntropyScratchBytes of
/// 64-byte aligned memory, or null to allocate it for the call. The row
/// loops run the instruction set `isa` (the attention steps' choices;
/// Best, or one the CPU lacks: the fastest it runs). False with a message
/// naming the node, the row and the label when a label is outside [0, V)
/// and not the ignore_index (nothing written then), or when the scratch
/// cannot be allocated.
bool runLinearCrossEntropy(const LinearCrossEntropyStep &step,
                           const LinearCrossEntropyShape &shape,
                           const LinearCrossEntropyTensors &tensors,
                           const DnnlGemm &gemm, std::string *error,
                           LinearCrossEntropyBlocks blocks = {},
                           float *scratch = nullptr,
                           AttentionIsa isa = AttentionIsa::Best) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPULINEARCROSSENTROPY_H
