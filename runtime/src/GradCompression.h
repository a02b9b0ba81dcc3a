//===- GradCompression.h - Compressed gradient reductions -------*- C++ -*-===//
//
// Gradient compression with error feedback on the data-parallel reductions
// of a compiled plan (docs/plan-format.md, `grad_compression` and the
// collective step's `grad`). A collective step that averages a parameter's
// gradient over mesh axis dp names the parameter in `grad`; with
// compression on, CollectiveSteps hands such a step to a
// GradientCompression instead of issuing the exact collective. Per
// parameter and rank it keeps a residual e (f32, the gradient's shape,
// zero at first): the rank compresses c = C(g + e), keeps e = (g + e) -
// decompress(c), and the step's dst becomes the mean over the dp ranks of
// the decompressed values (a reduce_scatter's: this rank's block of it).
//
// - powersgd:rank=R (Vogels et al. 2019, as PyTorch's powerSGD_hook): the
//   gradient seen as a matrix [n, m] (n its first dimension, m the product
//   of the rest), compressed only when (n + m) R < n m (never a vector).
//   M = g + e; Q (per parameter, [m, R], the last step's: warm start;
//   first a fixed random one, the same on every rank) orthonormalized;
//   P = M Q, averaged over the ranks, orthonormalized; Q = M^T P,
//   averaged; the result P Q^T (the mean of the ranks' M projected on P).
//   As in PyTorch, e = M - P Q^T: the local M minus the global result.
// - topk:F: each rank sends the k = max(1, ceil(F numel)) entries of
//   largest |g + e| as (index, value) pairs to all (an all-gather); every
//   rank adds them into zeros in rank order and divides by the ranks; e is
//   g + e with the sent entries zeroed.
// - int8: s = (max over the ranks of max |g + e|) / 127 (one all-reduce
//   max), each rank's (g + e) / s stochastically rounded to int8 (its
//   draws a function of the training seed, the step, the dp rank and the
//   parameter's name, so a resumed run draws the same), the int8 arrays
//   all-gathered and summed dequantized in f32 in rank order, divided by
//   the ranks; e = (g + e) - s q.
//
// Everything runs synchronously at its step, on host memory (the CPU
// backend). Gradients other than f32 and tensors PowerSGD does not
// compress run the exact collective, without a residual.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_GRADCOMPRESSION_H
#define LOOMRT_SRC_GRADCOMPRESSION_H

#include "loomrt/Collectives.h"
#include "loomrt/Npy.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

/// A gradient compression method: loom-run --grad-compression=SPEC, or the
/// plan's top-level `grad_compression`.
struct GradCompressionSpec {
  enum class Method : uint8_t { None, PowerSgd, TopK, Int8 };
  Method method = Method::None;
  int64_t rank = 0;    ///< PowerSgd: the approximation's rank R
  double fraction = 0; ///< TopK: the share of the entries sent
  /// "none", "powersgd:rank=2", "topk:0.01", "int8": what checkpoints
  /// record, and how messages name it.
  std::string text = "none";
  bool enabled() const noexcept { return method != Method::None; }
};

/// Parses "none", "powersgd:rank=R" (R from 1 to 65536), "topk:FRACTION"
/// (a decimal, 0 < FRACTION <= 1: "0.01", "1e-3") or "int8", exactly (no
/// blanks, lower case). False with a message naming `text` otherwise.
bool parseGradCompression(std::string_view text, GradCompressionSpec *spec,
                          std::string *error);

/// The checkpoint names of the state (docs/loom-run.md, "Checkpoints"):
/// "<param>.grad_residual.dp<i>" (data-parallel rank i's residual) and
/// "<param>.powersgd_q".
std::string gradResidualName(const std::string &param, int64_t dpRank);
std::string powerSgdQName(const std::string &param);
/// Whether `name` is one of those (a checkpoint holds them besides the
/// artifact's params and state).
bool isGradCompressionTensorName(std::string_view name) noexcept;

/// The algorithms on plain arrays (row-major), for GradientCompression and
/// its unit tests.
namespace gradcomp {

/// Whether PowerSGD of rank `rank` compresses a gradient of `shape`: its
/// matrix view [n, m] (n = shape[0], m the product of the rest; a vector
/// never) has (n + m) * rank < n * m. Sets `*n` and `*m` when it does.
bool powerSgdCompresses(const std::vector<int64_t> &shape, int64_t rank,
                        int64_t *n, int64_t *m);
/// Gram-Schmidt on the `cols` columns of `a` ([rows, cols]): each column
/// made orthogonal to those before it and of norm 1; a column that
/// vanishes (norm 0) stays zero. Sums in double.
void orthonormalizeColumns(float *a, int64_t rows, int64_t cols);
/// c[rows, cols] = a[rows, inner] . b[inner, cols], or with `transposeA` a
/// stored [inner, rows]; sums in double.
void matmul(const float *a, const float *b, float *c, int64_t rows,
            int64_t inner, int64_t cols, bool transposeA);
/// c[rows, cols] = p[rows, r] . q[cols, r]^T; sums in double.
void multiplyTransposed(const float *p, const float *q, float *c, int64_t rows,
                        int64_t cols, int64_t r);
/// PowerSGD's first Q of `param` ([m, r]): standard normal draws from a
/// seed that is a function of the name alone (the same on every rank).
std::vector<float> initialQ(std::string_view param, int64_t m, int64_t r);

/// top-k's k: max(1, ceil(fraction * numel)), at most numel.
uint64_t topKCount(double fraction, uint64_t numel);
/// The indices of the `k` entries of largest |v| (ties: the lower index),
/// in ascending order.
std::vector<uint32_t> topK(const float *v, uint64_t n, uint64_t k);

/// The key of int8's draws for one rank, step and parameter.
uint64_t int8Key(uint64_t seed, int64_t step, int64_t rank,
                 std::string_view param);
/// v / scale rounded stochastically to an integer in [-127, 127] (unbiased:
/// up, with probability the fractional part): entry i's draw is a function
/// of (key, i). A zero scale gives zeros.
void quantizeInt8(const float *v, uint64_t n, float scale, uint64_t key,
                  int8_t *q);

} // namespace gradcomp

/// What the gradient reductions sent, per rank (docs/loom-run.md: the
/// payload each rank contributes): an exact all_reduce or reduce_scatter
/// of numel elements numel * element size; PowerSGD (n + m) * R * 4;
/// top-k k * 8 (a 4-byte index and an f32); int8 numel + 4 (the scale's
/// all-reduce). `exact` is what the exact collectives would have sent.
struct GradCompressionBytes {
  uint64_t sent = 0, exact = 0;
  int64_t reductions = 0; ///< gradient reductions run (compressed or not)
};

/// The compression of one training run: the spec, every parameter's state
/// and the bytes sent. Artifact::setGradientCompression hands it to the
/// runs' CollectiveSteps.
class GradientCompression {
public:
  GradientCompression(GradCompressionSpec spec, uint64_t seed);

  const GradCompressionSpec &spec() const noexcept { return spec_; }

  /// Registers the gradient reductions of `entry`: its collective steps
  /// with a `grad` over the mesh axis dp of more than one rank. Those the
  /// method compresses get their state (zero residuals, PowerSGD's first
  /// Q); the others run exact. False when two reductions of one
  /// parameter's gradient disagree on its type.
  bool addEntry(const Plan &plan, const PlanEntry &entry, std::string *error);
  /// Parameters whose reductions are compressed, and those registered.
  size_t compressedCount() const noexcept;
  size_t registeredCount() const noexcept { return registered_.size(); }
  /// The registered parameters whose gradients are not f32 (their
  /// reductions stay exact).
  std::vector<std::string> notF32() const;

  /// The optimizer step whose gradients come next (int8's draws).
  void beginStep(int64_t step) noexcept { step_ = step; }

  /// Whether CollectiveSteps runs `step` through reduce(): it names a
  /// gradient whose reduction is compressed.
  bool compresses(const PlanStep &step) const noexcept;
  /// Runs `step` compressed: this rank's gradient at `src` (host memory,
  /// the step's src buffer) reduced over `comm` (the step's axis) into
  /// `dst` (which may be `src`). Synchronous; every rank of `comm` calls
  /// it for the same steps in the same order.
  bool reduce(const PlanStep &step, const PlanBuffer &src, const void *srcData,
              void *dstData, Collectives &comm, std::string *error);
  /// Counts a gradient reduction that runs exact (src: its src buffer).
  void countExact(const PlanBuffer &src) noexcept;
  GradCompressionBytes bytes() const noexcept { return bytes_; }

  /// The state as checkpoint tensors, every dp rank's residual included:
  /// a collective over `dp` (this state's axis; null: this rank alone, as
  /// dp rank `dpRank`), every rank of it calls it.
  bool gatherState(Collectives *dp, int64_t dpRank,
                   std::map<std::string, NpyArray> *out, std::string *error);
  /// Restores this rank's residuals (dp rank `dpRank`) and the Qs from a
  /// checkpoint's tensors, the ones it lacks or that do not fit staying
  /// zero (and PowerSGD's first Q): a line in `notes` names them.
  void restore(const std::map<std::string, NpyArray> &tensors, int64_t dpRank,
               std::vector<std::string> *notes);

private:
  struct State {
    std::vector<int64_t> shape; ///< the gradient's (the step's src buffer)
    uint64_t numel = 0;
    bool f32 = true;
    bool compressed = false; ///< else the exact collective runs
    int64_t n = 0, m = 0;    ///< PowerSGD's matrix view
    std::vector<float> residual;
    std::vector<float> q; ///< PowerSGD: [m, R]
  };

  // Each takes M = g + e and sets `out` (the mean of the ranks'
  // decompressed values) and `residual` (e's next value).
  bool powerSgd(State &st, const std::vector<float> &m, std::vector<float> &out,
                std::vector<float> &residual, Collectives &comm,
                std::string *error);
  bool topK(State &st, const std::vector<float> &m, std::vector<float> &out,
            std::vector<float> &residual, Collectives &comm,
            std::string *error);
  bool int8(const std::string &param, const std::vector<float> &m,
            std::vector<float> &out, std::vector<float> &residual,
            Collectives &comm, std::string *error);

  GradCompressionSpec spec_;
  uint64_t seed_ = 0;
  int64_t step_ = 0;
  std::map<std::string, State> registered_; ///< by param
  GradCompressionBytes bytes_;
};

} // namespace loomrt

#endif // LOOMRT_SRC_GRADCOMPRESSION_H
