//===- Plan.h - The validated contents of an artifact's plan.json ---------===//
//
// plan.json (docs/plan-format.md) lists each entry point of a compiled model as
// ordered steps over buffers at fixed offsets of one arena. parsePlan checks
// everything that can be checked without the artifact's other files: types of
// every JSON field, offsets, sizes, dtypes, buffer ids, GEMM dimensions and
// strides, copy sizes, the names the training loop relies on. A Plan that
// exists is safe to execute as far as the plan itself is concerned; Artifact
// adds the checks against kernels.so and params.safetensors.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_PLAN_H
#define LOOMRT_PLAN_H

#include "loomrt/DType.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/PipelineSchedule.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

/// The plan format version this runtime reads (and the newest it accepts).
inline constexpr int64_t kPlanVersion = 1;
/// The kernel calling convention this runtime implements.
inline constexpr int64_t kKernelAbiVersion = 1;
/// Every buffer offset is a multiple of this, and arenas are aligned to it.
inline constexpr uint64_t kBufferAlignment = 64;
/// Largest plan.json accepted: a bound on what a hostile file makes us parse.
inline constexpr uint64_t kPlanMaxFileSize = uint64_t(256) << 20;

/// Buffer `i` of an entry: a dense row-major array at `offset` of the arena.
struct PlanBuffer {
  uint64_t offset = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t elements = 0; ///< product(shape)
  uint64_t bytes = 0;    ///< elements * dtypeSize(dtype)
};

/// Param: a trained tensor of the model. Buffer: a tensor of the model that
/// the step updates but no optimizer touches (BatchNorm running statistics).
/// State: optimizer state. Input, Output, Grad: per call.
enum class BindingKind : uint8_t { Param, State, Input, Output, Grad, Buffer };

/// "param", "state", "input", "output", "grad", "buffer".
const char *bindingKindName(BindingKind kind) noexcept;

/// Params, buffers and optimizer state: the training state, kept between
/// calls and saved in checkpoints.
inline bool isStateKind(BindingKind kind) noexcept {
  return kind == BindingKind::Param || kind == BindingKind::State ||
         kind == BindingKind::Buffer;
}

/// Params and buffers: the model itself (saved by --save-params, exported
/// to ONNX, enough to run its predictions).
inline bool isModelKind(BindingKind kind) noexcept {
  return kind == BindingKind::Param || kind == BindingKind::Buffer;
}

/// The device mesh a plan was compiled for (`mesh` in plan.json): named
/// axes and their sizes, e.g. axes {"dp"}, shape {2}. A plan without one
/// runs on one device.
struct PlanMesh {
  std::vector<std::string> axes;
  std::vector<int64_t> shape; ///< one size (>= 1) per axis
  /// The number of ranks: the product of the sizes.
  int64_t size() const noexcept;
  /// The index of axis `name`, or -1.
  int axisIndex(std::string_view name) const noexcept;
  /// The axes larger than 1. With two or more, a collective over one axis
  /// runs among the ranks that share every other coordinate, over a
  /// communicator of its own (MeshComms, loomrt/Mesh.h).
  int axesLargerThanOne() const noexcept;
  /// The coordinate on axis `axis` of rank `rank`: ranks number the places
  /// of the mesh row-major over the axes in plan order (the last axis
  /// fastest), so on [dp=2, tp=2] rank = i_dp * 2 + i_tp.
  int64_t coordinate(int64_t rank, uint32_t axis) const noexcept;
  /// The distance in ranks between neighbours along `axis`: the product
  /// of the sizes of the axes after it.
  int64_t stride(uint32_t axis) const noexcept;
  /// "dp=2", "dp=2, tp=4": for messages.
  std::string describe() const;
};

/// A binding that holds one rank's slice of a tensor (`shard` in plan.json),
/// r being the rank's index along `axis`. Two kinds:
/// - flat (`dim` < 0; ZeRO): the whole tensor of `shape`, flattened
///   row-major and zero-padded to `ranks * k` elements (k =
///   ceil(product(shape) / ranks)), of which rank r holds elements
///   [r * k, (r + 1) * k). The binding's own shape is then [k].
/// - along dimension `dim` (tensor parallelism): that dimension (size D)
///   is cut into `groups` equal consecutive groups, each group into
///   `ranks` equal consecutive blocks, and rank r holds block r of every
///   group, in group order, every other dimension whole. The binding's
///   shape is `shape` with shape[dim] = D / ranks; no padding (parsePlan
///   checked that groups * ranks divides D).
struct BindingShard {
  std::string axis;           ///< a mesh axis
  uint32_t axisIndex = 0;     ///< its index in PlanMesh::axes
  int64_t ranks = 1;          ///< the axis's size
  std::vector<int64_t> shape; ///< the whole tensor's shape
  uint64_t elements = 0;      ///< product(shape)
  int64_t dim = -1;           ///< the dimension cut; -1: flat
  int64_t groups = 1;         ///< groups along `dim` (1 when flat)

  bool alongDim() const noexcept { return dim >= 0; }
};

/// The values an integer input must hold (plan `checks`, written by
/// loomc's loom-input-checks): those in [min, max), or `ignore`. `op`
/// names the op that reads the input as indices or labels.
struct InputCheck {
  int64_t min = 0, max = 0;
  std::optional<int64_t> ignore;
  std::string op;
};

/// One input or output of an entry point, as the plan declares it.
struct Binding {
  std::string name; ///< loom.param / loom.opt_state / loom.input / ... name
  BindingKind kind = BindingKind::Input;
  uint32_t buffer = 0; ///< buffer id
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< the buffer's ([k] when sharded)
  uint64_t bytes = 0;         ///< the buffer's
  /// Set when the buffer holds this rank's slice of the tensor.
  std::optional<BindingShard> shard;
  /// An integer input's accepted values (empty: any).
  std::vector<InputCheck> checks;

  /// The tensor's own shape: the whole tensor's when sharded. What
  /// params.safetensors, checkpoints and the trainer's tensors hold.
  const std::vector<int64_t> &wholeShape() const noexcept {
    return shard ? shard->shape : shape;
  }
  /// The whole tensor's size in bytes.
  uint64_t wholeBytes() const noexcept {
    return shard ? shard->elements * dtypeSize(dtype) : bytes;
  }
};

/// What a GEMM step applies to its result, row by row of C (`bias` has n
/// elements and is added to every row; gelu is the tanh approximation).
enum class GemmEpilogue : uint8_t {
  None,
  Bias,
  Relu,
  Gelu,
  BiasRelu,
  BiasGelu
};

/// "none", "bias", "relu", "gelu", "bias_relu", "bias_gelu".
const char *gemmEpilogueName(GemmEpilogue epilogue) noexcept;
/// True for the epilogues that read a bias buffer.
inline bool gemmEpilogueHasBias(GemmEpilogue e) noexcept {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::BiasRelu ||
         e == GemmEpilogue::BiasGelu;
}

struct GemmStep {
  uint32_t a = 0, b = 0, c = 0;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
  uint64_t strideA = 0, strideB = 0, strideC = 0; ///< in elements
  GemmEpilogue epilogue = GemmEpilogue::None;
  uint32_t bias = 0; ///< buffer id, when gemmEpilogueHasBias(epilogue)
};

/// Which tensor of `y = conv2d(x, w)` a conv step writes: `y` (forward),
/// `x` from `y` (backward_data: the input gradient from the output
/// gradient), or `w` from `x` and `y` (backward_weights).
enum class ConvDirection : uint8_t { Forward, BackwardData, BackwardWeights };

/// "forward", "backward_data", "backward_weights".
const char *convDirectionName(ConvDirection direction) noexcept;

/// A 2-D convolution (CPU target, f32): `x` is `[N, C, H, W]`, `w` is
/// `[O, C / groups, KH, KW]` and `y` is `[N, O, OH, OW]`, all dense NCHW.
/// parsePlan checked that the three shapes agree with the geometry, so
/// OH = (H + pad_top + pad_bottom - (KH - 1) * dil_h - 1) / stride_h + 1.
struct ConvStep {
  ConvDirection direction = ConvDirection::Forward;
  uint32_t x = 0, w = 0, y = 0;  ///< buffer ids
  int64_t strides[2] = {1, 1};   ///< h, w
  int64_t padding[4] = {};       ///< top, left, bottom, right
  int64_t dilations[2] = {1, 1}; ///< h, w (1: none)
  int64_t groups = 1;
  /// x and y (the activations) are NHWC rather than NCHW; w stays OIHW.
  bool channelsLast = false;
};

/// Which half of a fused op a fused step computes (its `direction`): the
/// forward's results from its inputs, or the gradients from the cotangent
/// and what the forward saved. An attention step's forward writes `out` and
/// `lse` from q, k and v, its backward dq, dk, dv (and dbias) from dout and
/// the saved out and lse; a linear_cross_entropy step's forward writes the
/// loss and the rows' lse from x, w and the labels, its backward dx and dw
/// from dloss and the saved lse.
enum class FusedDirection : uint8_t { Forward, Backward };
using AttentionDirection = FusedDirection;
using LinearCrossEntropyDirection = FusedDirection;

/// "forward", "backward".
const char *fusedDirectionName(FusedDirection direction) noexcept;

/// Fused scaled-dot-product attention (docs/plan-format.md, `attention`):
/// q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], out [B, Hq, T, Dv],
/// lse [B, Hq, T] (f32), query head h reading key/value head h / (Hq / Hkv).
/// parsePlan checked every shape, dtype and overlap, so the fields below
/// describe buffers that agree.
struct AttentionStep {
  AttentionDirection direction = AttentionDirection::Forward;
  uint32_t q = 0, k = 0, v = 0, out = 0, lse = 0; ///< buffer ids
  /// Backward only: the output gradient and the gradients written.
  uint32_t dout = 0, dq = 0, dk = 0, dv = 0;
  /// Optional: a bool mask and a float bias, each [B, Hq, T, S] with any
  /// dimension 1 (broadcast); dbias (backward, only with a bias) has the
  /// bias's shape.
  std::optional<uint32_t> mask, bias, dbias;
  /// Optional: document ids of packed sequences, i64 or i32 [B, T] (T ==
  /// S): query i sees key j only when they are equal.
  std::optional<uint32_t> segments;
  double scale = 1.0; ///< finite
  bool causal = false;
  int64_t window = 0; ///< > 0 (with causal): key j is seen by i - j < window
  /// Optional: dropout on the probabilities, drawn from the i64 [] `seed`
  /// buffer as loom.dropout draws the [B, Hq, T, S] probabilities' mask
  /// (loomrt/Random.h); `dropout` in (0, 1) exactly when `seed` is given.
  std::optional<uint32_t> seed;
  float dropout = 0.0f;
  int64_t stream = 0;
};

/// How a linear_cross_entropy step reduces its rows' losses: their mean
/// over the rows not ignored, their sum, or none (one loss per row).
enum class LinearCrossEntropyReduction : uint8_t { Mean, Sum, None };

/// "mean", "sum", "none".
const char *
linearCrossEntropyReductionName(LinearCrossEntropyReduction reduction) noexcept;

/// A fused language-model head (docs/plan-format.md,
/// `linear_cross_entropy`): logits = x w^T (transposeW: w is [V, C]) or x w
/// (w is [C, V]) for x [N, C], then log-softmax and the cross-entropy with
/// `labels` [N] (i64 or i32), in blocks so that the [N, V] logits never
/// exist. parsePlan checked every shape, dtype and overlap, so the fields
/// below describe buffers that agree.
struct LinearCrossEntropyStep {
  LinearCrossEntropyDirection direction = LinearCrossEntropyDirection::Forward;
  uint32_t x = 0, w = 0, labels = 0; ///< buffer ids
  uint32_t lse = 0; ///< f32 [N]: written by the forward, read by the backward
  /// Forward only: f32, [] (mean, sum) or [N] (none).
  uint32_t loss = 0;
  /// Backward only: the loss's gradient (the loss's shape) and the
  /// gradients written, dx (x's shape) and dw (w's shape).
  uint32_t dloss = 0, dx = 0, dw = 0;
  bool transposeW = false;
  LinearCrossEntropyReduction reduction = LinearCrossEntropyReduction::Mean;
  /// Rows whose label is this contribute nothing (absent: none is ignored).
  std::optional<int64_t> ignoreIndex;
  /// The model node (`node`; "" where absent): run-time errors name it.
  std::string node;
};

/// The launch shape of a kernel step on the CUDA target (absent on CPU).
struct KernelLaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t sharedBytes = 0; ///< dynamic shared memory per block
};

/// Largest dynamic shared memory a plan may ask for per block (sm_90's
/// opt-in maximum, 227 KiB); the CUDA backend also checks the device's.
inline constexpr uint32_t kMaxSharedBytes = 232448;

/// What a collective step does over the ranks of its mesh axis
/// (docs/plan-format.md, `collective`).
enum class CollectiveOp : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  RankSlice
};

/// "all_reduce", "reduce_scatter", "all_gather", "rank_slice".
const char *collectiveOpName(CollectiveOp op) noexcept;

/// How all_reduce and reduce_scatter combine the ranks' values (None for
/// the others); Mean is the sum divided by the number of ranks.
enum class CollectiveReduce : uint8_t { None, Sum, Max, Mean };

/// "none", "sum", "max", "mean".
const char *collectiveReduceName(CollectiveReduce reduce) noexcept;

/// A collective step over the `ranks` ranks of mesh axis `axis`; `src` and
/// `dst` (buffer ids) have one dtype, and parsePlan checked their element
/// counts: all_reduce src = dst, reduce_scatter and rank_slice src =
/// ranks * dst, all_gather dst = ranks * src; they share no bytes, except
/// an all_reduce's, which may be one buffer (in place).
struct CollectiveStep {
  CollectiveOp op = CollectiveOp::AllReduce;
  CollectiveReduce reduce = CollectiveReduce::None;
  uint32_t axis = 0; ///< index in PlanMesh::axes
  int64_t ranks = 1; ///< the axis's size
  uint32_t src = 0, dst = 0;
  /// The parameter whose gradient a data-parallel mean reduces (the
  /// optional `grad`; "" when absent): the steps gradient compression
  /// (Plan::gradCompression) may run compressed.
  std::string grad;
};

struct PlanStep {
  enum class Kind : uint8_t {
    Kernel,
    Gemm,
    Copy,
    Conv,
    Attention,
    LinearCrossEntropy,
    Collective
  };
  Kind kind = Kind::Kernel;
  // Kernel: the symbol, its index in Plan::kernelSymbols, its buffer ids.
  std::string kernel;
  uint32_t kernelIndex = 0;
  std::vector<uint32_t> buffers;
  KernelLaunchDims launch; ///< CUDA target only
  // Gemm.
  GemmStep gemm;
  // Conv.
  ConvStep conv;
  // Attention.
  AttentionStep attention;
  // LinearCrossEntropy.
  LinearCrossEntropyStep linearCrossEntropy;
  // Copy.
  uint32_t src = 0, dst = 0;
  // Collective.
  CollectiveStep collective;
  /// The buffers the step writes (a kernel's outputs as `writes` lists them,
  /// after its last launch on CUDA; a gemm's c; a conv's written operand;
  /// an attention's out and lse, or dq, dk, dv and dbias; a
  /// linear_cross_entropy's loss and lse, or dx and dw (or those of them
  /// its `writes` lists); a collective's dst)
  /// and, for each, the model node whose value it holds ("" where unknown).
  /// Optional in plan.json: loom-run --check-numerics reads them.
  std::vector<uint32_t> writes;
  std::vector<std::string> nodes;
};

/// The number of PlanStep::Kind values (they count from 0).
inline constexpr size_t kStepKinds = 7;
/// "kernel", "gemm", "copy", "conv", "attention", "linear_cross_entropy",
/// "collective": the step's `kind` in plan.json.
const char *stepKindName(PlanStep::Kind kind) noexcept;

/// The buffer ids a step reads or writes (a kernel's `buffers`; a gemm's a,
/// b, c and bias; a conv's x, w, y; an attention's q, k, v, out, lse, mask,
/// bias and, backward, dout, dq, dk, dv, dbias; a linear_cross_entropy's
/// x, w, labels, lse and loss, or x, w, labels, lse, dloss, dx and dw; a
/// copy's or collective's src and dst).
std::vector<uint32_t> stepBuffers(const PlanStep &step);

struct PlanEntry {
  std::string name;
  uint64_t arenaBytes = 0;
  std::vector<PlanBuffer> buffers;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<PlanStep> steps;

  /// The input / output called `name`, or nullptr.
  const Binding *findInput(std::string_view name) const noexcept;
  const Binding *findOutput(std::string_view name) const noexcept;
};

/// The top-level `pipeline` of a plan compiled with loomc --pp
/// (docs/pipeline.md, "In plan.json"): the model cut into `stages` stages,
/// stage s on coordinate s % ranks of mesh axis `axis`, each with its
/// entries stage<s>_forward, stage<s>_backward (or _backward_input and
/// _backward_weight) and stage<s>_apply_gradients, which parsePlan checked
/// against the boundaries; and the action list of each coordinate, checked
/// by pp::checkSchedule (it cannot deadlock).
struct PlanPipeline {
  std::string axis;          ///< a mesh axis ("pp")
  uint32_t axisIndex = 0;    ///< its index in PlanMesh::axes
  int64_t ranks = 1;         ///< P: the axis's size
  int64_t stages = 1;        ///< S = virtualStages * ranks
  int64_t virtualStages = 1; ///< V
  int64_t microbatches = 1;  ///< M per training step (and dp row)
  /// boundaries[b]: what stage b passes to stage b + 1 (S - 1 lists).
  std::vector<std::vector<pp::BoundaryTensor>> boundaries;
  /// The actions of each coordinate; `name` is the plan's `schedule`.
  pp::Schedule schedule;
  /// What the checker measured (unit costs): peak micro-batches in flight.
  pp::ScheduleStats stats;
  /// Per stage: whether its actions use B (stage<s>_backward), and I and W
  /// (stage<s>_backward_input, stage<s>_backward_weight).
  std::vector<bool> fullBackward, splitBackward;
  /// A parameter read by several stages (a head tied to the embedding):
  /// `stages` strictly increasing, at least 2; the first owns it (only its
  /// apply_gradients takes it and its state).
  struct SharedParam {
    std::string name;
    std::vector<int64_t> stages;
    int64_t owner() const { return stages.front(); }
  };
  /// The optional `shared`, in the plan's order.
  std::vector<SharedParam> shared;
  /// The entry of `shared` that names `param`, or null.
  const SharedParam *findShared(std::string_view param) const {
    for (const SharedParam &p : shared)
      if (p.name == param)
        return &p;
    return nullptr;
  }
};

/// "stage3_forward": the entry of stage `stage` for `what` ("forward",
/// "backward", "backward_input", "backward_weight", "apply_gradients").
std::string pipelineEntryName(int64_t stage, std::string_view what);

struct Plan {
  int64_t version = kPlanVersion;
  std::string target; ///< "cpu" or "cuda"
  int64_t kernelAbi = kKernelAbiVersion;
  std::string kernels; ///< file name in the artifact, "" for none
  /// CUDA target: the architecture `kernels` (a cubin) was built for, as
  /// major * 10 + minor (90 for sm_90); 0 on CPU.
  int64_t sm = 0;
  /// CUDA target: the same kernels as PTX (JIT fallback), "" for none.
  std::string ptx;
  std::string params;      ///< file name in the artifact, "" for none
  std::string sourceModel; ///< "" when absent
  /// The mesh the plan was compiled for; absent: one device.
  std::optional<PlanMesh> mesh;
  /// Pipeline parallelism (loomc --pp); absent: none.
  std::optional<PlanPipeline> pipeline;
  /// The optional `grad_compression` ("none", "powersgd:rank=R",
  /// "topk:FRACTION", "int8"), as written (validated); "" when absent.
  /// Training compresses the reductions of the steps with a `grad` by it
  /// unless TrainOptions::gradCompression says otherwise.
  std::string gradCompression;
  std::vector<PlanEntry> entries;
  /// Every distinct kernel symbol, in order of first use; PlanStep::kernelIndex
  /// indexes it.
  std::vector<std::string> kernelSymbols;

  const PlanEntry *findEntry(std::string_view name) const noexcept;
};

/// "f32 [2]", "f32 [2] (shard of [4, 1] over dp)" or "f32 [64, 48]
/// (shard of [64, 192] over tp, dim 1, 3 groups)": a binding's type, for
/// messages.
std::string describeBinding(const Binding &binding);

/// The binding of each param, buffer and state tensor of the plan, by
/// name: the first entry's that takes it (parsePlan checked that every
/// entry agrees on its kind, type and sharding).
std::map<std::string, const Binding *> stateBindings(const Plan &plan);

/// Parses and validates plan.json text. `what` starts every message (normally
/// "plan.json"), which then names the entry, step and field:
/// "plan.json: entry 'train_step': step 12 (gemm): field 'k': ...".
/// Format for malformed plans, Unsupported for a newer version, kernel ABI or
/// an unknown target.
std::optional<Plan> parsePlan(std::string_view text, const std::string &what,
                              std::string *error,
                              ErrorCode *code = nullptr) noexcept;

/// Reads `path` (at most kPlanMaxFileSize bytes) and parses it; messages start
/// with `what` (defaults to the path).
std::optional<Plan> readPlan(const std::string &path, std::string *error,
                             ErrorCode *code = nullptr,
                             const std::string &what = "") noexcept;

/// True if `name` is a plain file name: non-empty, not "." or "..", no '/',
/// no NUL, no control bytes. Artifact files must be named so (they may not
/// reach outside the artifact directory).
bool isPlainFileName(std::string_view name) noexcept;

} // namespace loomrt

#endif // LOOMRT_PLAN_H
