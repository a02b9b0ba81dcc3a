//===- Loomc.cpp - The loomc compiler driver ------------------------------===//
//
// loomc takes a model (ONNX or Loom JSON) and runs Loom's pipeline on it:
// import, the training pipeline (--train), and for --target=cpu the
// code-generation phases (fuse, plan-memory, kernels) and the artifact
// directory. `--emit=<phase>` prints the IR after a phase instead. Phases of
// DESIGN.md that later issues build are refused rather than ignored.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Loomc.h"

#include "loom/Codegen/CpuCodegen.h"
#include "loom/Codegen/CudaCodegen.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Driver/Diagnostics.h"
#include "loom/Import/Import.h"
#include "loom/InitAll.h"
#include "loom/Transforms/Pipelines.h"
#include "mlir/Pass/PassManager.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

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
               "loss, autodiff, optimizer (these three imply --train), "
               "fuse, plan-memory, kernels (cpu: the kernels in the LLVM "
               "dialect; cuda: the gpu.module of Loom's thread mapping), "
               "nvvm, ptx (cuda only; these need --target)"),
      cl::value_desc("phase"), cl::init("mlir"), cl::cat(category)};
  cl::opt<std::string> params{
      "params",
      cl::desc("Where to write the parameter values (safetensors). Default: "
               "beside -o as <output stem>.safetensors; nowhere when printing "
               "to stdout"),
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
  cl::opt<std::string> loss{"loss",
                            cl::desc("Loss to attach: cross_entropy, mse, or "
                                     "auto (the model's own scalar 'loss')"),
                            cl::init("auto"), cl::cat(category)};
  cl::opt<std::string> labels{"labels",
                              cl::desc("Name of the labels input the loss "
                                       "adds"),
                              cl::init("labels"), cl::cat(category)};
  cl::opt<std::string> lossOutput{"loss-output",
                                  cl::desc("Model output the loss reads "
                                           "(default: the only one)"),
                                  cl::init(""), cl::cat(category)};
  cl::opt<std::string> reduction{"reduction",
                                 cl::desc("Loss reduction: mean or sum"),
                                 cl::init("mean"), cl::cat(category)};
  cl::opt<int64_t> classAxis{"class-axis",
                             cl::desc("Cross-entropy class dimension of the "
                                      "logits: -1 (last; labels [B, T] for "
                                      "[B, T, V]) or 1 ([N, C, ...])"),
                             cl::init(-1), cl::cat(category)};
  cl::opt<int64_t> ignoreIndex{"ignore-index",
                               cl::desc("Cross-entropy label that counts for "
                                        "nothing (PyTorch's -100 by default)"),
                               cl::init(-100), cl::cat(category)};
  cl::opt<std::string> labelsDtype{"labels-dtype",
                                   cl::desc("Element type of cross-entropy "
                                            "labels: i64 or i32"),
                                   cl::init("i64"), cl::cat(category)};
  cl::opt<std::string> optimizer{
      "optimizer",
      cl::desc("sgd, momentum, nesterov, adam, adamw or adafactor"),
      cl::init("adamw"), cl::cat(category)};
  cl::opt<double> lr{"lr", cl::desc("Peak learning rate"), cl::init(1e-3),
                     cl::cat(category)};
  cl::opt<double> momentum{"momentum", cl::desc("SGD momentum"),
                           cl::init(0.9), cl::cat(category)};
  cl::opt<double> beta1{"beta1", cl::desc("Adam beta1"), cl::init(0.9),
                        cl::cat(category)};
  cl::opt<double> beta2{"beta2", cl::desc("Adam beta2"), cl::init(0.999),
                        cl::cat(category)};
  cl::opt<double> eps{"eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                      cl::cat(category)};
  cl::opt<double> weightDecay{"weight-decay",
                              cl::desc("Weight decay (decoupled for adamw "
                                       "and adafactor)"),
                              cl::init(0.0), cl::cat(category)};
  cl::opt<double> clipNorm{"clip-norm",
                           cl::desc("Global gradient-norm clipping (0: off)"),
                           cl::init(0.0), cl::cat(category)};
  cl::opt<std::string> schedule{"schedule",
                                cl::desc("Learning-rate schedule: constant, "
                                         "warmup, cosine, warmup-cosine"),
                                cl::init("constant"), cl::cat(category)};
  cl::opt<int64_t> warmupSteps{"warmup-steps", cl::desc("Warmup steps"),
                               cl::init(0), cl::cat(category)};
  cl::opt<int64_t> totalSteps{"total-steps",
                              cl::desc("Steps of the cosine decay"),
                              cl::init(0), cl::cat(category)};
  cl::opt<double> minLrRatio{"min-lr-ratio",
                             cl::desc("Learning rate at the end of the "
                                      "cosine decay, relative to --lr"),
                             cl::init(0.0), cl::cat(category)};
  cl::opt<std::string> target{
      "target",
      cl::desc("Compile for a target and write an artifact directory at -o: "
               "cpu (plan.json, kernels.so, params.safetensors, "
               "final.mlir) or cuda:sm_NN, e.g. cuda:sm_90 or cuda:sm_80 "
               "(plan.json, kernels.cubin assembled by the CUDA toolkit's "
               "ptxas, kernels.ptx, params.safetensors, final.mlir; "
               "'cuda' alone means sm_90)"),
      cl::value_desc("cpu|cuda:sm_NN"), cl::init(""), cl::cat(category)};
  cl::opt<std::string> cudaEmulatorLib{
      "cuda-emulator-lib",
      cl::desc("Tests only, with --target=cuda: run the kernels on the host "
               "through this GPU emulator library (kernels.emu.so, and a "
               "kernels.cubin for the runtime's fake CUDA driver)"),
      cl::value_desc("libloom_gpu_emu.so"), cl::Hidden, cl::cat(category)};
  cl::opt<int64_t> cpuParallelMinWork{
      "cpu-parallel-min-work",
      cl::desc("With --target=cpu: a kernel loop runs on all cores (OpenMP, "
               "loom-run --threads) when its work (iterations times inner "
               "trip counts) is at least this; 0: every kernel "
               "single-threaded, no OpenMP"),
      cl::value_desc("N"), cl::init(32768), cl::cat(category)};
  cl::opt<bool> report{"report",
                       cl::desc("With --target: print the kernels, steps and "
                                "arena bytes of each entry point"),
                       cl::cat(category)};
  cl::opt<bool> onnxOps{"onnx-ops",
                        cl::desc("List the ONNX ops (default domain) Loom "
                                 "imports, one per line, and exit"),
                        cl::cat(category)};
  cl::opt<bool> summary{"summary",
                        cl::desc("Print a summary of the imported model "
                                 "(inputs, outputs, parameters, ops) to "
                                 "stderr"),
                        cl::cat(category)};
};

/// Phases DESIGN.md names that later issues implement: refused, not ignored.
bool isPlannedPhase(StringRef phase) {
  return llvm::is_contained({"mixed-precision", "shard", "pipeline", "remat"},
                            phase);
}

std::string shapeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Optimizer state starts at zero; it is stored beside the parameters.
void addOptimizerState(ModuleOp module, loom::ParameterStore &params) {
  auto apply = module.lookupSymbol<func::FuncOp>("apply_optimizer");
  if (!apply)
    return;
  for (unsigned i = 0; i < apply.getNumArguments(); ++i) {
    auto name = apply.getArgAttrOfType<StringAttr>(i, loom::kOptStateAttr);
    if (!name)
      continue;
    auto type = cast<RankedTensorType>(apply.getArgumentTypes()[i]);
    size_t bytes = type.getNumElements() *
                   ((type.getElementTypeBitWidth() + 7) / 8);
    params.add(loom::ParameterTensor{name.getValue().str(), type,
                                     std::vector<uint8_t>(bytes, 0)});
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
    int64_t kernelSteps = 0, gemms = 0, views = 0, flops = 0;
    for (Operation &op : func.getBody().front()) {
      if (isa<loom::FusionOp>(op))
        ++kernelSteps;
      else if (isa<loom::MatmulOp>(op))
        ++gemms;
      else if (isa<loom::ReshapeOp>(op))
        ++views;
    }
    func.walk([&](loom::CostOpInterface c) { flops += c.getFlopCount(); });
    auto arena = func->getAttrOfType<IntegerAttr>("loom.arena_bytes");
    os << "  @" << func.getName() << ": " << kernelSteps << " kernel steps, "
       << gemms << " GEMMs, " << views << " views; arena "
       << (arena ? arena.getInt() : 0) << " bytes (peak); " << flops
       << " FLOPs (estimate)\n";
  }
}

/// The architecture of --target=cuda[:sm_NN], 0 if malformed.
int parseCudaTarget(StringRef target) {
  if (target == "cuda")
    return 90;
  if (!target.consume_front("cuda:sm_"))
    return 0;
  int sm = 0;
  if (target.getAsInteger(10, sm) || sm < 75 || sm > 121)
    return 0;
  return sm;
}

/// --cuda-emulator-lib: the kernels as host code run by the GPU emulator
/// (kernels.emu.so) and a kernels.cubin in the format of the runtime's fake
/// CUDA driver (runtime/tests/fakecuda) that names it.
LogicalResult emitEmulatedKernels(ModuleOp gpu, const loom::KernelInfoMap &map,
                                  Options &opts,
                                  llvm::function_ref<std::string(StringRef)> inDir,
                                  llvm::raw_ostream &err) {
  std::vector<loom::EmulatedLaunch> launches;
  FailureOr<OwningOpRef<ModuleOp>> host =
      loom::emulateGpuOnHost(gpu, map, launches);
  std::string error, lib = inDir("kernels.emu.so");
  if (failed(host) || failed(loom::lowerHostKernelsToLLVM(**host)) ||
      failed(loom::emitSharedObject(**host, lib, error, launches,
                                    opts.cudaEmulatorLib))) {
    err << "loomc: error: emulating the GPU kernels failed"
        << (error.empty() ? "" : ": " + error) << "\n";
    return failure();
  }
  SmallString<256> abs(lib);
  llvm::sys::fs::make_absolute(abs);
  auto out = mlir::openOutputFile(inDir("kernels.cubin"), &error);
  if (!out) {
    err << "loomc: error: " << error << "\n";
    return failure();
  }
  out->os() << "FAKECUBIN sm=" << parseCudaTarget(opts.target)
            << " lib=" << abs << "\n";
  for (const loom::EmulatedLaunch &l : launches)
    out->os() << "kernel " << l.name << " " << l.numParams << "\n";
  out->keep();
  return success();
}

/// --target: fuse, plan memory, make the kernels and write the artifact
/// (or print the IR of the phase --emit names).
int compileForTarget(ModuleOp module, Options &opts, bool writeArtifact,
                     llvm::raw_ostream &err) {
  bool stopAtPrep = opts.emit == "fuse" || opts.emit == "plan-memory";
  int sm = parseCudaTarget(opts.target);
  PassManager pm(module.getContext());
  loom::buildCodegenPreparationPipeline(pm, opts.emit == "fuse" ? "fuse" : "");
  if (failed(pm.run(module))) {
    err << "loomc: error: preparing the code failed\n";
    return 1;
  }
  auto printTo = [&](auto print) {
    std::string error;
    auto out = mlir::openOutputFile(opts.output, &error);
    if (!out) {
      err << "loomc: error: " << error << "\n";
      return 1;
    }
    print(out->os());
    out->os() << "\n";
    out->keep();
    return 0;
  };
  auto printOp = [&](Operation *op) {
    return printTo([&](llvm::raw_ostream &os) { op->print(os); });
  };
  if (stopAtPrep)
    return printOp(module);
  OwningOpRef<ModuleOp> kernels = loom::outlineKernels(module);
  bool hasKernels = !kernels->getBody()->empty();

  std::string error;
  SmallString<256> dir(opts.output), path;
  auto inDir = [&](StringRef name) {
    path = dir;
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  loom::PlanTarget target;
  loom::KernelInfoMap kernelInfo;
  // plan.json, final.mlir and the report, once the kernels are written.
  auto writeRest = [&](const loom::PlanTarget &target) {
    SmallString<256> source(opts.input);
    llvm::sys::fs::make_absolute(source);
    if (failed(loom::writePlan(module, inDir("plan.json"), target,
                               std::string(source), error))) {
      err << "loomc: error: " << error << "\n";
      return 1;
    }
    auto out = mlir::openOutputFile(inDir("final.mlir"), &error);
    if (!out) {
      err << "loomc: error: " << error << "\n";
      return 1;
    }
    module.print(out->os());
    out->keep();
    if (opts.report)
      printReport(module, sm ? &kernelInfo : nullptr, llvm::outs());
    return 0;
  };
  if (!sm) {
    target.kernelInfo = &kernelInfo;
    if (failed(loom::lowerKernelsToLLVM(*kernels, kernelInfo,
                                        opts.cpuParallelMinWork))) {
      err << "loomc: error: generating the kernels failed\n";
      return 1;
    }
    if (!writeArtifact)
      return printOp(*kernels);
    if (hasKernels &&
        failed(loom::emitSharedObject(*kernels, inDir("kernels.so"), error))) {
      err << "loomc: error: " << error << "\n";
      return 1;
    }
    if (hasKernels)
      target.kernels = "kernels.so";
  } else {
    target.target = "cuda";
    target.sm = sm;
    target.kernelInfo = &kernelInfo;
    FailureOr<OwningOpRef<ModuleOp>> gpu;
    if (succeeded(loom::bufferizeKernels(*kernels, /*deallocate=*/false)))
      gpu = loom::mapKernelsToGpu(*kernels, kernelInfo);
    if (failed(gpu)) {
      err << "loomc: error: mapping the kernels onto the GPU failed\n";
      return 1;
    }
    if (opts.emit == "kernels")
      return printOp(**gpu);
    if (!opts.cudaEmulatorLib.empty()) {
      if (!writeArtifact) {
        err << "loomc: error: --cuda-emulator-lib writes an artifact\n";
        return 2;
      }
      if (hasKernels && failed(emitEmulatedKernels(**gpu, kernelInfo, opts,
                                                   inDir, err)))
        return 1;
      if (hasKernels)
        target.kernels = "kernels.cubin";
      return writeRest(target);
    }
    if (failed(loom::lowerGpuToNVVM(**gpu))) {
      err << "loomc: error: lowering the GPU kernels to NVVM failed\n";
      return 1;
    }
    if (opts.emit == "nvvm")
      return printOp(**gpu);
    std::string ptx;
    if (hasKernels) {
      FailureOr<std::string> text = loom::translateToPtx(**gpu, sm, error);
      if (failed(text)) {
        err << "loomc: error: " << error << "\n";
        return 1;
      }
      ptx = std::move(*text);
    }
    if (opts.emit == "ptx")
      return printTo([&](llvm::raw_ostream &os) { os << ptx; });
    if (hasKernels) {
      auto out = mlir::openOutputFile(inDir("kernels.ptx"), &error);
      if (!out) {
        err << "loomc: error: " << error << "\n";
        return 1;
      }
      out->os() << ptx;
      out->keep();
      target.ptx = "kernels.ptx";
      std::string ptxas = loom::findPtxas();
      if (ptxas.empty()) {
        err << "loomc: warning: no ptxas (the CUDA toolkit's; set "
               "LOOM_PTXAS or CUDA_HOME): the artifact has PTX only, which "
               "the driver compiles when it loads\n";
      } else if (failed(loom::assembleCubin(ptx, sm, ptxas,
                                            inDir("kernels.cubin"), error))) {
        err << "loomc: error: " << error << "\n";
        return 1;
      } else {
        target.kernels = "kernels.cubin";
      }
    }
  }
  return writeRest(target);
}
} // namespace

int loom::loomcMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&opts.category});
  cl::ParseCommandLineOptions(
      argc, argv,
      "loomc: Loom's compiler driver\n\n"
      "  loomc MODEL.onnx|MODEL.json [--emit=mlir] [-o OUT.mlir] [--summary]\n"
      "  loomc MODEL [--train --loss=cross_entropy ...] --target=cpu|cuda:sm_90"
      " -o OUT.loom [--report]\n\n"
      "Imports the model into the loom dialect and prints it. Parameters are\n"
      "function arguments marked loom.param; their values are written to a\n"
      "safetensors file (see --params), never into the IR. --train builds the\n"
      "training step; --target compiles it to an artifact that loom-run\n"
      "runs on the CPU or an NVIDIA GPU. Mixed precision, remat, sharding and\n"
      "pipelining are not implemented yet.\n");

  llvm::raw_ostream &err = llvm::errs();
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
  bool trainingPhase = llvm::is_contained(loom::trainingPhases(),
                                          StringRef(opts.emit));
  bool cudaPhase = opts.emit == "nvvm" || opts.emit == "ptx";
  bool codegenPhase =
      llvm::is_contained(loom::codegenPhases(), StringRef(opts.emit)) ||
      opts.emit == "kernels" || cudaPhase;
  if (opts.emit != "mlir" && opts.emit != "import" && !trainingPhase &&
      !codegenPhase) {
    if (isPlannedPhase(opts.emit))
      err << "loomc: error: --emit=" << opts.emit
          << " is not implemented yet (implemented: mlir, loss, autodiff, "
          << "optimizer, fuse, plan-memory, kernels, nvvm, ptx)\n";
    else
      err << "loomc: error: unknown phase '" << opts.emit
          << "' for --emit (expected: mlir, loss, autodiff, optimizer, fuse, "
          << "plan-memory, kernels, nvvm or ptx)\n";
    return 2;
  }
  if (!opts.target.empty() && opts.target != "cpu" &&
      !parseCudaTarget(opts.target)) {
    if (StringRef(opts.target).starts_with("cuda"))
      err << "loomc: error: bad CUDA target '" << opts.target
          << "' (expected cuda or cuda:sm_NN with NN from 75 to 121, e.g. "
          << "cuda:sm_90 or cuda:sm_80)\n";
    else
      err << "loomc: error: unknown target '" << opts.target
          << "' (expected cpu or cuda:sm_NN)\n";
    return 2;
  }
  if (codegenPhase && opts.target.empty()) {
    err << "loomc: error: --emit=" << opts.emit
        << " is a code-generation phase: give --target=cpu or "
        << "--target=cuda:sm_NN\n";
    return 2;
  }
  if (cudaPhase && !parseCudaTarget(opts.target)) {
    err << "loomc: error: --emit=" << opts.emit
        << " is a phase of the CUDA target: give --target=cuda:sm_NN\n";
    return 2;
  }
  bool writeArtifact = !opts.target.empty() && !codegenPhase;
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
  if (opts.report && opts.target.empty()) {
    err << "loomc: error: --report needs --target\n";
    return 2;
  }
  bool runTraining = opts.train || trainingPhase;

  DialectRegistry registry;
  loom::registerCodegenDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
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

  if (runTraining) {
    loom::TrainingOptions t;
    t.loss = opts.loss;
    t.labels = opts.labels;
    t.output = opts.lossOutput;
    t.reduction = opts.reduction;
    t.classAxis = opts.classAxis;
    t.ignoreIndex = opts.ignoreIndex;
    t.labelsDtype = opts.labelsDtype;
    t.optimizer = opts.optimizer;
    t.lr = opts.lr;
    t.momentum = opts.momentum;
    t.beta1 = opts.beta1;
    t.beta2 = opts.beta2;
    t.eps = opts.eps;
    t.weightDecay = opts.weightDecay;
    t.clipNorm = opts.clipNorm;
    t.schedule = opts.schedule;
    t.warmupSteps = opts.warmupSteps;
    t.totalSteps = opts.totalSteps;
    t.minLrRatio = opts.minLrRatio;
    t.stopAfter = trainingPhase ? opts.emit : std::string("optimizer");
    // The model itself stays too (@predict), for predictions and accuracy.
    t.keepPredict = true;
    PassManager pm(&context);
    loom::buildTrainingPipeline(pm, t);
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
    return compileForTarget(*module, opts, writeArtifact, err);

  std::string error;
  auto out = mlir::openOutputFile(opts.output, &error);
  if (!out) {
    err << "loomc: error: " << error << "\n";
    return 1;
  }
  module->print(out->os());
  out->os() << "\n";
  out->keep();
  if (opts.summary)
    printSummary(*module, err);
  return 0;
}
