//===- Passes.td - Loom's conversion passes -----------------*- tablegen -*-===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertLoomToLinalgPass : Pass<"convert-loom-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Lowers loom ops (all but matmul) to linalg on tensors.";
  let description = [{
    Elementwise ops become `linalg.generic` with identity maps; reductions,
    softmax, norms and losses become reductions plus elementwise generics;
    broadcasts, transposes and slices become generics with the matching
    indexing maps; pad and concat become `tensor.insert_slice`; gather,
    pooling and the convolution gradients read their inputs with
    `tensor.extract` at computed indices; scatter_add is an `scf.forall`
    over the lines of its result (each an `scf.for` nest over the indices).
    Used on the bodies of `loom.fusion` regions after they are outlined
    into kernel functions. Index operands (gather, scatter_add, labels) are
    clamped into range: a compiled kernel never reads or writes outside its
    buffers, where the interpreter reports the bad index.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::scf::SCFDialect"];
}

def LoomCpuParallelLoopsPass : Pass<"loom-cpu-parallel-loops", "mlir::ModuleOp"> {
  let summary = "Keeps threads for the parallel loops that pay for them.";
  let description = [{
    Runs on CPU kernels after `convert-linalg-to-parallel-loops` (and
    `scf-forall-to-parallel`), before `convert-scf-to-openmp`, which turns
    every remaining `scf.parallel` into an OpenMP parallel loop over the
    cores. Forking and joining a team costs microseconds, so a parallel loop
    whose work is small (its iterations times the static trip counts of the
    loops inside, the deepest nest) becomes sequential `scf.for` loops, as
    does a parallel loop nested inside another (one level of threads). Of a
    multi-dimensional parallel loop only the outer dimensions that give at
    least 64 iterations stay parallel; the inner ones become `scf.for`
    loops: OpenMP collapses the parallel dimensions into one index space
    and recomputes each index by division at every iteration, which keeps
    the innermost loop from vectorizing.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t",
           /*default=*/"::loom::kDefaultMinParallelWork",
           "Parallel loops with less work than this (iterations times the "
           "trip counts of the loops inside) run on one thread">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

def LoomCpuCollapseDimsPass : Pass<"loom-cpu-collapse-dims", "mlir::func::FuncOp"> {
  let summary = "Iterates contiguous runs of an elementwise op's dimensions as one.";
  let description = [{
    Runs on CPU kernels after bufferization, before
    `loom-cpu-reduction-loops` and `convert-linalg-to-parallel-loops`. A
    `linalg.generic` whose loops are all parallel, whose body reads no
    index, whose operands are static buffers in the row-major layout and
    whose indexing maps are projected permutations has each maximal run of
    consecutive loop dimensions that every operand holds as a consecutive
    run, in order, or does not index at all, iterated as one dimension
    (upstream `collapseOpIterationDims`; the buffers are reshaped by
    `memref.collapse_shape`, views without copies). The elements are the
    same and each is computed by the same operations: only the loop nest
    changes.

    Example: the AdamW update of a 512 x 512 x 3 x 3 convolution weight
    (the parameter, its gradient and moments) was a nest whose innermost
    loop had 3 iterations, which LLVM unrolled and left scalar; it becomes
    one loop of 2359296 elements, which vectorizes. A batch norm's
    normalization of an 8 x 512 x 7 x 7 tensor by per-channel scales
    iterates (n, c, h * w): the channel vectors index c alone, so n and c
    stay apart.

    Reductions are left as they are (`loom-cpu-reduction-loops` fixes
    their summation order).
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect",
                           "mlir::linalg::LinalgDialect"];
}

def LoomCpuReductionLoopsPass : Pass<"loom-cpu-reduction-loops", "mlir::func::FuncOp"> {
  let summary = "Lowers row reductions to loops that keep their accumulators in registers.";
  let description = [{
    Runs on CPU kernels after bufferization, before
    `convert-linalg-to-parallel-loops`. A `linalg.generic` on buffers whose
    innermost dimension is a reduction one (a sum, max or log-sum-exp along
    the rows: softmax, cross-entropy, layer norm; a batch norm's statistics
    over (n, h, w) of an NCHW tensor; a depthwise convolution's filter
    gradient), with outputs indexed by parallel dimensions only, becomes
    an `scf.parallel` over the parallel dimensions around an `scf.for`
    nest over the reduction dimensions whose accumulators are loop-carried
    values (`iter_args`), loaded from the outputs once before the nest and
    stored once after it. The parallel loops move outside in their order,
    the reduction loops inside in theirs, so each output element is still
    reduced over the same indices in the same order.

    The upstream lowering loads and stores the output element at every
    iteration, and LLVM cannot keep it in a register without knowing that
    the kernel's buffers do not overlap; the loop then neither vectorizes
    nor leaves memory. The arithmetic ops that combine an accumulator with
    the next value get the `reassoc` fast-math flag, which lets LLVM's loop
    vectorizer sum in vector lanes (a fixed order, chosen at compile time:
    every run of a kernel gives the same bits; the interpreter sums in
    sequence, so the two agree to rounding).

    Lanes: where the innermost reduction is short (at most 64: the rows of
    a 7 x 7 to 56 x 56 feature map) and there are outer reduction loops,
    every accumulator that is an `addf`, `maximumf` or `minimumf` of the
    next value becomes a vector of one lane per position of the row, and
    the body runs on whole rows: inputs read along the row (consecutive
    elements, or every second to fourth one, as a strided convolution
    does) are one `vector.load` (and a `vector.shuffle`), the others a
    scalar load broadcast. The lanes are combined with the output element
    once, by `vector.reduction`, after all the outer reduction indices.
    Summing a 14-element row into one register costs a horizontal sum per
    row, and LLVM then vectorizes the loop around the row with gathers.

    Ops whose innermost dimension is parallel (a bias gradient's column
    sums) keep the upstream lowering, whose innermost loop is then
    parallel and vectorizes as it is. That lowering runs on one thread
    (its outer loop is a reduction), so a large one whose reduction
    dimensions all come before its parallel ones (a batch norm's
    statistics over an NHWC tensor seen as `[N*H*W, C]`) has its rows
    split into 8 blocks, reduced in parallel into partial results (from
    the combiner's identity), which are then combined into the output in
    block order. The blocks are fixed, not the threads: the bits do not
    depend on the thread count (they differ from a sequential sum by
    rounding). Only where every output is an `addf`, `maximumf` or
    `minimumf` of its accumulator, the body reads no index, the rows are
    a multiple of 8 and the op reads at least 65536 elements.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::vector::VectorDialect"];
}

#endif // LOOM_CONVERSION_PASSES_TD
