//===- Loomc.cpp - The loomc compiler driver ------------------------------===//
//
// loomc takes a model (ONNX or Loom JSON) and runs Loom's pipeline on it:
// import, the training pipeline (--train, with data, tensor and pipeline
// parallelism), and for --target=cpu|cuda:sm_NN the code-generation phases
// (fuse, plan-memory, kernels) and the artifact directory. `--emit=<phase>`
// prints the IR after a phase instead. A phase name without a phase of its
// own (shard, pipeline) is refused with where its work happens rather than
// ignored.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Loomc.h"

#include "loom/Codegen/KernelInfo.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Driver/Diagnostics.h"
#include "loom/Import/Import.h"
#include "loom/InitAll.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Transforms/Passes.h"
#include "loom/Target/Artifact.h"
#include "loom/Target/Cuda.h"
#include "mlir/Pass/PassManager.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

#include <cstdlib>
#include <cstring>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
struct Options {
  cl::OptionCategory category{"loomc options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx|model.json>"),
                             cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("Output file ('-' for stdout, the default)"),
      cl::value_desc("file"), cl::init("-"), cl::cat(category)};
  cl::opt<std::string> emit{
      "emit",
      cl::desc("Phase after which to print the IR: mlir (alias import), "
               "loss, mixed-precision, autodiff, optimizer (these imply "
               "--train), remat, fuse, plan-memory, outline (the kernels in "
               "a nested module "
               "@loom_kernels), bufferize, kernels (cpu: the kernels in the "
               "LLVM dialect; cuda: the gpu.module of Loom's thread "
               "mapping), nvvm, ptx (cuda only; the PTX text). From remat on "
               "these need --target; each prints what loom-opt "
               "--loom-codegen-cpu/--loom-codegen-cuda{stop-after=PHASE} "
               "prints"),
      cl::value_desc("phase"), cl::init("mlir"), cl::cat(category)};
  cl::opt<std::string> params{
      "params",
      cl::desc("Where to write the parameter values (safetensors). Default: "
               "beside -o as <output stem>.safetensors; nowhere when printing "
               "to stdout or for a code-generation --emit phase"),
      cl::value_desc("file"), cl::cat(category)};
  cl::list<std::string> bindInputs{
      "bind-input",
      cl::desc("Specialize an ONNX graph input on a constant: NAME=FILE, "
               "FILE holding one serialized onnx.TensorProto (repeatable)"),
      cl::value_desc("name=file"), cl::cat(category)};
  cl::opt<loom::BatchNormMode> batchNorm{
      "batch-norm",
      cl::desc("ONNX BatchNormalization: whether it trains (batch "
               "statistics in the training step; its running statistics are "
               "buffers, updated and saved with the parameters, and used by "
               "@predict) or is frozen (running statistics as constants)"),
      cl::values(
          clEnumValN(loom::BatchNormMode::Auto, "auto",
                     "batch statistics where the model was exported in "
                     "training mode (training_mode=1, or PyTorch's exporter "
                     "traced a module in training mode), else frozen "
                     "(default)"),
          clEnumValN(loom::BatchNormMode::Batch, "batch",
                     "batch statistics for every BatchNormalization"),
          clEnumValN(loom::BatchNormMode::Frozen, "frozen",
                     "running statistics, as constants (PyTorch's eval mode)")),
      cl::init(loom::BatchNormMode::Auto), cl::cat(category)};
  cl::opt<bool> train{"train",
                      cl::desc("Build the training step: loss, backward "
                               "pass, optimizer (@forward_backward, "
                               "@apply_optimizer, @train_step)"),
                      cl::cat(category)};
  // The training options (include/loom/Pipelines/TrainingOptions.def).
  struct TrainingFlags {
    cl::OptionCategory &category;
#define LOOM_TRAINING_OPTION(PASS, TYPE, FIELD, FLAG, DEFAULT, DESC)          \
  cl::opt<TYPE> FIELD{FLAG, cl::desc(DESC), cl::init(DEFAULT),                 \
                      cl::cat(category)};
#include "loom/Pipelines/TrainingOptions.def"
  } training{category};
  cl::opt<std::string> target{
      "target",
      cl::desc("Compile for a target and write an artifact directory at -o: "
               "cpu (plan.json, kernels.so, params.safetensors, "
               "final.mlir) or cuda:sm_NN, e.g. cuda:sm_90 or cuda:sm_80 "
               "(plan.json, kernels.ptx, kernels.cubin where the CUDA "
               "toolkit's ptxas is found (else the driver compiles the PTX "
               "when it loads), params.safetensors, final.mlir; 'cuda' "
               "alone means sm_90)"),
      cl::value_desc("cpu|cuda:sm_NN"), cl::init(""), cl::cat(category)};
  // The code-generation options (include/loom/Pipelines/CodegenOptions.def).
  struct CodegenFlags {
    cl::OptionCategory &category;
#define LOOM_CODEGEN_OPTION(TYPE, FIELD, FLAG, LOOMC_FLAG, DEFAULT, VALUE,     \
                            DESC)                                              \
  cl::opt<TYPE> FIELD{LOOMC_FLAG, cl::desc(DESC), cl::value_desc(VALUE),       \
                      cl::init(DEFAULT), cl::cat(category)};
#include "loom/Pipelines/CodegenOptions.def"
  } codegen{category};
  cl::opt<bool> report{"report",
                       cl::desc("With --target, writing an artifact: print "
                                "the kernels, steps and arena bytes of each "
                                "entry point"),
                       cl::cat(category)};
  cl::opt<bool> onnxOps{"onnx-ops",
                        cl::desc("List the ONNX ops (default domain) Loom "
                                 "imports, one per line, and exit"),
                        cl::cat(category)};
  cl::opt<bool> emitLocations{
      "emit-locations",
      cl::desc("With --emit: print each op's location (the ONNX node or "
               "JSON node it comes from) too, so that loom-opt, continuing "
               "from the printed module, names the nodes as loomc does"),
      cl::cat(category)};
  cl::opt<bool> summary{"summary",
                        cl::desc("Print a summary of the imported model "
                                 "(inputs, outputs, parameters, ops) to "
                                 "stderr"),
                        cl::cat(category)};
  // Only for tests of the callers' crash handling (the Python bindings
  // turn a crashing compiler into loom.CompileError): hidden from --help.
  cl::opt<std::string> debugCrash{
      "debug-crash",
      cl::desc("Crash at the start of compilation, to test how a caller "
               "survives a crashing compiler: abort, segv, fatal "
               "(reportFatalUsageError: exits with status 1), internal "
               "(reportFatalInternalError: aborts) or unreachable "
               "(llvm_unreachable's report, then abort)"),
      cl::value_desc("kind"), cl::init(""), cl::Hidden, cl::cat(category)};
};

/// Phase names that have no --emit phase of their own (their work is done
/// inside other phases): refused, naming where, rather than ignored.
const char *phaseWithoutEmit(StringRef phase) {
  if (phase == "shard")
    return "--emit=shard is not implemented yet as a phase of its own: "
           "--tp splits the layers in the loss phase and --dp/--zero shard "
           "the step in the optimizer phase (--emit=loss, --emit=optimizer)";
  if (phase == "pipeline")
    return "there is no --emit=pipeline phase: with --pp the pipeline "
           "stages are cut at the end of the optimizer phase "
           "(--emit=optimizer --pp=P shows them)";
  return nullptr;
}

std::string shapeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Optimizer state starts at zero, or at its `loom.init` value (the loss
/// scale); it is stored beside the parameters, whole where the step holds
/// a shard of it. Adds the state `apply` takes, unless `seen` has it.
void addStateOf(func::FuncOp apply, loom::ParameterStore &params,
                llvm::StringSet<> &seen) {
  for (unsigned i = 0; i < apply.getNumArguments(); ++i) {
    auto name = apply.getArgAttrOfType<StringAttr>(i, loom::kOptStateAttr);
    if (!name || !seen.insert(name.getValue()).second)
      continue;
    auto type = cast<RankedTensorType>(apply.getArgumentTypes()[i]);
    // A rank's shard (loomc --zero) is stored whole: the runtime takes its
    // block, so the file serves any number of ranks.
    if (auto shard = apply.getArgAttrOfType<DictionaryAttr>(i, loom::kShardAttr))
      if (auto shape = shard.getAs<DenseI64ArrayAttr>("shape"))
        type = RankedTensorType::get(shape.asArrayRef(), type.getElementType());
    auto init = apply.getArgAttrOfType<DenseElementsAttr>(i, loom::kInitAttr);
    if (!init || init.getType() != type ||
        type.getElementType().isInteger(1)) {
      // Zeros, never held in memory (Adam's moments are twice the weights).
      params.add(loom::ParameterTensor{name.getValue().str(), type, {},
                                       /*zeros=*/true});
      continue;
    }
    size_t elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
    std::vector<uint8_t> bytes(type.getNumElements() * elementBytes, 0);
    ArrayRef<char> raw = init.getRawData(); // one element when splat
    for (size_t at = 0; at < bytes.size(); at += elementBytes)
      std::memcpy(bytes.data() + at, raw.data() + (init.isSplat() ? 0 : at),
                  elementBytes);
    params.add(loom::ParameterTensor{name.getValue().str(), type,
                                     std::move(bytes)});
  }
}

/// The optimizer state of the updates: @apply_optimizer, or each pipeline
/// stage's @stage<s>_apply_gradients (not @forward_backward, whose
/// loss_scale argument has no initial value).
void addOptimizerState(ModuleOp module, loom::ParameterStore &params) {
  llvm::StringSet<> seen;
  for (auto apply : module.getOps<func::FuncOp>()) {
    StringRef fn = apply.getSymName();
    if (fn == "apply_optimizer" ||
        (fn.starts_with("stage") && fn.ends_with("_apply_gradients")))
      addStateOf(apply, params, seen);
  }
}

/// Records on `module` (loom.shared_params) each parameter of the imported
/// @forward that several of the model's nodes read: one tensor, whose
/// gradients from every reader are summed (tied embeddings, or initializers
/// an exporter merged). For --report.
void recordSharedParameters(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func)
    return;
  MLIRContext *ctx = module.getContext();
  SmallVector<Attribute> shared;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, loom::kParamAttr);
    if (!name)
      continue;
    SmallVector<std::string> names;
    // The readers in program order.
    SmallVector<Operation *> users(func.getArgument(i).getUsers());
    llvm::sort(users, [](Operation *a, Operation *b) {
      return a->getBlock() == b->getBlock() ? a->isBeforeInBlock(b) : a < b;
    });
    for (Operation *user : users) {
      std::string node = loom::nodeName(user->getLoc());
      if (!node.empty() && !llvm::is_contained(names, node))
        names.push_back(node);
    }
    if (names.size() < 2)
      continue;
    SmallVector<Attribute> readers;
    for (const std::string &n : names)
      readers.push_back(StringAttr::get(ctx, n));
    shared.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, "param"), name),
              NamedAttribute(StringAttr::get(ctx, "nodes"),
                             ArrayAttr::get(ctx, readers))}));
  }
  if (!shared.empty())
    module->setAttr("loom.shared_params", ArrayAttr::get(ctx, shared));
}

/// Batch norms the exporter folded into convolutions
/// (loom.folded_batch_norms, set by the ONNX importer).
void printFoldedBatchNorms(ModuleOp module, llvm::raw_ostream &os) {
  auto folded = module->getAttrOfType<DictionaryAttr>("loom.folded_batch_norms");
  if (!folded)
    return;
  int64_t count = folded.getAs<IntegerAttr>("count").getInt();
  int64_t training = folded.getAs<IntegerAttr>("training").getInt();
  os << "  batch norms folded into " << count
     << " nodes by the exporter (export with optimize=False to train them)";
  if (training)
    os << "; " << training
       << " traced in training mode: the model trains without their batch "
          "statistics";
  os << "\n";
}

/// The parameters several nodes read (loom.shared_params).
void printSharedParameters(ModuleOp module, llvm::raw_ostream &os) {
  auto shared = module->getAttrOfType<ArrayAttr>("loom.shared_params");
  if (!shared)
    return;
  os << "  shared parameters: " << shared.size()
     << " tensors read by several nodes (trained as one: their gradients "
        "are summed)\n";
  for (auto entry : shared.getAsRange<DictionaryAttr>()) {
    auto nodes = entry.getAs<ArrayAttr>("nodes");
    os << "    " << entry.getAs<StringAttr>("param").getValue() << ": "
       << nodes.size() << " nodes (";
    for (auto [k, n] : llvm::enumerate(nodes.getAsRange<StringAttr>())) {
      if (k == 3) {
        os << ", ...";
        break;
      }
      os << (k ? ", " : "") << "'" << n.getValue() << "'";
    }
    os << ")\n";
  }
}

void printSummary(ModuleOp module, llvm::raw_ostream &os) {
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func)
    return;
  os << "== " << "@forward summary ==\n";
  int64_t numParams = 0, paramElems = 0, paramBytes = 0;
  int64_t numBuffers = 0, bufferElems = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    Type type = func.getArgument(i).getType();
    if (auto name = func.getArgAttrOfType<StringAttr>(i, loom::kInputAttr)) {
      os << "  input  " << name.getValue() << " : " << shapeString(type) << "\n";
    } else if (func.getArgAttr(i, loom::kParamAttr)) {
      ++numParams;
      auto shaped = cast<ShapedType>(type);
      paramElems += shaped.getNumElements();
      paramBytes += shaped.getNumElements() *
                    ((shaped.getElementTypeBitWidth() + 7) / 8);
    } else if (func.getArgAttr(i, loom::kBufferAttr)) {
      ++numBuffers;
      bufferElems += cast<ShapedType>(type).getNumElements();
    }
  }
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, loom::kOutputAttr);
    os << "  output " << (name ? name.getValue() : StringRef("?")) << " : "
       << shapeString(func.getResultTypes()[i]) << "\n";
  }
  os << "  parameters: " << numParams << " tensors, " << paramElems
     << " values, " << paramBytes << " bytes\n";
  if (numBuffers)
    os << "  buffers (BatchNorm running statistics): " << numBuffers
       << " tensors, " << bufferElems << " values\n";
  std::map<std::string, int> counts;
  int64_t flops = 0;
  func.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "loom")
      ++counts[op->getName().getStringRef().str()];
    if (auto cost = dyn_cast<loom::CostOpInterface>(op))
      flops += cost.getFlopCount();
  });
  os << "  ops:";
  for (auto &[name, count] : counts)
    os << " " << StringRef(name).drop_front(5) << "=" << count;
  os << "\n  forward FLOPs (estimate): " << flops << "\n";
}
/// loom-fuse-attention's outcome for each candidate softmax (the module's
/// loom.attention_report): fused, with its mask kind, or kept, with why.
void printAttention(ModuleOp module, llvm::raw_ostream &os) {
  auto report = module->getAttrOfType<ArrayAttr>("loom.attention_report");
  if (!report)
    return;
  int64_t fused = 0;
  for (auto entry : report.getAsRange<DictionaryAttr>())
    fused += entry.getAs<StringAttr>("outcome").getValue() == "fused";
  os << "  attention: " << fused << " of " << report.size()
     << " layers fused (loom.attention, no T x T tensor)\n";
  for (auto entry : report.getAsRange<DictionaryAttr>())
    os << "    " << entry.getAs<StringAttr>("outcome").getValue()
       << " attention: " << entry.getAs<StringAttr>("node").getValue()
       << " (" << entry.getAs<StringAttr>("detail").getValue() << ")\n";
}

/// loom-tensor-parallel's choice for each layer it tried (the module's
/// loom.tp_report): split (column- or row-parallel, or the
/// vocabulary-parallel embedding), or whole with why.
void printTensorParallel(ModuleOp module, llvm::raw_ostream &os) {
  auto report = module->getAttrOfType<ArrayAttr>("loom.tp_report");
  if (!report)
    return;
  std::map<std::string, int64_t> counts;
  int64_t whole = 0;
  for (auto entry : report.getAsRange<DictionaryAttr>()) {
    if (entry.getAs<StringAttr>("outcome").getValue() == "split")
      ++counts[entry.getAs<StringAttr>("detail").getValue().str()];
    else
      ++whole;
  }
  os << "  tensor parallel: " << counts["column-parallel"]
     << " column-parallel, " << counts["row-parallel"] << " row-parallel, "
     << counts["vocabulary-parallel embedding"]
     << " vocabulary-parallel embeddings; " << whole
     << " layers kept whole\n";
  for (auto entry : report.getAsRange<DictionaryAttr>())
    os << "    " << entry.getAs<StringAttr>("outcome").getValue() << ": "
       << entry.getAs<StringAttr>("node").getValue() << " ("
       << entry.getAs<StringAttr>("detail").getValue() << ")\n";
}

/// loom-fuse-linear-cross-entropy's outcome for each cross-entropy (the
/// module's loom.lm_head_report): fused, with the logits bytes it no
/// longer stores, or kept, with why.
void printLmHead(ModuleOp module, llvm::raw_ostream &os) {
  auto report = module->getAttrOfType<ArrayAttr>("loom.lm_head_report");
  if (!report)
    return;
  for (auto entry : report.getAsRange<DictionaryAttr>())
    os << "  lm head: " << entry.getAs<StringAttr>("outcome").getValue()
       << " linear+cross-entropy at "
       << entry.getAs<StringAttr>("node").getValue() << " ("
       << entry.getAs<StringAttr>("detail").getValue() << ")\n";
  // The CUDA target computes it with GEMMs and kernels, a chunk of rows at
  // a time (loom-linear-cross-entropy-chunks).
  if (auto chunks = module->getAttrOfType<ArrayAttr>("loom.lm_head_chunks"))
    for (auto line : chunks.getAsRange<StringAttr>())
      os << "    lm head in chunks (GEMMs and generated kernels): "
         << line.getValue() << "\n";
}

/// loom-remat's decisions for one entry point (its loom.remat attribute).
void printRemat(DictionaryAttr remat, llvm::raw_ostream &os) {
  auto get = [&](StringRef key) -> int64_t {
    auto v = remat.getAs<IntegerAttr>(key);
    return v ? v.getInt() : 0;
  };
  int64_t step = get("step_flops"), extra = get("recompute_flops");
  os << "    remat: arena " << get("arena_before") << " -> " << get("arena")
     << " bytes";
  if (int64_t budget = get("budget"))
    os << " (budget " << budget << ")";
  os << "; recomputes " << extra << " FLOPs ("
     << llvm::format("%.2f", step ? 100.0 * double(extra) / double(step) : 0.0)
     << "% of the step's " << step << ")";
  auto ops = remat.getAs<DictionaryAttr>("recomputed");
  if (ops && !ops.empty()) {
    os << ": ";
    llvm::interleaveComma(ops, os, [&](NamedAttribute a) {
      os << a.getName().getValue() << " "
         << cast<IntegerAttr>(a.getValue()).getInt();
    });
  }
  os << "\n";
  if (auto exact = remat.getAs<IntegerAttr>("exhaustive_arena"))
    os << "    remat subset search (every subset of the "
       << get("exhaustive_candidates")
       << " stored forward values, each recomputed before its first "
          "backward reader): best arena "
       << exact.getInt() << " bytes, recomputing "
       << get("exhaustive_recompute_flops") << " FLOPs\n";
}

void printReport(ModuleOp module, const loom::KernelInfoMap *gpu,
                 llvm::raw_ostream &os) {
  int64_t numKernels = 0;
  llvm::StringSet<> distinct;
  module.walk([&](loom::FusionOp fusion) {
    ++numKernels;
    if (auto name = fusion->getAttrOfType<StringAttr>("loom.kernel"))
      distinct.insert(name.getValue());
  });
  os << "loomc report: " << numKernels << " kernels ("
     << distinct.size() << " compiled: the others repeat one of them)\n";
  if (gpu) {
    std::map<std::string, int64_t> strategies;
    int64_t launches = 0, scratch = 0;
    for (auto &[name, k] : *gpu) {
      for (const loom::GpuLaunch &l : k.launches)
        ++strategies[l.strategy], ++launches;
      scratch = std::max(scratch, k.scratchBytes);
    }
    os << "  GPU launches: " << launches << " (";
    llvm::interleaveComma(strategies, os, [&](auto &p) {
      os << p.first << " " << p.second;
    });
    os << "); largest kernel scratch " << scratch << " bytes\n";
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    int64_t kernelSteps = 0, gemms = 0, convs = 0, views = 0, flops = 0,
            attentions = 0, heads = 0;
    for (Operation &op : func.getBody().front()) {
      if (isa<loom::FusionOp>(op)) {
        ++kernelSteps;
        // A generated attention kernel (the CUDA target) is a kernel step
        // of its own.
        op.walk([&](Operation *inner) {
          if (isa<loom::AttentionOp, loom::AttentionGradOp>(inner))
            ++attentions;
        });
      } else if (isa<loom::MatmulOp>(op)) {
        ++gemms;
        // The first GEMM of a fused head expanded into chunks of rows
        // (loom-linear-cross-entropy-chunks: the CUDA target, 16 bits).
        auto head = op.getAttrOfType<StringAttr>("loom.lm_head");
        if (head && head.getValue().contains(", chunk 1 of "))
          ++heads;
      }
      else if (isa<loom::AttentionOp, loom::AttentionGradOp>(op))
        ++attentions;
      else if (isa<loom::LinearCrossEntropyOp,
                   loom::LinearCrossEntropyGradOp>(op))
        ++heads;
      else if (loom::isLibraryCall(&op))
        ++convs;
      else if (isa<loom::ReshapeOp>(op))
        ++views;
    }
    func.walk([&](loom::CostOpInterface c) { flops += c.getFlopCount(); });
    auto arena = func->getAttrOfType<IntegerAttr>("loom.arena_bytes");
    os << "  @" << func.getName() << ": " << kernelSteps << " kernel steps, "
       << gemms << " GEMMs, " << convs << " convolutions, " << attentions
       << " fused attentions, " << heads << " fused LM heads, " << views
       << " views; arena "
       << (arena ? arena.getInt() : 0) << " bytes (peak); " << flops
       << " FLOPs (estimate)\n";
    if (auto remat = func->getAttrOfType<DictionaryAttr>("loom.remat"))
      printRemat(remat, os);
  }
  printSharedParameters(module, os);
  printFoldedBatchNorms(module, os);
  printAttention(module, os);
  printTensorParallel(module, os);
  printLmHead(module, os);
}

/// Writes what `print` prints, and a newline, to `output` (-o).
int printOutput(const std::string &output, llvm::raw_ostream &err,
                llvm::function_ref<void(llvm::raw_ostream &)> print) {
  std::string error;
  auto out = mlir::openOutputFile(output, &error);
  if (!out) {
    err << "loomc: error: " << error << "\n";
    return 1;
  }
  print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}

/// --target: the code-generation phases up to `stopAfter`, then the IR of
/// that phase printed, the PTX, or the artifact written.
/// How --emit prints the module (--emit-locations).
OpPrintingFlags printingFlags(const Options &opts) {
  OpPrintingFlags flags;
  if (opts.emitLocations)
    flags.enableDebugInfo();
  return flags;
}

int compileForTarget(ModuleOp module, Options &opts,
                     const loom::CodegenTarget &target, loom::Phase stopAfter,
                     const loom::LoomcExtensions &extensions,
                     llvm::raw_ostream &err) {
  loom::CodegenOptions codegen;
  codegen.target = opts.target;
#define LOOM_CODEGEN_OPTION(TYPE, FIELD, FLAG, LOOMC_FLAG, DEFAULT, VALUE,     \
                            DESC)                                              \
  codegen.FIELD = opts.codegen.FIELD;
#include "loom/Pipelines/CodegenOptions.def"
  // Another writer of the GPU kernels takes them as mapped (before NVVM).
  bool otherWriter = target.cuda && extensions.gpuKernelWriter;
  loom::Phase last = stopAfter;
  if (stopAfter == loom::Phase::Artifact && otherWriter)
    last = loom::Phase::Kernels;
  PassManager pm(module.getContext());
  loom::buildPipeline(pm, nullptr, &codegen, last);
  if (failed(pm.run(module))) {
    err << "loomc: error: generating the code failed (phase "
        << loom::phaseName(last) << ")\n";
    return 1;
  }
  std::string error;
  if (stopAfter == loom::Phase::Ptx) {
    ModuleOp kernels = loom::getKernelModule(module);
    std::string ptx;
    if (!loom::readKernelInfo(kernels).empty()) {
      FailureOr<std::string> text =
          loom::translateToPtx(kernels, target.sm, error);
      if (failed(text)) {
        err << "loomc: error: " << error << "\n";
        return 1;
      }
      ptx = std::move(*text);
    }
    return printOutput(opts.output, err,
                       [&](llvm::raw_ostream &os) { os << ptx; });
  }
  if (stopAfter != loom::Phase::Artifact)
    return printOutput(opts.output, err,
                       [&](llvm::raw_ostream &os) {
                         module.print(os, printingFlags(opts));
                       });

  loom::ArtifactOptions artifact;
  artifact.dir = opts.output;
  SmallString<256> source(opts.input);
  llvm::sys::fs::make_absolute(source);
  artifact.sourceModel = std::string(source);
  artifact.cuda = target.cuda;
  artifact.sm = target.sm;
  if (otherWriter)
    artifact.gpuKernelWriter = extensions.gpuKernelWriter;
  loom::KernelInfoMap info;
  if (failed(loom::writeArtifact(module, artifact, info, error, err))) {
    err << "loomc: error: " << error << "\n";
    return 1;
  }
  if (opts.report)
    printReport(module, target.cuda ? &info : nullptr, llvm::outs());
  return 0;
}

/// loomc's work once the options are parsed.
int runLoomc(Options &opts, const loom::LoomcExtensions &extensions);

/// loomc's usage text.
const char *const kOverview =
    "loomc: Loom's compiler driver\n\n"
    "  loomc MODEL.onnx|MODEL.json [--emit=mlir] [-o OUT.mlir] [--summary]\n"
    "  loomc MODEL [--train --loss=cross_entropy ...] --target=cpu|cuda:sm_90"
    " -o OUT.loom [--report]\n\n"
    "Imports the model into the loom dialect and prints it. Parameters are\n"
    "function arguments marked loom.param; their values are written to a\n"
    "safetensors file (see --params), never into the IR. --train builds the\n"
    "training step; --target compiles it to an artifact that loom-run\n"
    "runs on the CPU or an NVIDIA GPU. --memory-budget makes the arena\n"
    "of every entry point fit, recomputing forward values in the backward\n"
    "(loom-remat); --precision=bf16|fp16 runs the GEMMs and convolutions\n"
    "in 16 bits (loom-mixed-precision; fp16 with dynamic loss scaling).\n"
    "--dp=N (with --zero), --tp=N and --pp=P compile the step for\n"
    "several ranks (mpirun -np R loom-run, R = dp x tp x pp): data\n"
    "parallelism, Megatron-style tensor parallelism and pipeline\n"
    "parallelism (the model cut into stages on P ranks, run on\n"
    "--microbatches by --pp-schedule=gpipe|1f1b|interleaved|zb-h1);\n"
    "--grad-compression compresses the gradient reductions over the\n"
    "data-parallel ranks (docs/distributed.md, docs/pipeline.md).\n";
} // namespace

int loom::loomcMain(int argc, char **argv,
                    const LoomcExtensions &extensions) {
  llvm::InitLLVM init(argc, argv);
  llvm::setBugReportMsg("PLEASE report this crash of Loom's compiler with "
                        "the command and the model that made it.\n");
  Options opts;
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&opts.category});
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  return runLoomc(opts, extensions);
}

bool loom::crashForTesting(StringRef kind) {
  if (kind == "abort") {
    llvm::errs() << "loom: crashing on purpose (abort)\n";
    std::abort();
  }
  if (kind == "segv") {
    llvm::errs() << "loom: crashing on purpose (a store through a null "
                    "pointer)\n";
    // Through a volatile pointer the compiler cannot see is null.
    int *volatile nowhere = nullptr;
    *nowhere = 1;
    return true; // not reached
  }
  if (kind == "fatal")
    llvm::reportFatalUsageError("crashing on purpose (--debug-crash=fatal)");
  if (kind == "internal")
    llvm::reportFatalInternalError(
        "crashing on purpose (--debug-crash=internal)");
  if (kind == "unreachable")
    // What llvm_unreachable does in a build with assertions (in a release
    // build it compiles to nothing defined).
    llvm::llvm_unreachable_internal(
        "crashing on purpose (--debug-crash=unreachable)", __FILE__, __LINE__);
  return false;
}

int loom::loomcRunEmbedded(int argc, char **argv) {
  int rc;
  {
    Options opts;
    cl::HideUnrelatedOptions({&opts.category});
    // With an error stream the parser reports and returns false rather
    // than exiting the process.
    if (!cl::ParseCommandLineOptions(argc, argv, kOverview, &llvm::errs()))
      rc = 2;
    else
      rc = runLoomc(opts, {});
    // `opts` registered its options with LLVM's global parser, which would
    // keep pointers to them after they are gone: forget every registration
    // (the next call registers its own afresh).
    cl::ResetCommandLineParser();
  }
  llvm::outs().flush();
  llvm::errs().flush();
  return rc;
}

namespace {
int runLoomc(Options &opts, const loom::LoomcExtensions &extensions) {
  llvm::raw_ostream &err = llvm::errs();
  if (!opts.debugCrash.empty() && !loom::crashForTesting(opts.debugCrash)) {
    err << "loomc: error: unknown --debug-crash kind '" << opts.debugCrash
        << "' (expected abort, segv, fatal, internal or unreachable)\n";
    return 2;
  }
  if (opts.onnxOps) {
    for (StringRef op : loom::supportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (opts.input.empty()) {
    err << "loomc: error: no model given (loomc MODEL.onnx|MODEL.json ...; "
           "see --help)\n";
    return 1;
  }
  std::optional<loom::Phase> emitPhase = loom::parsePhase(opts.emit);
  if (!emitPhase) {
    if (const char *where = phaseWithoutEmit(opts.emit))
      err << "loomc: error: " << where << " (phases: mlir, "
          << loom::phaseList() << ")\n";
    else
      err << "loomc: error: unknown phase '" << opts.emit
          << "' for --emit (expected: mlir, " << loom::phaseList() << ")\n";
    return 2;
  }
  std::optional<loom::CodegenTarget> target;
  if (!opts.target.empty()) {
    target = loom::parseTarget(opts.target);
    if (!target) {
      if (StringRef(opts.target).starts_with("cuda"))
        err << "loomc: error: bad CUDA target '" << opts.target
            << "' (expected cuda or cuda:sm_NN with NN from 75 to 121, e.g. "
            << "cuda:sm_90 or cuda:sm_80)\n";
      else
        err << "loomc: error: unknown target '" << opts.target
            << "' (expected cpu or cuda:sm_NN)\n";
      return 2;
    }
  }
  bool trainingPhase = loom::isTrainingPhase(*emitPhase);
  bool codegenPhase = loom::isCodegenPhase(*emitPhase);
  if (codegenPhase && !target) {
    err << "loomc: error: --emit=" << opts.emit
        << " is a code-generation phase: give --target=cpu or "
        << "--target=cuda:sm_NN\n";
    return 2;
  }
  if (loom::isCudaOnlyPhase(*emitPhase) && !target->cuda) {
    err << "loomc: error: --emit=" << opts.emit
        << " is a phase of the CUDA target: give --target=cuda:sm_NN\n";
    return 2;
  }
  bool writeArtifact = !opts.target.empty() && !codegenPhase;
  if (extensions.gpuKernelWriter && !writeArtifact) {
    err << "loomc: error: " << extensions.gpuKernelWriterFlag
        << " writes an artifact\n";
    return 2;
  }
  if (writeArtifact && opts.output == "-") {
    err << "loomc: error: --target=" << opts.target
        << " writes an artifact directory: give -o OUT.loom\n";
    return 2;
  }
  if (writeArtifact && !opts.params.empty()) {
    err << "loomc: error: --params does not apply to --target: the "
           "artifact holds its parameters (OUT.loom/params.safetensors)\n";
    return 2;
  }
  if (!opts.codegen.memoryBudget.empty()) {
    std::optional<int64_t> budget =
        loom::parseByteSize(opts.codegen.memoryBudget);
    if (!budget || *budget <= 0) {
      err << "loomc: error: --memory-budget=" << opts.codegen.memoryBudget
          << " is not a positive byte count (digits with an optional K, M "
             "or G suffix, e.g. 512M)\n";
      return 2;
    }
  }
  if (opts.codegen.convLayout != "auto" && opts.codegen.convLayout != "nhwc" &&
      opts.codegen.convLayout != "nchw") {
    err << "loomc: error: --conv-layout=" << opts.codegen.convLayout
        << " (expected auto, nhwc or nchw)\n";
    return 2;
  }
  if (opts.codegen.remat != "none" && opts.codegen.remat != "auto" &&
      opts.codegen.remat != "full") {
    err << "loomc: error: --remat=" << opts.codegen.remat
        << " (expected none, auto or full)\n";
    return 2;
  }
  bool rematAsked =
      !opts.codegen.memoryBudget.empty() || opts.codegen.remat != "auto" ||
      !opts.codegen.checkpoint.empty() || opts.codegen.rematExhaustive != 0;
  if (rematAsked && opts.target.empty()) {
    err << "loomc: error: --memory-budget, --remat and --checkpoint need "
           "--target (they act on the arena the code generation plans)\n";
    return 2;
  }
  if (opts.report && opts.target.empty()) {
    err << "loomc: error: --report needs --target\n";
    return 2;
  }
  bool runTraining = opts.train || trainingPhase;

  DialectRegistry registry;
  loom::registerCodegenDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A diagnostic names the op and its model node; the op's IR is no help.
  context.printOpOnDiagnostic(false);
  loom::ToolDiagnosticHandler diag(&context, err);

  StringRef ext = llvm::sys::path::extension(opts.input);
  if (!llvm::sys::fs::exists(opts.input)) {
    err << "loomc: error: '" << opts.input << "' does not exist\n";
    return 1;
  }
  if (llvm::sys::fs::is_directory(opts.input)) {
    err << "loomc: error: '" << opts.input << "' is a directory\n";
    return 1;
  }
  loom::ParameterStore params;
  OwningOpRef<ModuleOp> module;
  loom::OnnxImportOptions onnxOptions;
  for (const std::string &bind : opts.bindInputs) {
    auto [name, file] = StringRef(bind).split('=');
    if (name.empty() || file.empty()) {
      err << "loomc: error: --bind-input expects NAME=FILE, got '" << bind
          << "'\n";
      return 2;
    }
    onnxOptions.boundInputs.emplace_back(name.str(), file.str());
  }
  onnxOptions.batchNorm = opts.batchNorm;
  if (ext.equals_insensitive(".onnx"))
    module = loom::importOnnxModel(opts.input, context, params, onnxOptions);
  else if (ext.equals_insensitive(".json"))
    module = loom::importJsonGraph(opts.input, context, params);
  else {
    err << "loomc: error: cannot tell the format of '" << opts.input
        << "': expected a .onnx or .json file\n";
    return 1;
  }
  if (!module || diag.getNumErrors() != 0) {
    err << "loomc: error: failed to import '" << opts.input << "'\n";
    return 1;
  }
  recordSharedParameters(*module);
  // The imported model's, whatever comes after (training, --target).
  if (opts.summary)
    printSummary(*module, err);

  if (runTraining) {
    loom::TrainingOptions t;
#define LOOM_TRAINING_OPTION(PASS, TYPE, FIELD, FLAG, DEFAULT, DESC)          \
  t.FIELD = opts.training.FIELD;
#include "loom/Pipelines/TrainingOptions.def"
    // The model itself stays too (@predict), for predictions and accuracy.
    t.keepPredict = true;
    PassManager pm(&context);
    // The target decides which fused ops the training step may use (the
    // fused LM head runs on the CPU target only); only the
    // training passes are built here.
    loom::CodegenOptions targetOnly;
    targetOnly.target = opts.target;
    loom::buildPipeline(pm, &t, target ? &targetOnly : nullptr,
                        trainingPhase ? *emitPhase : loom::Phase::Optimizer);
    if (failed(pm.run(*module))) {
      err << "loomc: error: building the training step failed\n";
      return 1;
    }
    addOptimizerState(*module, params);
  }

  if (writeArtifact) {
    std::error_code ec = llvm::sys::fs::create_directories(opts.output);
    if (!ec && !llvm::sys::fs::is_directory(opts.output))
      ec = std::make_error_code(std::errc::not_a_directory);
    if (ec) {
      err << "loomc: error: cannot create the artifact directory '"
          << opts.output << "': " << ec.message() << "\n";
      return 1;
    }
  }
  std::string paramsPath = opts.params;
  if (writeArtifact && paramsPath.empty()) {
    SmallString<256> p(opts.output);
    llvm::sys::path::append(p, "params.safetensors");
    paramsPath = std::string(p);
  } else if (paramsPath.empty() && opts.output != "-" && !codegenPhase) {
    SmallString<256> p(opts.output);
    llvm::sys::path::replace_extension(p, ".safetensors");
    paramsPath = std::string(p);
  }
  if (!paramsPath.empty()) {
    std::string error;
    if (!params.writeSafetensors(paramsPath, error)) {
      err << "loomc: error: cannot write parameters: " << error << "\n";
      return 1;
    }
    (*module)->setAttr(loom::kParamsFileAttr,
                       StringAttr::get(&context,
                                       llvm::sys::path::filename(paramsPath)));
  }

  if (!opts.target.empty())
    return compileForTarget(*module, opts, *target,
                            writeArtifact ? loom::Phase::Artifact : *emitPhase,
                            extensions, err);

  std::string error;
  auto out = mlir::openOutputFile(opts.output, &error);
  if (!out) {
    err << "loomc: error: " << error << "\n";
    return 1;
  }
  module->print(out->os(), printingFlags(opts));
  out->os() << "\n";
  out->keep();
  return 0;
}
} // namespace
