//===- Passes.td - Loom's passes -----------------------------*- tablegen -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Training graph construction
//===----------------------------------------------------------------------===//

def AttachLossPass : Pass<"loom-attach-loss", "mlir::ModuleOp"> {
  let summary = "Appends a loss to a forward function that returns logits.";
  let description = [{
    Adds the labels as a new input argument (`loom.input = "<labels>"`) of
    `@forward` and replaces its results by one scalar result, the loss
    (`loom.output = "loss"`), computed from the model output named
    `output` (or the only output). A model that already returns a scalar
    named `loss` is left as is when `loss=auto`.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"auto\"",
           "Loss: cross_entropy, mse, or auto (use the model's own loss)">,
    Option<"labels", "labels", "std::string", "\"labels\"",
           "Name of the new labels input">,
    Option<"output", "output", "std::string", "\"\"",
           "Model output the loss reads (default: the only output)">,
    Option<"reduction", "reduction", "std::string", "\"mean\"",
           "mean or sum">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Cross-entropy label to ignore (-100: PyTorch's default)">,
    Option<"classAxis", "class-axis", "int64_t", "-1",
           "Cross-entropy class dimension of the logits: -1 (last, as in "
           "language models: [B, T, V] with labels [B, T]) or 1 ([N, C, ...])">,
    Option<"keepPredict", "keep-predict", "bool", "false",
           "Keep a copy of the model as @predict (its outputs, no labels)">,
    Option<"labelsDtype", "labels-dtype", "std::string", "\"i64\"",
           "Element type of cross-entropy labels: i64 or i32">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def BatchNormTrainPass : Pass<"loom-batch-norm-train", "mlir::ModuleOp"> {
  let summary = "Batch statistics and running-statistics updates in training.";
  let description = [{
    In `@<entry>` (by default `@forward`, the training forward after
    `loom-attach-loss`), replaces every `loom.batch_norm` that carries
    `momentum` (one that trains; its `mean` and `variance` operands are the
    running statistics, arguments marked `loom.buffer`) by normalization
    with the batch's statistics (`loom.batch_norm_stats`), as PyTorch does
    in training mode, and returns the running statistics' new values as
    extra results marked `loom.buffer = "<name>"`:
    `running = momentum * running + (1 - momentum) * batch`, the variance
    taken unbiased (times n / (n - 1), n the values per channel) as PyTorch
    does. `loom-autodiff` and `loom-optimizer` pass these results on, so
    `@train_step` returns them and the runtime keeps them with the
    parameters. Other functions (`@predict`) keep the running statistics.
  }];
  let options = [
    Option<"entry", "entry", "std::string", "\"forward\"",
           "Name of the training forward function.">,
  ];
  let statistics = [
    Statistic<"numRewritten", "num-rewritten", "Batch norms set to train">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def RecognizeDropoutPass : Pass<"loom-recognize-dropout", "mlir::ModuleOp"> {
  let summary = "Dropout and drop-path masks from random draws into loom.dropout.";
  let description = [{
    Exporters write dropout and stochastic depth (drop path: one draw per
    sample, broadcast over the rest) as a uniform draw, a comparison and a
    scaling; PyTorch's `bernoulli_(keep)` followed by `div_(keep)` becomes

      %u = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = s : [S]
      %m = loom.compare lt, %u, keep
      %c = loom.cast %m : i1 -> float
      %n = loom.div %c, keep         (or loom.mul %c, 1 / keep)

    with `keep` a scalar constant (possibly broadcast) in (0, 1]. Such an
    `%n` is `loom.dropout` of ones of shape S with ratio `1 - keep` and the
    draw's stream: the same distribution (a value kept with probability
    `keep` and scaled by `1 / keep`), and a form `loom-eval-entries` and
    `--dropout=off` know how to remove. Draws it does not recognize stay as
    they are.

    With `off`, every `loom.dropout` (the importers' and the recognized
    ones) is replaced by its input, as PyTorch does with p = 0; a
    `loom.random` left after recognition stays random and is reported with
    a warning naming its node.
  }];
  let options = [
    Option<"dropout", "dropout", "std::string", "\"on\"",
           "on (dropout as the model has it) or off (every dropout and "
           "recognized drop-path mask is the identity)">,
  ];
  let statistics = [
    Statistic<"numRecognized", "num-recognized",
              "Random masks recognized as dropout">,
    Statistic<"numRemoved", "num-removed", "Dropouts removed (off)">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def EvalEntriesPass : Pass<"loom-eval-entries", "mlir::ModuleOp"> {
  let summary = "Evaluation entries without dropout, as in PyTorch's eval mode.";
  let description = [{
    The runtime evaluates a model (held-out loss, accuracy, predictions)
    with `@predict` and `@forward`, and trains with `@forward_backward` /
    `@train_step`. In each function named in `entries`, every
    `loom.dropout` is replaced by its input and every `loom.attention`
    loses its dropout (PyTorch's `model.eval()`), and
    a `loom.rng_seed` argument nothing reads any more is removed. Runs after
    `loom-autodiff` and `loom-optimizer`, which build the training entries
    from `@forward` with its dropout.
  }];
  let options = [
    ListOption<"entries", "entries", "std::string",
               "Functions evaluated in eval mode (default: predict, forward)">,
  ];
  let statistics = [
    Statistic<"numRemoved", "num-removed", "Dropouts removed">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def FuseAttentionPass : Pass<"loom-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Rewrites attention chains into loom.attention.";
  let description = [{
    Finds `softmax(scale * Q K^T + masks) V` as exporters write it (batched
    matmuls, scalar scales on Q, K or the product, the repeat of key/value
    heads of grouped-query attention, additive masks or `select`s with a
    very negative fill, the NaN guard after the softmax) and replaces it by
    one `loom.attention`, whose gradient is one fused
    `loom.attention_grad`. The masks are split at `And`s and additive
    `where(keep, 0, lowest)`s into leaves. Leaves computed from constants
    are evaluated at compile time, one position at a time (never
    materialized), and must be exactly a causal mask, a causal sliding
    window, or nothing: they become the op's `causal` and `window`.
    Leaves computed from the function's inputs (a padding mask from an
    `attention_mask` input, a relative-position bias) become the op's
    `mask` (boolean leaves, and-ed) and `bias` (additive ones, summed)
    operands at their own broadcast shape (a key mask stays `[B, 1, 1,
    S]`); an equality of `[B, T]` integer ids broadcast along the queries
    and along the keys (the document mask of packed sequences) becomes
    its `segments`, so no `[B, 1, T, T]` mask is made. A row whose keys are all masked gives 0 where the exporter's
    additive-mask graph averages every value (only padded queries of a
    left-padded batch, whose loss users ignore). A chain it cannot prove
    equal stays as it is
    (correct, with its T x S scores in memory); the module attribute
    `loom.attention_report` lists each candidate softmax with the outcome
    or the reason, and `loomc --report` prints it. Runs on the imported
    forward functions, before `loom-attach-loss` and `loom-autodiff`.
  }];
  let options = [
    Option<"attention", "mode", "std::string", "\"fused\"",
           "fused: rewrite what can be proven equal; unfused: change "
           "nothing (the chains stay, reported as such)">,
  ];
  let statistics = [
    Statistic<"numFused", "num-fused", "Attention chains fused">,
    Statistic<"numKept", "num-kept", "Candidate chains kept as they were">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseLinearCrossEntropyPass
    : Pass<"loom-fuse-linear-cross-entropy", "mlir::ModuleOp"> {
  let summary = "Fuses a language-model head (matmul, then cross-entropy) "
                "into loom.linear_cross_entropy.";
  let description = [{
    Finds `cross_entropy(reshape(matmul(x, w)), labels)` where nothing else
    reads the logits (what `loom-attach-loss` builds for language models)
    and replaces it by one `loom.linear_cross_entropy`, whose gradient is
    one `loom.linear_cross_entropy_grad`: the runtime computes both in
    tiles of rows x classes, so the `[N, V]` logits and their gradient are never
    stored. The module attribute `loom.lm_head_report` lists each
    cross-entropy with its outcome (and the logits bytes saved) or the
    reason it was kept; `loomc --report` prints it. Runs after
    `loom-attach-loss` and before `loom-autodiff`.
  }];
  let options = [
    Option<"lmHead", "mode", "std::string", "\"fused\"",
           "fused: fuse the heads that match; unfused: change nothing "
           "(reported as kept)">,
  ];
  let statistics = [
    Statistic<"numFused", "num-fused", "Language-model heads fused">,
    Statistic<"numKept", "num-kept", "Cross-entropies kept as they were">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def TensorParallelPass : Pass<"loom-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Splits the model's linear layers over the ranks of mesh "
                "axis tp (Megatron-style tensor parallelism).";
  let description = [{
    With `tp` = n > 1, rewrites `@forward` (after `loom-attach-loss`, before
    `loom-autodiff`) and every other entry point that takes the parameters
    into the program each of n ranks runs, as Megatron-LM splits a
    transformer. A linear layer (`loom.matmul` by a parameter weight) whose
    input is whole on every rank becomes column-parallel: each rank keeps a
    block of the weight's output columns and computes that block of the
    output; the ops after it keep the split (elementwise ops, a bias add
    splits the bias, transposes, reshapes that cut the split dimension into
    heads, attention's batched products and softmax); the next linear layer
    that reads the split activation becomes row-parallel: each rank keeps
    the matching block of the weight's input rows, and a `loom.all_reduce`
    (sum over `tp`) adds the ranks' partial products. A projection whose
    split output reaches a cross-entropy over `[N, C]` logits (a language
    model's head) is split by classes too, and the loss becomes the
    vocabulary-parallel one: each rank's log-sum-exp and label logit over
    its block of the classes, summed over `tp` (the row maximum that
    steadies the exponentials is the ranks' maximum, behind
    `loom.stop_gradient`). A result of an entry point that is split (the
    head's logits in `@predict`) is all-gathered before the return. A
    token embedding (a `loom.gather` along dimension 0 of a parameter
    table, by ids that are not constants) is split by rows, the
    vocabulary-parallel embedding: each rank looks up the ids in its block
    of rows, the others give zero rows, and a `loom.all_reduce` sums the
    ranks' rows. Everything else, position embeddings, layer norms and the
    residual stream, stays whole on every rank.

    Which layers are split is chosen greedily in program order: a layer is
    kept column-parallel when the whole function still propagates (every
    split value reaches a row-parallel layer through ops with a rule). A
    layer that does not split alone is tried with the undecided layers
    reading the same input (separate query, key and value projections;
    SwiGLU's gate and up). A weight read through a 2-D transpose (the
    exporter's `[out, in]` Linear weights) splits along its own dimension.
    The module gets `loom.tp_report`: each layer tried, split (how) or
    whole (where and why the split stopped), for `loomc --report`. A
    projection whose output is sliced into G equal blocks of its last
    dimension (GPT-2's fused query/key/value `c_attn`, G = 3) is split
    within each block, so that every rank gets whole heads of each.

    A split parameter is marked `loom.shard = {axis = "tp", shape = <whole
    shape>, dim = d}` (plus `groups = G`); its argument takes rank r's
    block. The module gets mesh axis `tp` of n ranks (after `dp`, if
    any). `loom-optimizer` then turns the gradients of the sum of the
    ranks' losses into those of the one-process loss (a split parameter's
    divided by n, a whole one's averaged over `tp`).

    `layers` (a regular expression over the model's node names, e.g.
    `mlp` for the MLPs alone) limits which linear layers are tried as
    column-parallel; the row-parallel ones follow from them.

    Errors name the op (and ONNX node) where a split cannot go on, when
    the model has no layer to split (or `layers` matches none that can
    be), or when another entry point cannot take the split `@forward`
    takes.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1",
           "Tensor-parallel ranks (mesh axis tp)">,
    Option<"layers", "layers", "std::string", "\"\"",
           "Only the linear layers whose model node name matches this "
           "regular expression are tried as column-parallel (default: "
           "every one)">,
  ];
  let statistics = [
    Statistic<"numColumnParallel", "num-column-parallel",
              "Linear layers split by output columns">,
    Statistic<"numRowParallel", "num-row-parallel",
              "Linear layers split by input rows (an all-reduce each)">,
    Statistic<"numSplitParams", "num-split-params",
              "Parameters split over the ranks">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def MixedPrecisionPass : Pass<"loom-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Runs GEMMs, convolutions and what follows them in bf16 or fp16.";
  let description = [{
    Runs before `loom-autodiff`, on every function, op by op in order, by
    each op's mixed-precision class (PrecisionClassOpInterface):

    - `low_precision` (`loom.matmul`, and `loom.conv2d` with one group)
      computes in 16 bits (bf16 or f16) on 16-bit copies of its f32
      operands; the runtime's 16-bit GEMMs sum in f32 and round each result
      once. Its result stays 16-bit.
    - `follow` (pointwise ops and data movement) computes in 16 bits when
      one of its float operands is 16-bit and every other one is 16-bit or
      castable (a function argument, a constant, or a broadcast or reshape
      of one: a bias, a scale, a mask value), which is cast. Otherwise it
      stays f32 and reads f32 copies of its 16-bit operands. A few `follow`
      ops always stay f32: broadcasts, gathers, pools, im2col/col2im (their
      gradients sum), and exp, log, pow and rsqrt (PyTorch autocast keeps
      those in f32 too).
    - `keep_f32` (norms, reductions, losses) reads f32 copies, except
      softmax, whose 16-bit input gives a 16-bit output (probabilities
      store well in 16 bits); `loom-widen-keep-f32` still computes it, and
      the row sums of its gradient, in f32.
    - The function's results are f32.

    So the activations a training step stores are mostly 16-bit. The
    parameters (master weights) and the optimizer state stay f32; a
    16-bit copy of a value is made once, next to the value (a weight's at
    the top of the function), however many ops read it. `loom-autodiff`
    then differentiates the casts (a cast's cotangent is cast back), so the
    backward computes in the same precision as the forward and each
    weight's gradient arrives in f32.

    `precision`: `fp32` (nothing), `bf16` or `fp16`. fp16's range is small
    (largest value 65504, smallest normal 2^-14): gradients below it
    vanish. `loom-autodiff` therefore scales the loss of a graph with f16
    values (its `loss-scale=auto`) and `loom-optimizer` adjusts the scale
    (dynamic loss scaling).

    Grouped and depthwise convolutions stay f32 (their direct loops would
    sum in 16 bits). A 16-bit convolution with one group becomes im2col and
    one 16-bit GEMM over the whole batch (`loom-conv-to-gemm`), on both
    targets.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"",
           "fp32, bf16 or fp16">,
  ];
  let statistics = [
    Statistic<"numLowered", "num-low-precision",
              "Ops computed in 16 bits">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def AutodiffPass : Pass<"loom-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the backward pass of a forward function.";
  let description = [{
    For `@forward(inputs..., params...) -> (loss, ...)`, adds
    `@forward_backward` with the same arguments returning the loss followed
    by d(loss)/d(param) for every argument marked `loom.param`, in argument
    order (results marked `loom.grad = "<param>"`), then the forward's
    results marked `loom.buffer` as they are. Each op's rule comes from
    its DifferentiableOpInterface; cotangents of a value used several times
    are summed; integer, boolean and index values get none;
    `loom.stop_gradient` stops them. Only the ops the loss depends on, and
    only cotangents some parameter needs, are built.

    Loss scaling (`loss-scale=dynamic`, or `auto` when the forward computes
    some value in f16): `@forward_backward` takes one more argument, last, a
    0-D f32 named `loss_scale` and marked `loom.opt_state`, and seeds the
    loss's cotangent with it instead of 1, so that every gradient (and every
    16-bit cotangent on the way) is multiplied by the scale. The loss itself
    is returned unscaled. `loom-optimizer` divides the scale out, skips the
    steps whose gradients are not finite and adjusts the scale.
  }];
  let options = [
    Option<"entry", "entry", "std::string", "\"forward\"",
           "Name of the forward function.">,
    Option<"withInputs", "with-inputs", "bool", "false",
           "Also return the gradients of float inputs (after the params).">,
    Option<"lossScale", "loss-scale", "std::string", "\"auto\"",
           "Loss scaling: auto (dynamic when the forward has f16 values), "
           "dynamic or none">,
  ];
  let statistics = [Statistic<"numRules", "num-rules", "VJP rules applied">];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def OptimizerPass : Pass<"loom-optimizer", "mlir::ModuleOp"> {
  let summary = "Adds the optimizer update and the training-step entry points.";
  let description = [{
    From `@forward_backward`, builds `@apply_optimizer(params..., state...,
    step, grads...) -> (params..., state..., step + 1)` and `@train_step`
    (forward, backward and update in one). The learning rate is computed in
    the graph from `step` (constant, linear warmup, cosine decay). Optimizer
    state is named `<param>.<slot>` (e.g. `fc1.weight.adam_m`) and marked
    `loom.opt_state`; its initial values (zeros) are added to the parameter
    file.

    Dynamic loss scaling, when `@forward_backward` takes a `loss_scale`
    (`loom-autodiff`), as PyTorch's GradScaler does it: three more state
    tensors, `loss_scale` (f32, starting at `loss-scale-init`),
    `loss_scale.good_steps` and `loss_scale.skipped` (i64, from 0). Each
    step divides the gradients by the scale; if any gradient has an inf or
    NaN, the parameters and the optimizer state keep their old values (the
    step is skipped), the scale is multiplied by `loss-scale-backoff` and
    `good_steps` restarts at 0; otherwise the update is applied, and after
    `loss-scale-growth-interval` good steps in a row the scale is multiplied
    by `loss-scale-growth`. Adam's and Adafactor's step count `t` counts the
    updates applied (skipped steps excluded); the learning-rate schedule
    counts every step. Two more outputs report it: `loss_scale_used` (the
    scale of this step) and `skipped_steps` (the total so far).

    Data parallelism (`dp` = n > 1): the module gets a mesh with axis `dp`
    of n ranks (`loom.mesh_axes`, `loom.mesh_shape`); every rank runs
    `@train_step` on its own batch (the model's batch is one rank's), and
    the step averages the loss, the gradients and the new buffers over the
    ranks with `loom.all_reduce` before the update, so that every rank makes
    the update one process makes on the n batches together. `zero` shards
    the update over the ranks (ZeRO): each optimizer state tensor becomes
    one rank's shard, a block of the tensor flattened and zero-padded to n
    equal blocks (marked `loom.shard`), and each rank updates its shard of
    every parameter and all-gathers the new parameters (1: the gradients
    all-reduced, then sliced; 2: reduce-scattered); with 3 the parameters
    themselves are kept as shards between steps and all-gathered before the
    forward. `@apply_gradients(params..., state..., step, grads...)` is
    that update on one rank's (locally accumulated) gradients: the
    reduction over the ranks, the update, the gathers; `@train_step` calls
    it after the backward, and `loom-run --accumulate` calls it once per
    step. Global-norm clipping and the loss-scaling overflow check sum
    their partial sums over the ranks. Adafactor's factored state is not
    sharded (an error). With ZeRO 1 and 2, `@apply_optimizer` (which
    updates parameter shards the step slices from whole parameters) is
    private, called by `@train_step` alone; with ZeRO 3 it takes the same
    shards as `@train_step`, and every other entry point that takes
    parameters (`@forward`, `@predict`, `@forward_backward`) takes shards
    too and all-gathers them first, so that a tensor has one form in every
    entry of the plan.

    Each collective that reduces a parameter's gradient over `dp` is marked
    `loom.grad_of = "<param>"` (the plan's `grad` field). With
    `grad-compression` other than `none`, the module gets
    `loom.grad_compression` (the plan's `grad_compression`): the runtime
    compresses those reductions, with error feedback
    (docs/distributed.md).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "sgd, momentum, nesterov, adam, adamw or adafactor">,
    Option<"lr", "lr", "double", "1e-3", "Peak learning rate">,
    Option<"momentum", "momentum", "double", "0.9", "Momentum (sgd family)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Weight decay (decoupled for adamw, L2 otherwise)">,
    Option<"clipNorm", "clip-norm", "double", "0.0",
           "Global gradient-norm clipping threshold (0: off)">,
    Option<"schedule", "schedule", "std::string", "\"constant\"",
           "constant, warmup, cosine or warmup-cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0", "Warmup steps">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "Steps of the cosine decay (required for cosine)">,
    Option<"minLrRatio", "min-lr-ratio", "double", "0.0",
           "Final learning rate of the cosine decay, relative to lr">,
    Option<"lossScaleInit", "loss-scale-init", "double", "65536.0",
           "Initial loss scale (dynamic loss scaling)">,
    Option<"lossScaleGrowth", "loss-scale-growth", "double", "2.0",
           "Factor the loss scale grows by after growth-interval good steps">,
    Option<"lossScaleBackoff", "loss-scale-backoff", "double", "0.5",
           "Factor the loss scale shrinks by when a step is skipped">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval",
           "int64_t", "2000",
           "Good steps in a row before the loss scale grows">,
    Option<"dp", "dp", "int64_t", "1",
           "Data-parallel ranks (mesh axis dp)">,
    Option<"zero", "zero", "int64_t", "0",
           "ZeRO stage: 0 (replicated), 1 (optimizer state sharded), 2 "
           "(and gradients), 3 (and parameters)">,
    Option<"gradCompression", "grad-compression", "std::string", "\"none\"",
           "With dp > 1: none, powersgd:rank=R, topk:FRACTION or int8 "
           "(recorded in the module's loom.grad_compression for the plan; "
           "the runtime compresses the gradient reductions)">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

def PipelineStagesPass : Pass<"loom-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Cuts the training step into pipeline stages and writes "
                "their schedule.";
  let description = [{
    Pipeline parallelism (docs/pipeline.md), after `loom-optimizer`: cuts
    `@forward` into S = pp x virtual-stages stages, stage s for pipeline
    rank s mod pp, and replaces the module's entry points by each stage's
    `@stage<s>_forward`, `@stage<s>_backward` (or `_backward_input` and
    `_backward_weight`, for schedules that split the backward) and
    `@stage<s>_apply_gradients`. The module's mesh gets axis `pp` (after
    `dp`, before `tp`) and a `loom.pipeline` attribute: the boundaries
    between stages, and every rank's list of actions for one step.

    Cutting: ops that read only data inputs and constants (position ids,
    masks) are copied into every stage that needs them. The others are
    cut in program order into stages of about equal cost (FLOPs plus bytes
    of `CostOpInterface`), each cut placed where the fewest bytes cross it
    within a quarter of a stage's cost of the balanced place; or, with
    `split`, before the first op whose model node name matches each of its
    S - 1 comma-separated regular expressions. What a stage computes and a
    later one reads crosses each boundary on the way (relayed). A
    parameter belongs to the stage that reads it; one read by several (a
    head tied to the embedding) is taken by each and updated by the
    first, and the pipeline attribute lists it under `shared` (the runtime
    sums its gradients in the first and sends its new value back).

    A stage's backward recomputes its forward from the stage's inputs: the
    function is the forward plus, for stages before the last, the pseudo
    loss sum_i <output_i, gradient_i> of its float outputs and their
    gradients (inputs `pp.b<s>.<i>.grad`), differentiated with respect to
    the parameters and the float inputs; so its results are exactly the
    vector-Jacobian products. The update is `@apply_gradients` (or
    `@apply_optimizer`) restricted to the stage's parameters.

    The schedule (`schedule`: gpipe, 1f1b, interleaved, zb-h1; or
    `schedule-file`, the text form) for `microbatches` micro-batches is
    checked by simulating every rank's list together; a schedule that
    would deadlock, leave a send unreceived, receive another shape than
    sent, or run an action before its inputs is refused with the rank,
    step and action.

    Not supported yet (errors): buffers
    (BatchNorm's running statistics), dynamic loss scaling (fp16),
    global-norm clipping, ZeRO 3.
  }];
  let options = [
    Option<"pp", "pp", "int64_t", "1", "Pipeline ranks (mesh axis pp)">,
    Option<"microbatches", "microbatches", "int64_t", "0",
           "Micro-batches per step (0: 2 x pp)">,
    Option<"pipelineSchedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Stages per pipeline rank (interleaved)">,
    Option<"scheduleFile", "schedule-file", "std::string", "\"\"",
           "A schedule in the text form of docs/pipeline.md, instead of "
           "a named one">,
    Option<"stageSplit", "split", "std::string", "\"\"",
           "Comma-separated regular expressions over node names: stage k "
           "+ 1 starts at the first op matching the k-th">,
  ];
  let statistics = [
    Statistic<"numStages", "num-stages", "Pipeline stages">,
    Statistic<"numBoundaryTensors", "num-boundary-tensors",
              "Tensors crossing the boundaries between stages">,
  ];
  let dependentDialects = ["loom::LoomDialect", "mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Code generation preparation
//===----------------------------------------------------------------------===//

def ConvToGemmPass : Pass<"loom-conv-to-gemm", "mlir::ModuleOp"> {
  let summary = "Turns convolutions and their gradients into im2col and GEMMs.";
  let description = [{
    Rewrites every `loom.conv2d`, `loom.conv2d_input_grad` and
    `loom.conv2d_filter_grad` with one group and f32, f64, bf16 or f16 elements
    into a library GEMM (`loom.matmul`, which stays outside the kernels) around
    `loom.im2col` / `loom.col2im`, with `P = OH*OW` and `K = C*KH*KW`:

    - `conv2d`: `filter[O, K] x im2col(x)[K, N*P]`, then the `[O, N, P]`
      product transposed to `[N, O, P]`;
    - `conv2d_filter_grad`: `dy[O, N*P] x im2col(x)^T`;
    - `conv2d_input_grad`: `col2im(filter^T x dy[O, N*P])`.

    `dy` is brought to `[O, N*P]`, and a filter to `[O, K]`, once per
    value, however many GEMMs read it; with a batch of one every transpose
    is a reshape. Grouped and
    depthwise convolutions are left alone (their direct loops). Runs after inlining and CSE, before `loom-fuse`, so that the
    transposes fuse with their neighbours; it does not run CSE itself, so
    the forward's im2col is not kept alive for the backward (which makes
    its own). Reports the rewritten count as a statistic.

    With `library-convs` (the CPU target's pipeline sets it), f32
    convolutions of any group count (but the filter gradients of depthwise
    ones with kernels larger than 3x3, which oneDNN 2.6 runs as a GEMM per
    group, slower than Loom's loop) are not rewritten but marked
    `loom.library_call`: `loom-fuse` leaves them outside the kernels and the
    plan runs each as a `conv` step (oneDNN's convolution primitives in the
    runtime, docs/plan-format.md). f64, bf16 and f16 ones are still rewritten
    (oneDNN has no f64 convolution; its 16-bit ones are not wired yet).
  }];
  let options = [
    Option<"libraryConvs", "library-convs", "bool", "false",
           "Leave f32 convolutions to the plan's conv steps (CPU target)">,
  ];
  let statistics = [
    Statistic<"numRewritten", "num-rewritten", "Convolutions rewritten">,
    Statistic<"numLibrary", "num-library", "Convolutions left to the library">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def WidenKeepF32Pass : Pass<"loom-widen-keep-f32", "mlir::ModuleOp"> {
  let summary = "Computes keep_f32 ops with 16-bit operands in f32.";
  let description = [{
    An op of the `keep_f32` mixed-precision class (reductions, softmax and
    log-softmax, the norms, the losses) whose float operands or results
    are bf16 or f16 is computed in f32: its 16-bit operands are cast to f32,
    it runs on f32, and its 16-bit results are rounded once from the f32
    ones. Such ops come from `loom-mixed-precision` (a softmax of 16-bit
    scores stores its output in 16 bits) and from `loom-autodiff` (the
    gradient of a broadcast or a softmax sums 16-bit cotangents). Loom's
    kernels accumulate in the element type otherwise, and a sum of a
    thousand bf16 terms in bf16 stops growing long before the end. Runs
    right after `loom-fuse`, inside the kernels' bodies too, so that the
    casts are part of each op's kernel: the stored values stay 16-bit and
    no f32 copy of them is ever a buffer.
  }];
  let statistics = [
    Statistic<"numWidened", "num-widened", "Ops computed in f32">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def GemmEpiloguesPass : Pass<"loom-gemm-epilogues", "mlir::ModuleOp"> {
  let summary = "Moves the bias add after a GEMM into the GEMM's epilogue.";
  let description = [{
    `loom.add(loom.matmul(a, b), loom.broadcast_in_dim(bias) dims = [r-1])`
    (either operand order) becomes `loom.matmul a, b bias(bias)` when the
    product is read by that add only, the element type is f32 and `bias`
    is a rank-1 function argument (a layer's bias parameter) of the
    product's last dimension. The plan gives such a GEMM the `bias`
    epilogue, which cuBLASLt applies as it writes the product. Run by the
    CUDA code-generation pipeline after `loom-remat`, before `loom-fuse`.
  }];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Bias adds moved into GEMMs">,
  ];
}

def AttentionKernelsPass : Pass<"loom-attention-kernels", "mlir::ModuleOp"> {
  let summary = "Runs fused attention as generated kernels (the CUDA target).";
  let description = [{
    Marks every `loom.attention` and `loom.attention_grad` with
    `loom.generated_kernel`: `loom-fuse` then gives each a kernel of its own
    (instead of leaving it outside the kernels for the plan's `attention`
    step, the CPU runtime's tiled kernel) and `convert-loom-to-linalg` lowers
    it to `scf.forall` loops with one iteration per query row (the forward
    and the query gradient) or per key row (the key and value gradients),
    each keeping its row of the accumulators in registers and its running
    maximum and sum as loop-carried values (online softmax): no `T x S`
    tensor, memory linear in T. The code-generation pipeline runs it for
    the CUDA target, after inlining, before `loom-fuse`.

    It refuses a head dimension (of the queries or the values) over
    `max-head-dim`, naming the op: each thread holds that many values of
    each accumulator.
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"256",
           "The largest head dimension a generated attention kernel takes">,
  ];
  let statistics = [
    Statistic<"numMarked", "num-marked", "Attention ops made kernels">,
  ];
}

def LinearCrossEntropyChunksPass : Pass<"loom-linear-cross-entropy-chunks",
                                        "mlir::ModuleOp"> {
  let summary = "Computes fused LM heads in chunks of rows with ordinary ops "
                "(the CUDA target).";
  let description = [{
    Where no runtime step computes the fused language-model head (the CUDA
    target; 16-bit heads on the CPU target, whose runtime step takes f32),
    expands each `loom.linear_cross_entropy` and
    `loom.linear_cross_entropy_grad` into ordinary ops over chunks of rows,
    one chunk after the other: the chunk's logits as a library GEMM, its
    cross-entropy (forward), or its `dlogits` (a softmax of the logits
    recomputed from `x` and `w`, as the cross-entropy's gradient computes
    it), `dx` rows and its term of `dw` (backward). A chunk's `[rows, V]` logits are dead
    before the next chunk's GEMM, so `loom-plan-memory` reuses their
    buffers and the arena never holds the `[N, V]` logits. The results are
    the op's (its definition, evaluated a chunk at a time; with 16-bit `x`
    and `w` the row statistics are computed in f32 and `dw` is summed over
    the chunks in f32, rounded once). The code-generation pipeline runs it
    after `loom-input-checks` (which reads the fused op's labels), before
    `loom-fuse`, with `runtime-f32` on the CPU target.
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Rows per chunk; 0: as many as keep a chunk's logits within "
           "chunk-elements, in multiples of 128">,
    Option<"chunkElements", "chunk-elements", "int64_t",
           /*default=*/"int64_t(1) << 26",
           "With rows = 0: the most logits (rows times classes) of a chunk">,
    Option<"runtimeF32", "runtime-f32", "bool", /*default=*/"false",
           "Leave f32 heads to the runtime's linear_cross_entropy step (the "
           "CPU target)">,
  ];
  let statistics = [
    Statistic<"numExpanded", "num-expanded",
              "Fused LM heads and gradients expanded">,
  ];
}

def InputChecksPass : Pass<"loom-input-checks", "mlir::ModuleOp"> {
  let summary = "Records the ranges of the integer inputs that index tensors.";
  let description = [{
    For each function argument marked `loom.input` with an integer element
    type (token ids, class labels), follows it through `loom.reshape` to the
    ops that read it as indices, and records on the argument, as
    `loom.input_checks` (an array of `{min, max, ignore?, op}` dictionaries),
    the values each accepts:

    - `loom.gather` and `loom.scatter_add` indices: `[-n, n)` for an axis
      of size `n` (negative indices count from the end);
    - `loom.cross_entropy` (and `loom.linear_cross_entropy`, and their
      gradients) labels: `[0, C)` for `C` classes, or the `ignore_index`.

    The plan writes them into the input's binding (`checks`) and the runtime
    refuses an input with a value outside one of them before the step runs,
    naming the input, the element and the op (docs/plan-format.md): the
    compiled kernels clamp such an index to stay in their buffers, so
    without the check a token id past the vocabulary would train silently
    on the wrong row. Indices computed in the step (not an input) are not
    covered. The code-generation pipeline runs it first, after inlining.
  }];
  let statistics = [
    Statistic<"numChecks", "num-checks", "Input ranges recorded">,
  ];
}

def ScheduleCollectivesPass : Pass<"loom-schedule-collectives",
                                   "mlir::ModuleOp"> {
  let summary = "Issues every collective as soon as its operand exists.";
  let description = [{
    Moves each collective (`loom.all_reduce`, `loom.reduce_scatter`,
    `loom.all_gather`, `loom.rank_slice`) up its block to just after the
    op that defines its last operand, together with the reshapes and pads
    that feed it alone, so that the plan issues a gradient's reduction as
    soon as the backward has computed it and the runtime overlaps it with
    the rest of the backward: the last layer's gradient, which the backward
    computes first, is reduced first. The collectives' order changes, the
    same way on every rank (they all run the same plan), so every rank
    still issues them in the same order. Run by code generation after
    inlining, when the training step is one block.
  }];
  let statistics = [
    Statistic<"numMoved", "num-moved", "Collectives moved earlier">,
  ];
}

def FoldTransposesPass : Pass<"loom-fold-transposes", "mlir::ModuleOp"> {
  let summary = "Folds transposes of the innermost dimensions into matmuls.";
  let description = [{
    A `loom.transpose` that swaps the two innermost dimensions (and keeps
    the others) and feeds a `loom.matmul` becomes that matmul's
    `transpose_a` / `transpose_b` flag; a transpose that is the only reader
    of a matmul (operands of equal rank) is replaced by the transposed
    product, `(A B)^T = B^T A^T`: the operands swapped and both flags
    flipped. A library GEMM reads either layout, where the transpose is a
    kernel writing the whole matrix (a tied language-model head transposes
    its embedding table forward and its gradient backward at every step
    otherwise). Transposes left without readers are removed. Runs after
    inlining and CSE, before `loom-fuse`; repeats until nothing changes.
  }];
  let statistics = [
    Statistic<"numOperands", "num-operands",
              "Transposed matmul operands read in place">,
    Statistic<"numResults", "num-results",
              "Transposed matmul results computed directly">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ChannelsLastPass : Pass<"loom-channels-last", "mlir::ModuleOp"> {
  let summary = "Runs the library convolutions on NHWC activations.";
  let description = [{
    Every f32 `loom.conv2d`, `loom.conv2d_input_grad` and
    `loom.conv2d_filter_grad` with one group that `loom-conv-to-gemm`
    marked `loom.library_call` becomes its `channels_last` form between
    transposes (NCHW to NHWC before, NHWC to NCHW after). The transposes
    then move through the ops between convolutions until they meet and
    cancel:

    - through a pointwise op whose operands all have its shape, when its
      other operands are transposes of the same permutation, splat
      constants or broadcasts (which take the permutation in their `dims`),
      or at most one other value (which is transposed instead);
    - into a reduction (its `dims` permuted);
    - into `loom.batch_norm_stats` and `loom.batch_norm`, which see the
      NHWC tensor as `[N*H*W, C]` (a reshape: channel dimension 1);
    - a transpose of a transpose composes; one that only moves unit
      dimensions is a reshape.

    What is left (around a max pool, a depthwise convolution) stays a
    transpose, which `loom-fuse` fuses. Convolutions that read the entry's
    own argument (the model's image) stay NCHW: a stem before a max pool
    would otherwise be transposed at its largest size, both ways.

    Each function is converted on a copy and kept channels-last only where
    it pays: where the activation bytes its channels-last convolutions
    read and write (which oneDNN no longer reorders) are at least 4 times
    the bytes its remaining transposes write (a transpose kernel is that
    much slower per byte than a reorder). ResNet-18's training step: 13.5;
    MobileNetV3-small's, whose depthwise convolutions stay NCHW: 0.8, left
    NCHW. With `always`, every function with a candidate is converted. Values and their order of summation are
    unchanged: every sum runs over the same elements in the same order,
    so the interpreter gives the same bits before and after. On the CPU
    target oneDNN then convolves NHWC buffers as they are, where NCHW ones
    are reordered to its blocked layout and back around every call
    (ResNet-18, 2 threads: the convolutions' time per training step 486 ->
    417 ms, docs/performance.md). Runs after `loom-conv-to-gemm`, before
    `loom-remat` and `loom-fuse`; the CPU pipeline runs it with
    `conv-layout=nhwc`.
  }];
  let options = [
    Option<"always", "always", "bool", /*default=*/"false",
           "Convert every function that has candidate convolutions, not only "
           "those where it saves memory traffic">
  ];
  let statistics = [
    Statistic<"numConvs", "num-convs", "Convolutions made channels-last">,
    Statistic<"numTransposes", "num-transposes",
              "Transposes left (not cancelled)">,
    Statistic<"numDeclined", "num-declined",
              "Functions left NCHW: their transposes would cost more than "
              "the reorders saved">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def RematPass : Pass<"loom-remat", "mlir::ModuleOp"> {
  let summary = "Recomputes forward values in the backward to fit a memory budget.";
  let description = [{
    Runs on inlined entry points, before `loom-fuse`. A training step keeps
    every forward value its backward reads, and the peak of its arena is
    reached when the backward starts. This pass decides which of those
    values are stored and which are recomputed right before their first
    late reader, so that the arena `loom-fuse` and `loom-plan-memory` then
    give each entry point is at most `memory-budget` bytes.

    It is greedy and measured. It estimates each op's live bytes in program
    order (each value live from its definition to its last reader, a
    reshape sharing its operand's bytes) and finds the point of the peak.
    Of the values live across that point and not read there, it recomputes
    the one that saves the most bytes per recomputed FLOP (the op cost
    interface), in tiers: pointwise and data-movement ops first, then row
    reductions (softmax, layer norm), and GEMMs and convolutions only when
    nothing cheaper is live across the peak. A recomputation clones the
    value's op just before its first reader past the peak; an operand that
    would otherwise be kept alive across the peak is recomputed too when it
    is cheap (a chain of pointwise ops), else kept. Dropout recomputes from
    its seed and stream and gives the same bits. After each decision the
    function is fused and planned for real (on a copy, with
    `loom-fuse`'s options) and the search stops at the first decision whose
    planned arena is within the budget. The sequence of decisions does not
    depend on the budget, so a smaller budget never gives a larger arena.
    A budget below every arena the sequence reaches is an error that names
    the smallest one it reached.

    `mode`: `none` (nothing), `auto` (the least recomputation that meets
    the budget; nothing without one), `full` (recompute until nothing more
    lowers the arena, and keep the smallest arena reached).

    Hand-marked regions: an op with a `loom.checkpoint` attribute (set from
    the JSON format's node attribute `"checkpoint": true`), or whose
    location name matches the regular expression `checkpoint`, is not
    stored for the backward in functions that compute gradients: the
    backward recomputes it from the values around it, as
    `torch.utils.checkpoint` does for a region. This happens first, in
    every mode but `none`.

    Writes `loom.remat` on each function it ran on (peak bytes before and
    after, the budget, the step's FLOPs and the recomputed FLOPs, the
    recomputed ops by name), which `loomc --report` prints.

    With `exhaustive` N > 0, in functions that compute gradients and store
    at most N forward values (of 4 KiB or more) for the backward, the pass
    also tries every subset of them, each value recomputed before its first
    backward reader, fused and planned, and records the least recomputation
    within the budget (or the smallest arena without one) as
    `exhaustive_arena` and `exhaustive_recompute_flops`: the best of that
    space, to measure the greedy search against (2^N trials). It is not a
    global optimum: the greedy search also splits a value's readers at the
    peak and moves values, which that space cannot, and on the examples it
    matches or beats it (docs/performance.md).
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "std::string", "\"\"",
           "Largest arena of an entry point, in bytes, with an optional K, "
           "M or G suffix (powers of 1024); empty: no budget">,
    Option<"mode", "mode", "std::string", "\"auto\"",
           "none, auto (least recomputation within the budget) or full "
           "(smallest arena reachable)">,
    Option<"checkpoint", "checkpoint", "std::string", "\"\"",
           "Regular expression: ops whose location name matches are "
           "recomputed in the backward, not stored">,
    Option<"exhaustive", "exhaustive", "int64_t", "0",
           "Also find the least recomputation within the budget over every "
           "subset of the stored forward values, in functions with at most "
           "this many (recorded as exhaustive_* in loom.remat; 0: off)">,
    Option<"fuseRecomputeMinElements", "fuse-recompute-min-elements",
           "int64_t", "0",
           "loom-fuse's recompute-min-elements, for the trial plans">,
    Option<"fuseRecomputeOps", "fuse-recompute-ops", "std::string",
           "\"cheap\"",
           "loom-fuse's recompute-ops, for the trial plans">,
  ];
  let statistics = [
    Statistic<"numClones", "num-recomputed",
              "Ops computed again for the backward (moved ops not counted)">,
    Statistic<"numTrials", "num-trials", "Trial fusions and memory plans">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def FusePass : Pass<"loom-fuse", "mlir::ModuleOp"> {
  let summary = "Groups ops into loom.fusion regions, one kernel each.";
  let description = [{
    Walks every function in order and groups the ops that become kernels:
    a chain of pointwise and injective ops joined through their values, with
    at most one reduction-kind op (reduce_*, softmax, layer_norm,
    cross_entropy, ...) and its pointwise prologue and epilogue; the one
    exception is the softmax of a cross-entropy's gradient, over the class
    axis of the same logits, which joins the loss: the kernel computes their
    row maxima and sums once (two passes over the logits, not four).
    Contraction
    and opaque ops (conv2d and its gradients, pooling, gather, scatter_add)
    are kernels alone. `loom.matmul` stays outside (a library GEMM), and so
    does `loom.reshape` (a view of its operand's buffer). Constants are
    cloned into every region that reads them. Function calls must be inlined
    first. Reports the kernel count as a remark and a statistic.

    With `recompute-min-elements` N > 0 (default 0: off), values are
    recomputed rather than stored: a value of at least N elements made by
    a pointwise op
    (or a broadcast) of one region and read by later regions only (the
    forward activations a backward kernel reads) is made again in each
    reading region from what that region reads anyway, plus at most one
    other tensor of that size, when no host step or return reads it: its
    region no longer writes it and nothing keeps it alive (PyTorch's
    min-cut partitioner recomputes pointwise ops likewise). Dropout is
    never recomputed. `recompute-ops` says which ops: `cheap` (default:
    add, sub, mul, neg, abs, max, min, relu, select, compare and
    broadcasts, an instruction or two per element) or `pointwise` (every
    pointwise op). It trades memory for arithmetic: on the CPU every
    pointwise op recomputed cut the peak arena of MobileNetV3's training
    step by half but made ResNet-18's slower, while the cheap ones alone
    cut arenas and kernel time on every benchmark model
    (docs/performance.md). Off in the bare pass; `loomc` and the codegen
    pipelines run it with N = 1 and the cheap ops.
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "256",
           "Largest number of ops in one region">,
    Option<"recomputeMinElements", "recompute-min-elements", "int64_t",
           "0",
           "Recompute pointwise values of at least this many elements in "
           "the later regions that read them instead of storing them (0: "
           "never)">,
    Option<"recomputeOps", "recompute-ops", "std::string", "\"cheap\"",
           "Which pointwise ops recompute-min-elements recomputes: cheap "
           "(add, sub, mul, neg, abs, max, min, relu, select, compare and "
           "broadcasts) or pointwise (every pointwise op but dropout)">,
  ];
  let statistics = [
    Statistic<"numKernels", "num-kernels", "Fusion regions formed">,
    Statistic<"numFusedOps", "num-fused-ops", "Ops placed in regions">,
    Statistic<"numRecomputed", "num-recomputed",
              "Values recomputed by their readers instead of stored">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def PlanMemoryPass : Pass<"loom-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns every tensor of an entry point an offset in one arena.";
  let description = [{
    For each function made of `loom.fusion`, `loom.matmul`, `loom.reshape`
    and `func.return` (the output of `loom-fuse`), computes each value's
    live range in program order and packs the values into one arena:
    largest first, each at the lowest 64-byte-aligned offset where it
    overlaps no value live at the same time. A reshape shares its operand's
    bytes. Arguments are live from the start, returned values to the end.
    A param, optimizer-state or buffer argument shares its bytes with its
    new value (the result of the same name) when the argument's last reader
    is the kernel that makes the new value and, inside it, the argument is
    read only on the way to the new value: by pointwise ops over its shape
    whose results each have one reader (what is computed from the new value
    itself, like AdamW's parameter update from the new moments, reads the
    new value). The update is then made in place, and the runtime keeps
    that state in the entry's arena between steps instead of copying it in
    and out.
    Writes `loom.offsets` (one offset per result) on every op,
    `loom.offset` on every argument and `loom.arena_bytes` on the function,
    and reports the peak as a remark.
  }];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "Sum of the arenas' sizes">,
    Statistic<"numInPlace", "num-in-place",
              "State arguments updated in place">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
