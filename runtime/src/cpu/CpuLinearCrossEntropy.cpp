//===- CpuLinearCrossEntropy.cpp - Fused LM head in tiles of logits -------===//

#include "CpuLinearCrossEntropy.h"
#include "CpuGemm.h"
#include "CpuSoftmaxMath.h"

#include "../Support.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

// The row loops are compiled once per instruction set (see rowsFunction).
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define LOOMRT_LCE_X86 1
#define LOOMRT_TARGET_AVX512                                                   \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define LOOMRT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace loomrt {

using softmax::expF32;
using softmax::expRow;
using softmax::kMinusInf;
using softmax::maxNaN;
using softmax::rowMax;

LinearCrossEntropyShape linearCrossEntropyShape(const PlanBuffer &x,
                                                const PlanBuffer &w,
                                                bool transposeW) noexcept {
  LinearCrossEntropyShape s;
  s.rows = x.shape[0];
  s.features = x.shape[1];
  s.classes = transposeW ? w.shape[0] : w.shape[1];
  return s;
}

namespace {

/// Rows per tile where whole rows do not fit: the GEMMs that read W (the
/// logits, dx) are re-run (and W re-packed) once per block of rows, dw's
/// updates are products this deep. GPT-2's head (N 2048, C 768, V 50304)
/// on 2 Zen 4 cores with oneDNN, 4 MiB tiles: 512 x 2048 ran 1.12x the
/// unfused forward's time and 1.04x its backward's; 256 x 4096 1.16x and
/// 1.09x, 128 x 8192 1.32x and 1.18x, 1024 x 1024 and 2048 x 512 about as
/// 512 x 2048.
constexpr int64_t kTileRows = 512;

/// Floats rounded up to whole 64-byte lines.
int64_t lineUp(int64_t floats) { return (floats + 15) / 16 * 16; }

/// `n` rounded down to a multiple of 16 when it is at least 16.
int64_t roundDown16(int64_t n) { return n >= 16 ? n / 16 * 16 : n; }

/// The tile actually run: `blocks` (or the default) within [N, V].
LinearCrossEntropyBlocks clampBlocks(const LinearCrossEntropyShape &shape,
                                     LinearCrossEntropyBlocks blocks) {
  if (blocks.rows <= 0 || blocks.classes <= 0)
    blocks = linearCrossEntropyBlocks(shape);
  blocks.rows = std::max<int64_t>(1, std::min(blocks.rows, shape.rows));
  blocks.classes =
      std::max<int64_t>(1, std::min(blocks.classes, shape.classes));
  return blocks;
}

/// The scratch of a tile: its logits, then per row the running sum
/// (double), maximum and label logit of the forward's online softmax.
struct Scratch {
  float *logits = nullptr;
  double *sums = nullptr;
  float *maxes = nullptr, *picked = nullptr;
};

int64_t scratchFloats(const LinearCrossEntropyBlocks &b) {
  return lineUp(b.rows * b.classes) + 4 * b.rows;
}

/// The step's sizes, tensors and options.
struct Problem {
  LinearCrossEntropyShape shape;
  LinearCrossEntropyTensors t;
  bool transposeW = false;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;

  int64_t label(int64_t i) const {
    return t.labels64 ? static_cast<const int64_t *>(t.labels)[i]
                      : static_cast<const int32_t *>(t.labels)[i];
  }
  bool ignored(int64_t label) const {
    return hasIgnore && label == ignoreIndex;
  }
};

/// logits[r, nb] = x[i0 .. i0 + r) W^T restricted to classes [j0, j0 + nb).
void tileLogits(const DnnlGemm &gemm, const Problem &p, int64_t i0, int64_t r,
                int64_t j0, int64_t nb, float *logits) {
  const int64_t C = p.shape.features, V = p.shape.classes;
  const float *x = p.t.x + i0 * C;
  // W [V, C]: rows j0 .. of W, transposed. W [C, V]: columns j0 .. of W.
  if (p.transposeW)
    cpuSgemm(gemm, false, true, r, nb, C, x, C, p.t.w + j0 * C, C, 0.0f, logits,
             nb);
  else
    cpuSgemm(gemm, false, false, r, nb, C, x, C, p.t.w + j0, V, 0.0f, logits,
             nb);
}

/// One tile's row work: the forward's online softmax or the backward's
/// dlogits, for rows [begin, end) of the tile (a thread's share).
struct Tile {
  const Problem *p = nullptr;
  int64_t i0 = 0, j0 = 0, nb = 0; ///< first row, first class, classes
  float *logits = nullptr;        ///< [rows, nb]
  // Forward: per row of the tile.
  double *sums = nullptr;
  float *maxes = nullptr, *picked = nullptr;
  // Backward: the row weight where the reduction has one for all rows.
  LinearCrossEntropyReduction reduction = LinearCrossEntropyReduction::Mean;
  float scalar = 0;
};

LOOMRT_INLINE void forwardRows(const Tile &t, int64_t begin, int64_t end) {
  const int64_t nb = t.nb, j0 = t.j0;
  for (int64_t i = begin; i < end; ++i) {
    float *row = t.logits + i * nb;
    const int64_t label = t.p->label(t.i0 + i);
    if (label >= j0 && label < j0 + nb)
      t.picked[i] = row[label - j0];
    // The online softmax: rescale the sum when the maximum grows.
    const float newMax = maxNaN(t.maxes[i], rowMax(row, nb));
    if (newMax == kMinusInf)
      continue; // every logit so far -inf: nothing to add
    const double alpha = std::exp(static_cast<double>(t.maxes[i]) - newMax);
    t.sums[i] = t.sums[i] * alpha + expRow(row, nb, newMax);
    t.maxes[i] = newMax;
  }
}

LOOMRT_INLINE void backwardRows(const Tile &t, int64_t begin, int64_t end) {
  const int64_t nb = t.nb, j0 = t.j0;
  for (int64_t i = begin; i < end; ++i) {
    float *row = t.logits + i * nb;
    const int64_t label = t.p->label(t.i0 + i);
    if (t.p->ignored(label)) {
      std::fill(row, row + nb, 0.0f);
      continue;
    }
    // dlogits = weight (softmax - onehot), in place.
    const float weight = t.reduction == LinearCrossEntropyReduction::None
                             ? t.p->t.dloss[t.i0 + i]
                             : t.scalar;
    const float lse = t.p->t.lse[t.i0 + i];
    for (int64_t c = 0; c < nb; ++c)
      row[c] = weight * expF32(row[c] - lse);
    if (label >= j0 && label < j0 + nb)
      row[label - j0] -= weight;
  }
}

using RowsFn = void (*)(const Tile &, int64_t, int64_t);

// The row loops compiled for each instruction set, as the attention
// steps' (CpuAttention.cpp): the entry points carry the target, everything
// they call is inlined into them.
struct Baseline {
  static void forward(const Tile &t, int64_t b, int64_t e) {
    forwardRows(t, b, e);
  }
  static void backward(const Tile &t, int64_t b, int64_t e) {
    backwardRows(t, b, e);
  }
};

#ifdef LOOMRT_LCE_X86
struct Avx2 {
  LOOMRT_TARGET_AVX2 static void forward(const Tile &t, int64_t b, int64_t e) {
    forwardRows(t, b, e);
  }
  LOOMRT_TARGET_AVX2 static void backward(const Tile &t, int64_t b, int64_t e) {
    backwardRows(t, b, e);
  }
};

struct Avx512 {
  LOOMRT_TARGET_AVX512 static void forward(const Tile &t, int64_t b,
                                           int64_t e) {
    forwardRows(t, b, e);
  }
  LOOMRT_TARGET_AVX512 static void backward(const Tile &t, int64_t b,
                                            int64_t e) {
    backwardRows(t, b, e);
  }
};
#endif

/// The loops of `isa`, or of the fastest this CPU runs (Best, or one it
/// cannot run).
RowsFn rowsFunction(AttentionIsa isa, bool backward) {
  std::vector<AttentionIsa> available;
  try {
    available = availableAttentionIsas();
  } catch (...) {
  }
  if (isa == AttentionIsa::Best ||
      std::find(available.begin(), available.end(), isa) == available.end())
    isa = available.empty() ? AttentionIsa::Baseline : available.front();
  switch (isa) {
#ifdef LOOMRT_LCE_X86
  case AttentionIsa::Avx512:
    return backward ? &Avx512::backward : &Avx512::forward;
  case AttentionIsa::Avx2:
    return backward ? &Avx2::backward : &Avx2::forward;
#endif
  default:
    return backward ? &Baseline::backward : &Baseline::forward;
  }
}

/// Runs `fn` over rows [0, rows) of the tile, split evenly over the OpenMP
/// team.
void runRows(RowsFn fn, const Tile &t, int64_t rows) {
#ifdef _OPENMP
  const int threads = static_cast<int>(
      std::min<int64_t>(rows, std::max(1, omp_get_max_threads())));
#pragma omp parallel num_threads(threads)
  {
    const int64_t n = omp_get_num_threads(), id = omp_get_thread_num();
    fn(t, rows * id / n, rows * (id + 1) / n);
  }
#else
  fn(t, 0, rows);
#endif
}

void runForward(const DnnlGemm &gemm, const Problem &p, RowsFn rowsFn,
                const LinearCrossEntropyBlocks &b, const Scratch &s,
                LinearCrossEntropyReduction reduction, int64_t counted) {
  const int64_t N = p.shape.rows, V = p.shape.classes;
  double total = 0;
  Tile t;
  t.p = &p;
  t.logits = s.logits, t.sums = s.sums, t.maxes = s.maxes;
  t.picked = s.picked;
  for (int64_t i0 = 0; i0 < N; i0 += b.rows) {
    const int64_t r = std::min(b.rows, N - i0);
    for (int64_t i = 0; i < r; ++i) {
      s.sums[i] = 0;
      s.maxes[i] = kMinusInf;
      s.picked[i] = 0;
    }
    t.i0 = i0;
    for (int64_t j0 = 0; j0 < V; j0 += b.classes) {
      t.j0 = j0, t.nb = std::min(b.classes, V - j0);
      tileLogits(gemm, p, i0, r, j0, t.nb, s.logits);
      runRows(rowsFn, t, r);
    }
    // In row order, one thread: the sum (and so the loss) does not depend
    // on the number of threads.
    for (int64_t i = 0; i < r; ++i) {
      const float lse = static_cast<float>(s.maxes[i] + std::log(s.sums[i]));
      p.t.lse[i0 + i] = lse;
      const float loss = p.ignored(p.label(i0 + i)) ? 0.0f : lse - s.picked[i];
      if (reduction == LinearCrossEntropyReduction::None)
        p.t.loss[i0 + i] = loss;
      else
        total += loss;
    }
  }
  if (reduction == LinearCrossEntropyReduction::Sum)
    p.t.loss[0] = static_cast<float>(total);
  else if (reduction == LinearCrossEntropyReduction::Mean)
    // No row counted: 0, as loom.cross_entropy (whose loss this is).
    p.t.loss[0] = counted == 0 ? 0.0f
                               : static_cast<float>(
                                     total / static_cast<double>(counted));
}

void runBackward(const DnnlGemm &gemm, const Problem &p, RowsFn rowsFn,
                 const LinearCrossEntropyBlocks &b, const Scratch &s,
                 LinearCrossEntropyReduction reduction, int64_t counted) {
  const int64_t N = p.shape.rows, C = p.shape.features, V = p.shape.classes;
  Tile t;
  t.p = &p;
  t.logits = s.logits;
  t.reduction = reduction;
  // The weight of each row's loss in the reduced loss, times dloss (none:
  // dloss's own per row).
  if (reduction == LinearCrossEntropyReduction::Sum)
    t.scalar = p.t.dloss[0];
  else if (reduction == LinearCrossEntropyReduction::Mean && counted > 0)
    t.scalar = static_cast<float>(static_cast<double>(p.t.dloss[0]) /
                                  static_cast<double>(counted));
  for (int64_t i0 = 0; i0 < N; i0 += b.rows) {
    const int64_t r = std::min(b.rows, N - i0);
    const float *x = p.t.x + i0 * C;
    t.i0 = i0;
    for (int64_t j0 = 0; j0 < V; j0 += b.classes) {
      const int64_t nb = std::min(b.classes, V - j0);
      t.j0 = j0, t.nb = nb;
      tileLogits(gemm, p, i0, r, j0, nb, s.logits);
      runRows(rowsFn, t, r);
      // dx[rows] (+)= dlogits W[classes] ([nb, C] as W's rows, or W's
      // columns transposed), over the class blocks.
      const float dxBeta = j0 == 0 ? 0.0f : 1.0f;
      float *dx = p.t.dx + i0 * C;
      if (p.transposeW)
        cpuSgemm(gemm, false, false, r, C, nb, s.logits, nb, p.t.w + j0 * C, C,
                 dxBeta, dx, C);
      else
        cpuSgemm(gemm, false, true, r, C, nb, s.logits, nb, p.t.w + j0, V,
                 dxBeta, dx, C);
      // dw[classes] (+)= dlogits^T x[rows] (W [V, C]) or x[rows]^T dlogits
      // (W [C, V]), over the row blocks.
      const float dwBeta = i0 == 0 ? 0.0f : 1.0f;
      if (p.transposeW)
        cpuSgemm(gemm, true, false, nb, C, r, s.logits, nb, x, C, dwBeta,
                 p.t.dw + j0 * C, C);
      else
        cpuSgemm(gemm, true, false, C, nb, r, x, C, s.logits, nb, dwBeta,
                 p.t.dw + j0, V);
    }
  }
}

void setError(std::string *error, const std::string &message) {
  if (error) {
    try {
      *error = message;
    } catch (...) {
    }
  }
}

/// "linear_cross_entropy 'NODE'" (without a node: "linear_cross_entropy").
std::string stepName(const LinearCrossEntropyStep &step) {
  return "linear_cross_entropy" + (step.node.empty()
                                       ? std::string()
                                       : " " + detail::quoteName(step.node));
}

} // namespace

LinearCrossEntropyBlocks
linearCrossEntropyBlocks(const LinearCrossEntropyShape &shape,
                         int64_t scratchFloats) noexcept {
  const int64_t N = std::max<int64_t>(1, shape.rows);
  const int64_t V = std::max<int64_t>(1, shape.classes);
  const int64_t budget = std::max<int64_t>(16, scratchFloats);
  if (N <= budget / V)
    return {N, V}; // everything at once
  if (budget / V >= kTileRows / 2)
    return {roundDown16(budget / V), V}; // whole rows, fewer than N
  const int64_t rows = std::min(N, kTileRows);
  return {rows, std::min(V, roundDown16(budget / rows))};
}

uint64_t
linearCrossEntropyScratchBytes(const LinearCrossEntropyShape &shape,
                               LinearCrossEntropyBlocks blocks) noexcept {
  return sizeof(float) * uint64_t(scratchFloats(clampBlocks(shape, blocks)));
}

bool runLinearCrossEntropy(const LinearCrossEntropyStep &step,
                           const LinearCrossEntropyShape &shape,
                           const LinearCrossEntropyTensors &tensors,
                           const DnnlGemm &gemm, std::string *error,
                           LinearCrossEntropyBlocks blocks, float *scratch,
                           AttentionIsa isa) noexcept {
  Problem p;
  p.shape = shape;
  p.t = tensors;
  p.transposeW = step.transposeW;
  p.hasIgnore = step.ignoreIndex.has_value();
  p.ignoreIndex = step.ignoreIndex.value_or(0);
  const bool backward = step.direction == LinearCrossEntropyDirection::Backward;
  const int64_t N = shape.rows, V = shape.classes;
  // Every label first: a bad one fails the step before anything is
  // written (and is never used as an index).
  int64_t counted = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t label = p.label(i);
    if (p.ignored(label))
      continue;
    if (label < 0 || label >= V) {
      try {
        setError(error, stepName(step) + ": row " + std::to_string(i) +
                            " has label " + std::to_string(label) +
                            ", outside [0, " + std::to_string(V) +
                            ") and not the ignore_index" +
                            (p.hasIgnore ? " " + std::to_string(p.ignoreIndex)
                                         : std::string(" (none given)")));
      } catch (...) {
      }
      return false;
    }
    ++counted;
  }
  if (N == 0) { // no tiles: what the loops would have left
    if (backward)
      std::fill(tensors.dw, tensors.dw + shape.features * V, 0.0f);
    else if (step.reduction != LinearCrossEntropyReduction::None)
      tensors.loss[0] = 0.0f; // sum, or mean over no row (as cross_entropy)
    return true;
  }
  blocks = clampBlocks(shape, blocks);
  const int64_t floats = scratchFloats(blocks);
  float *owned = nullptr;
  if (!scratch) {
    owned = static_cast<float *>(::operator new(
        sizeof(float) * size_t(floats), std::align_val_t(64), std::nothrow));
    if (!owned) {
      try {
        setError(error, stepName(step) + ": out of memory for a scratch of " +
                            std::to_string(floats * sizeof(float)) + " bytes");
      } catch (...) {
      }
      return false;
    }
    scratch = owned;
  }
  Scratch s;
  s.logits = scratch;
  s.sums = reinterpret_cast<double *>(scratch +
                                      lineUp(blocks.rows * blocks.classes));
  s.maxes = reinterpret_cast<float *>(s.sums + blocks.rows);
  s.picked = s.maxes + blocks.rows;
  const RowsFn rows = rowsFunction(isa, backward);
  if (backward)
    runBackward(gemm, p, rows, blocks, s, step.reduction, counted);
  else
    runForward(gemm, p, rows, blocks, s, step.reduction, counted);
  if (owned)
    ::operator delete(owned, std::align_val_t(64), std::nothrow);
  return true;
}

} // namespace loomrt
