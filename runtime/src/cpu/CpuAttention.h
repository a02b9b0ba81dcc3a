//===- CpuAttention.h - The CPU backend's fused attention -------*- C++ -*-===//
//
// A plan's attention steps (docs/plan-format.md, `attention`) as tiled loops
// with an online softmax (FlashAttention): the scores of a block of queries
// against a block of keys are made, used and dropped, so nothing of size
// T x S is ever allocated.
//
// Forward: one task per (batch, query head, block of query rows), run over
// the OpenMP team; each keeps, per query row, the running maximum and sum
// of the exponentials and an f32 accumulator of the output, rescaled when
// the maximum grows, and writes out and lse = max + log(sum) at the end.
// Under `causal` the key blocks wholly above the diagonal (or wholly
// before the window) are skipped, and with document ids (`segments`) the
// block pairs whose ids do not meet.
//
// Backward (FlashAttention-2): one task per (batch, key/value head), which
// owns dk and dv of its head and dq of the query heads of its group, so
// no two threads write one element; for each block of keys it recomputes
// the probabilities p = exp(s - lse) block by block from q, k and the
// forward's lse, and accumulates dv += p^T dout, dq += scale ds k and dk
// += scale ds^T q, with ds = p (dout v^T - rowsum(dout * out)). Where a
// dbias is broadcast over the batch or the heads, those dimensions run
// inside one task instead, so its elements too have one writer.
//
// Scratch: per thread, O(block^2 + block * D) floats. Everything
// accumulates in f32. The block products are small GEMMs written as
// register tiles of plain loops, compiled for AVX-512, AVX2 + FMA and
// baseline x86-64 (picked at run time by the CPU's features) or for the
// target's baseline elsewhere; exp is a polynomial the loops vectorize.
//
// Only f32 tensors run here. A bf16 step would widen each block of q, k,
// v and dout to f32 where the loops already copy it (k and v are
// transposed into scratch block by block; q and dout rows would be too)
// and round out, dq, dk and dv once at the end: the accumulation stays
// f32.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUATTENTION_H
#define LOOMRT_SRC_CPU_CPUATTENTION_H

#include "loomrt/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loomrt {

/// The sizes of an attention step: q [B, Hq, T, D], k [B, Hkv, S, D],
/// v [B, Hkv, S, Dv]; and the element strides of its mask and bias (dbias
/// has the bias's) along [B, Hq, T, S], 0 where they broadcast.
struct AttentionShape {
  int64_t batch = 0, heads = 0, kvHeads = 1, queries = 0, keys = 0;
  int64_t headDim = 0, valueDim = 0;
  int64_t maskStrides[4] = {}, biasStrides[4] = {};
  int64_t biasElements = 0; ///< of bias and dbias
};

/// The shape of a step whose buffers are these (checked by parsePlan);
/// `mask` and `bias` may be null.
AttentionShape attentionShape(const PlanBuffer &q, const PlanBuffer &k,
                              const PlanBuffer &v, const PlanBuffer *mask,
                              const PlanBuffer *bias) noexcept;

/// The tensors of a step: dense, row-major, f32 (mask: one byte per
/// element, nonzero = may attend); null where the step has none.
struct AttentionTensors {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float *out = nullptr; ///< written by the forward, read by the backward
  float *lse = nullptr; ///< likewise
  const uint8_t *mask = nullptr;
  const float *bias = nullptr;
  /// Document ids [B, T] (i64, or i32 when !segments64); null: none.
  const void *segments = nullptr;
  bool segments64 = true;
  /// The dropout seed's value (read only when the step has dropout).
  int64_t seed = 0;
  const float *dout = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dbias = nullptr;
};

/// The instruction sets the loops are compiled for.
enum class AttentionIsa : uint8_t { Best, Avx512, Avx2, Baseline };

/// "avx512", "avx2", "baseline" ("best": the first of them this CPU runs).
const char *attentionIsaName(AttentionIsa isa) noexcept;

/// The ones this CPU can run, fastest first (Baseline always).
std::vector<AttentionIsa> availableAttentionIsas();

/// Runs the step (its direction's outputs overwritten: out and lse, or dq,
/// dk, dv and dbias) over the OpenMP team (OMP_NUM_THREADS; setCpuThreads)
/// with the loops of `isa` (Best: the fastest this CPU runs; one it cannot
/// run falls back to Best). False with a message only when the scratch
/// cannot be allocated.
bool runAttention(const AttentionStep &step, const AttentionShape &shape,
                  const AttentionTensors &tensors, std::string *error,
                  AttentionIsa isa = AttentionIsa::Best) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUATTENTION_H
