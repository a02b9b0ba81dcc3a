//===- Plan.cpp - plan.json, the host side of an artifact -----------------===//
//
// The host side is not generated code. Each entry function, after loom-fuse
// and loom-plan-memory, is a sequence of steps: a fusion is a `kernel` step
// (its launches on the GPU), a matmul a `gemm` step (BLAS or cuBLASLt in the
// runtime), a library convolution a `conv` step (oneDNN), a fused attention
// an `attention` step, a fused language-model head a `linear_cross_entropy`
// step, a reshape a view (a second buffer at the same offset,
// no step).
// docs/plan-format.md is the schema, owned by the runtime.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Plan.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/InputChecks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;


namespace {

/// The JSON of an attribute made of dictionaries, arrays, strings, integers,
/// booleans and i64 arrays (null for anything else).
llvm::json::Value attrToJson(Attribute attr) {
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object o;
    for (NamedAttribute n : d)
      o[n.getName().getValue()] = attrToJson(n.getValue());
    return o;
  }
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute e : a)
      out.push_back(attrToJson(e));
    return out;
  }
  if (auto a = dyn_cast<DenseI64ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (int64_t e : a.asArrayRef())
      out.push_back(e);
    return out;
  }
  if (auto str = dyn_cast<StringAttr>(attr))
    return str.getValue();
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  return nullptr;
}

struct EntryWriter {
  func::FuncOp func;
  const PlanTarget *target;
  llvm::json::Array buffers;
  int64_t scratchBase = 0, scratchBytes = 0;
  llvm::DenseMap<Value, int64_t> ids;
  std::string error;

  int64_t add(Value v, int64_t offset) {
    auto t = cast<RankedTensorType>(v.getType());
    llvm::json::Array shape;
    for (int64_t d : t.getShape())
      shape.push_back(d);
    buffers.push_back(llvm::json::Object{{"offset", offset},
                                         {"dtype", dtypeName(t.getElementType())},
                                         {"shape", std::move(shape)}});
    ids[v] = buffers.size() - 1;
    return ids[v];
  }

  /// A kernel's temporary, in the scratch space after the arena.
  int64_t addScratch(const KernelScratch &scratch) {
    auto t = cast<MemRefType>(scratch.type);
    llvm::json::Array shape;
    for (int64_t d : t.getShape())
      shape.push_back(d);
    buffers.push_back(
        llvm::json::Object{{"offset", scratchBase + scratch.offset},
                           {"dtype", dtypeName(t.getElementType())},
                           {"shape", std::move(shape)}});
    return buffers.size() - 1;
  }

  /// An integer input's `checks` (kInputChecksAttr, loom-input-checks):
  /// the values the ops reading it accept.
  static llvm::json::Array inputChecks(ArrayAttr checks) {
    llvm::json::Array out;
    for (auto check : checks.getAsRange<DictionaryAttr>()) {
      llvm::json::Object c;
      for (StringRef key : {"min", "max", "ignore"})
        if (auto v = check.getAs<IntegerAttr>(key))
          c[key] = v.getInt();
      if (auto op = check.getAs<StringAttr>("op"))
        c["op"] = op.str();
      out.push_back(std::move(c));
    }
    return out;
  }

  /// A binding's `shard` (kShardAttr: one rank's block of a tensor).
  static void addShard(llvm::json::Object &binding, DictionaryAttr shard) {
    if (!shard)
      return;
    llvm::json::Array shape;
    if (auto s = shard.getAs<DenseI64ArrayAttr>("shape"))
      for (int64_t d : s.asArrayRef())
        shape.push_back(d);
    auto axis = shard.getAs<StringAttr>("axis");
    llvm::json::Object out{{"axis", axis ? axis.str() : std::string()},
                           {"shape", std::move(shape)}};
    // Tensor parallelism's split along one dimension (else a flat block).
    if (auto dim = shard.getAs<IntegerAttr>("dim"))
      out["dim"] = dim.getInt();
    if (auto groups = shard.getAs<IntegerAttr>("groups"))
      out["groups"] = groups.getInt();
    binding["shard"] = std::move(out);
  }

  /// A collective (loom.all_reduce, ...) as a `collective` step.
  llvm::json::Object collectiveStep(Operation *op) {
    auto axis = op->getAttrOfType<StringAttr>("axis");
    llvm::json::Object step{{"kind", "collective"},
                            {"node", nodeName(op->getLoc())},
                            {"op", op->getName().stripDialect().str()},
                            {"axis", axis.str()},
                            {"src", ids.lookup(op->getOperand(0))},
                            {"dst", ids.lookup(op->getResult(0))}};
    if (auto reduce = op->getAttrOfType<CollectiveReduceAttr>("reduce"))
      step["reduce"] = stringifyCollectiveReduce(reduce.getValue()).str();
    if (auto param = op->getAttrOfType<StringAttr>(kGradientOfAttr))
      step["grad"] = param.str();
    return step;
  }

  /// A library convolution as a `conv` step over its x, w and y.
  FailureOr<llvm::json::Object> convStep(Operation *op) {
    if (target->target != "cpu")
      return op->emitError("plan: conv steps run on the CPU target only");
    Value x, w, y;
    StringRef direction;
    if (auto c = dyn_cast<Conv2DOp>(op))
      x = c.getInput(), w = c.getFilter(), y = c.getResult(),
      direction = "forward";
    else if (auto c = dyn_cast<Conv2DInputGradOp>(op))
      x = c.getResult(), w = c.getFilter(), y = c.getDy(),
      direction = "backward_data";
    else if (auto c = dyn_cast<Conv2DFilterGradOp>(op))
      x = c.getX(), w = c.getResult(), y = c.getDy(),
      direction = "backward_weights";
    if (!getElementTypeOrSelf(y.getType()).isF32())
      return op->emitError("plan: conv steps take f32 tensors only");
    auto ints = [&](StringRef name) {
      llvm::json::Array list;
      for (int64_t v : op->getAttrOfType<DenseI64ArrayAttr>(name).asArrayRef())
        list.push_back(v);
      return list;
    };
    bool channelsLast = op->hasAttr("channels_last");
    return llvm::json::Object{
        {"kind", "conv"},
        {"node", nodeName(op->getLoc())},
        {"direction", direction},
        {"layout", channelsLast ? "nhwc" : "nchw"},
        {"x", ids.lookup(x)},
        {"w", ids.lookup(w)},
        {"y", ids.lookup(y)},
        {"strides", ints("strides")},
        {"padding", ints("padding")},
        {"dilations", ints("dilations")},
        {"groups", op->getAttrOfType<IntegerAttr>("groups").getInt()}};
  }

  /// A fused attention (loom.attention or loom.attention_grad) as an
  /// `attention` step: the runtime's tiled kernel (docs/plan-format.md).
  FailureOr<llvm::json::Object> attentionStep(Operation *op) {
    if (target->target != "cpu")
      return op->emitError("plan: attention steps run on the CPU target "
                           "only: on CUDA a fused attention is a generated "
                           "kernel (loom-attention-kernels, which the "
                           "CUDA pipeline runs before loom-fuse)");
    if (!getElementTypeOrSelf(op->getOperand(0).getType()).isF32())
      return op->emitError("plan: attention steps take f32 tensors only");
    llvm::json::Object step{{"kind", "attention"},
                            {"node", nodeName(op->getLoc())}};
    auto common = [&](auto a) {
      step["q"] = ids.lookup(a.getQ());
      step["k"] = ids.lookup(a.getK());
      step["v"] = ids.lookup(a.getV());
      if (Value m = a.getMask())
        step["mask"] = ids.lookup(m);
      if (Value b = a.getBias())
        step["bias"] = ids.lookup(b);
      if (Value sg = a.getSegments())
        step["segments"] = ids.lookup(sg);
      step["scale"] = a.getScale().convertToDouble();
      step["causal"] = a.getCausal();
      step["window"] = static_cast<int64_t>(a.getWindow());
      if (Value seed = a.getSeed()) {
        step["seed"] = ids.lookup(seed);
        step["dropout"] = a.getDropout().convertToDouble();
        step["stream"] = static_cast<int64_t>(a.getStream());
      }
    };
    if (auto a = dyn_cast<AttentionOp>(op)) {
      common(a);
      step["direction"] = "forward";
      step["out"] = ids.lookup(a.getOut());
      step["lse"] = ids.lookup(a.getLse());
    } else {
      auto g = cast<AttentionGradOp>(op);
      common(g);
      step["direction"] = "backward";
      step["out"] = ids.lookup(g.getOut());
      step["lse"] = ids.lookup(g.getLse());
      step["dout"] = ids.lookup(g.getDout());
      step["dq"] = ids.lookup(g.getDq());
      step["dk"] = ids.lookup(g.getDk());
      step["dv"] = ids.lookup(g.getDv());
      if (Value db = g.getDbias())
        step["dbias"] = ids.lookup(db);
    }
    return step;
  }

  /// A fused language-model head (loom.linear_cross_entropy or its
  /// gradient) as a `linear_cross_entropy` step: the runtime's chunked
  /// kernel (docs/plan-format.md).
  FailureOr<llvm::json::Object> linearCrossEntropyStep(Operation *op) {
    if (target->target != "cpu")
      return op->emitError("plan: linear_cross_entropy steps run on the CPU "
                           "target only (the CUDA one is not built yet): "
                           "build the training step with this --target "
                           "(loomc --train --target=...), which keeps the LM "
                           "head unfused, or with --lm-head=unfused");
    if (!getElementTypeOrSelf(op->getOperand(0).getType()).isF32())
      return op->emitError("plan: linear_cross_entropy steps take f32 "
                           "tensors only");
    llvm::json::Object step{{"kind", "linear_cross_entropy"},
                            {"node", nodeName(op->getLoc())}};
    auto common = [&](auto h) {
      step["x"] = ids.lookup(h.getX());
      step["w"] = ids.lookup(h.getW());
      step["labels"] = ids.lookup(h.getLabels());
      step["transpose_w"] = h.getTransposeW();
      step["reduction"] = stringifyReduction(h.getReduction());
      if (IntegerAttr ignore = h.getIgnoreIndexAttr())
        step["ignore_index"] = ignore.getInt();
      step["lse"] = ids.lookup(h.getLse());
    };
    if (auto h = dyn_cast<LinearCrossEntropyOp>(op)) {
      common(h);
      step["direction"] = "forward";
      step["loss"] = ids.lookup(h.getLoss());
    } else {
      auto g = cast<LinearCrossEntropyGradOp>(op);
      common(g);
      step["direction"] = "backward";
      step["dloss"] = ids.lookup(g.getDloss());
      step["dx"] = ids.lookup(g.getDx());
      step["dw"] = ids.lookup(g.getDw());
    }
    return step;
  }

  FailureOr<llvm::json::Object> write() {
    llvm::json::Array inputs, outputs, steps;
    auto arena = func->getAttrOfType<IntegerAttr>("loom.arena_bytes");
    scratchBase = llvm::alignTo(arena ? arena.getInt() : 0, 256);
    for (BlockArgument arg : func.getArguments()) {
      auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                        "loom.offset");
      if (!offset)
        return func.emitError("plan: argument ")
               << arg.getArgNumber() << " has no loom.offset (run "
               << "loom-plan-memory)";
      if (dtypeName(getElementTypeOrSelf(arg.getType())).empty())
        return func.emitError("plan: argument ")
               << arg.getArgNumber() << " has an unsupported element type";
      int64_t id = add(arg, offset.getInt());
      std::string kind, name;
      unsigned i = arg.getArgNumber();
      if (auto n = func.getArgAttrOfType<StringAttr>(i, kParamAttr))
        kind = "param", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kBufferAttr))
        kind = "buffer", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kOptStateAttr))
        kind = "state", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kInputAttr))
        kind = "input", name = n.str();
      else if (func.getArgAttr(i, kRngSeedAttr))
        kind = "input", name = "seed"; // the dropout seed; loom-run feeds it
      else
        return func.emitError("plan: argument ")
               << i << " is not named (loom.param, loom.buffer, "
               << "loom.opt_state, loom.input or loom.rng_seed)";
      llvm::json::Object binding{
          {"name", name}, {"kind", kind}, {"buffer", id}};
      addShard(binding, func.getArgAttrOfType<DictionaryAttr>(i, kShardAttr));
      if (auto checks = func.getArgAttrOfType<ArrayAttr>(i, kInputChecksAttr))
        binding["checks"] = inputChecks(checks);
      inputs.push_back(std::move(binding));
    }
    for (Operation &op : func.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          std::string kind, name;
          if (auto n = func.getResultAttrOfType<StringAttr>(i, kOutputAttr))
            kind = "output", name = n.str();
          else if (auto n = func.getResultAttrOfType<StringAttr>(i, kGradAttr))
            kind = "grad", name = n.str();
          else if (auto n =
                       func.getResultAttrOfType<StringAttr>(i, kBufferAttr))
            kind = "output", name = n.str(); // the buffer's new value
          else
            return func.emitError("plan: result ")
                   << i << " is not named (loom.output, loom.grad or "
                   << "loom.buffer)";
          llvm::json::Object binding{
              {"name", name}, {"kind", kind}, {"buffer", ids.lookup(v)}};
          addShard(binding,
                   func.getResultAttrOfType<DictionaryAttr>(i, kShardAttr));
          outputs.push_back(std::move(binding));
        }
        continue;
      }
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("loom.offsets");
      if (!offsets)
        return op.emitError("plan: op has no loom.offsets (run "
                            "loom-plan-memory)");
      for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
        if (dtypeName(getElementTypeOrSelf(r.getType())).empty())
          return op.emitError("plan: result has an unsupported element type");
        add(r, off);
      }
      if (auto fusion = dyn_cast<FusionOp>(op)) {
        if (!fusion->hasAttr(kKernelAttr))
          continue; // Only empty results: nothing to run.
        llvm::json::Array bufs;
        for (Value v : fusion.getInputs())
          if (!isEmptyTensor(v.getType()))
            bufs.push_back(ids.lookup(v));
        // What each output is: the node of the op that yields it.
        llvm::json::Array writes, nodes;
        auto yield = fusion.getBody().front().getTerminator();
        for (auto [v, y] : llvm::zip(fusion.getResults(), yield->getOperands()))
          if (!isEmptyTensor(v.getType())) {
            bufs.push_back(ids.lookup(v));
            writes.push_back(ids.lookup(v));
            Operation *def = y.getDefiningOp();
            nodes.push_back(def ? nodeName(def->getLoc()) : std::string());
          }
        std::string name =
            fusion->getAttrOfType<StringAttr>(kKernelAttr).str();
        const KernelInfo *kernel = nullptr;
        if (target->kernelInfo) {
          auto it = target->kernelInfo->find(name);
          if (it != target->kernelInfo->end())
            kernel = &it->second;
        }
        if (kernel) {
          for (const KernelScratch &s : kernel->scratch)
            bufs.push_back(addScratch(s));
          scratchBytes = std::max(scratchBytes, kernel->scratchBytes);
        }
        if (target->target != "cuda") {
          steps.push_back(llvm::json::Object{{"kind", "kernel"},
                                             {"name", name},
                                             {"buffers", std::move(bufs)},
                                             {"writes", std::move(writes)},
                                             {"nodes", std::move(nodes)}});
          continue;
        }
        if (!kernel)
          return op.emitError("plan: no GPU launches for kernel ") << name;
        auto dims = [](const std::array<int64_t, 3> &d) {
          return llvm::json::Array{d[0], d[1], d[2]};
        };
        for (const GpuLaunch &launch : kernel->launches) {
          llvm::json::Object step{{"kind", "kernel"},
                                  {"name", launch.name},
                                  {"buffers", llvm::json::Array(bufs)},
                                  {"grid", dims(launch.grid)},
                                  {"block", dims(launch.block)},
                                  {"shared_bytes", launch.sharedBytes}};
          // The outputs are complete after the kernel's last launch.
          if (&launch == &kernel->launches.back()) {
            step["writes"] = llvm::json::Array(writes);
            step["nodes"] = llvm::json::Array(nodes);
          }
          steps.push_back(std::move(step));
        }
      } else if (auto mm = dyn_cast<MatmulOp>(op)) {
        auto lt = cast<RankedTensorType>(mm.getLhs().getType());
        auto rt = cast<RankedTensorType>(mm.getRhs().getType());
        Type et = lt.getElementType();
        if (!et.isF32() && !et.isF64() && !et.isBF16() && !et.isF16())
          return op.emitError("plan: GEMM steps multiply f32, f64, bf16 and "
                              "f16 matrices, not ")
                 << et;
        bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
        int64_t rank = lt.getRank(), rr = rt.getRank();
        int64_t M = lt.getDimSize(rank - (ta ? 1 : 2));
        int64_t K = lt.getDimSize(rank - (ta ? 2 : 1));
        int64_t N = rt.getDimSize(rr - (tb ? 2 : 1));
        int64_t batch = 1;
        for (int64_t d : lt.getShape().drop_back(2))
          batch *= d;
        bool sharedRhs = rr == 2 && rank != 2;
        // [B, M, K] x [K, N] is one [B*M, K] x [K, N] GEMM: A and C are
        // contiguous row-major, so their batches stack into rows (a larger
        // GEMM runs nearer the machine's peak than B small ones).
        if (sharedRhs && !ta) {
          M *= batch;
          batch = 1;
        }
        llvm::json::Object gemm{{"kind", "gemm"},
                                {"node", nodeName(mm.getLoc())},
                                {"a", ids.lookup(mm.getLhs())},
                                {"b", ids.lookup(mm.getRhs())},
                                {"c", ids.lookup(mm.getResult())},
                                {"batch", batch},
                                {"m", M},
                                {"n", N},
                                {"k", K},
                                {"trans_a", ta},
                                {"trans_b", tb},
                                {"stride_a", M * K},
                                {"stride_b", sharedRhs ? 0 : K * N},
                                {"stride_c", M * N}};
        if (Value bias = mm.getBias()) {
          gemm["epilogue"] = "bias";
          gemm["bias"] = ids.lookup(bias);
        }
        steps.push_back(std::move(gemm));
      } else if (isCollective(&op)) {
        steps.push_back(collectiveStep(&op));
      } else if (isa<Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp>(op) &&
                 isLibraryCall(&op)) {
        FailureOr<llvm::json::Object> step = convStep(&op);
        if (failed(step))
          return failure();
        steps.push_back(std::move(*step));
      } else if (isa<AttentionOp, AttentionGradOp>(op)) {
        FailureOr<llvm::json::Object> step = attentionStep(&op);
        if (failed(step))
          return failure();
        steps.push_back(std::move(*step));
      } else if (isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp>(op)) {
        FailureOr<llvm::json::Object> step = linearCrossEntropyStep(&op);
        if (failed(step))
          return failure();
        steps.push_back(std::move(*step));
      } else if (!isa<ReshapeOp>(op)) {
        return op.emitError("plan: '")
               << op.getName() << "' is not a step the plan can hold";
      }
    }
    int64_t arenaBytes = arena ? arena.getInt() : 0;
    if (scratchBytes)
      arenaBytes = scratchBase + scratchBytes;
    return llvm::json::Object{{"name", func.getName().str()},
                              {"arena_bytes", arenaBytes},
                              {"buffers", std::move(buffers)},
                              {"inputs", std::move(inputs)},
                              {"outputs", std::move(outputs)},
                              {"steps", std::move(steps)}};
  }
};
} // namespace

LogicalResult loom::writePlan(ModuleOp module, const std::string &path,
                              const PlanTarget &target,
                              const std::string &sourceModel,
                              std::string &error) {
  llvm::json::Array entries;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    EntryWriter w;
    w.func = func;
    w.target = &target;
    FailureOr<llvm::json::Object> entry = w.write();
    if (failed(entry)) {
      error = "cannot write the plan of @" + func.getName().str();
      return failure();
    }
    entries.push_back(std::move(*entry));
  }
  llvm::json::Object plan{{"format", "loom-plan"},
                          {"version", 1},
                          {"target", target.target},
                          {"kernel_abi", 1},
                          {"entries", std::move(entries)}};
  FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
  if (failed(mesh)) {
    error = "the module's mesh is malformed";
    return failure();
  }
  if (!mesh->empty()) {
    llvm::json::Array axes, shape;
    for (const MeshAxis &a : *mesh) {
      axes.push_back(a.name);
      shape.push_back(a.size);
    }
    plan["mesh"] = llvm::json::Object{{"axes", std::move(axes)},
                                      {"shape", std::move(shape)}};
  }
  // Pipeline stages: the boundaries and action lists loom-pipeline-stages
  // recorded (docs/pipeline.md, "In plan.json").
  if (auto pipeline = module->getAttrOfType<DictionaryAttr>(kPipelineAttr))
    plan["pipeline"] = attrToJson(pipeline);
  if (auto spec = module->getAttrOfType<StringAttr>(kGradCompressionAttr))
    plan["grad_compression"] = spec.str();
  auto fileOrNull = [](const std::string &f) {
    return f.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(f);
  };
  plan["kernels"] = fileOrNull(target.kernels);
  if (target.target == "cuda") {
    plan["sm"] = target.sm;
    plan["ptx"] = fileOrNull(target.ptx);
  }
  plan["params"] = "params.safetensors";
  if (!sourceModel.empty())
    plan["source_model"] = sourceModel;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return failure();
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plan))) << "\n";
  return success();
}

