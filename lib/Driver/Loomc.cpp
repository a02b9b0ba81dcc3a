//===- Loomc.cpp - The loomc compiler driver ------------------------------===//
//
// loomc takes a model (ONNX or Loom JSON) and runs Loom's pipeline on it. The
// phases that exist today: import. `--emit=mlir` prints the imported IR and
// writes the parameter values beside it; the training, optimization and
// code-generation phases of DESIGN.md arrive with the issues that build them,
// and loomc refuses their flags rather than ignoring them.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Loomc.h"

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
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("Output file ('-' for stdout, the default)"),
      cl::value_desc("file"), cl::init("-"), cl::cat(category)};
  cl::opt<std::string> emit{
      "emit",
      cl::desc("Phase after which to print the IR: mlir (alias import), "
               "loss, autodiff, optimizer (the last three imply --train)"),
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
  cl::opt<bool> summary{"summary",
                        cl::desc("Print a summary of the imported model "
                                 "(inputs, outputs, parameters, ops) to "
                                 "stderr"),
                        cl::cat(category)};
};

/// Phases DESIGN.md names that later issues implement: refused, not ignored.
bool isPlannedPhase(StringRef phase) {
  return llvm::is_contained({"mixed-precision", "shard", "pipeline", "remat",
                             "fuse", "bufferize", "plan-memory", "codegen"},
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
    auto name = apply.getArgAttrOfType<StringAttr>(i, "loom.opt_state");
    if (!name)
      continue;
    auto type = cast<RankedTensorType>(apply.getArgumentTypes()[i]);
    size_t bytes = type.getNumElements() *
                   ((type.getElementTypeBitWidth() + 7) / 8);
    params.add(loom::ParameterTensor{name.getValue().str(), type,
                                     std::vector<uint8_t>(bytes, 0)});
  }
}

void printSummary(ModuleOp module, const loom::ParameterStore &params,
                  llvm::raw_ostream &os) {
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func)
    return;
  os << "== " << "@forward summary ==\n";
  int64_t numParams = 0, paramElems = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    Type type = func.getArgument(i).getType();
    if (auto name = func.getArgAttrOfType<StringAttr>(i, loom::kInputAttr)) {
      os << "  input  " << name.getValue() << " : " << shapeString(type) << "\n";
    } else if (func.getArgAttr(i, loom::kParamAttr)) {
      ++numParams;
      paramElems += cast<ShapedType>(type).getNumElements();
    }
  }
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, loom::kOutputAttr);
    os << "  output " << (name ? name.getValue() : StringRef("?")) << " : "
       << shapeString(func.getResultTypes()[i]) << "\n";
  }
  os << "  parameters: " << numParams << " tensors, " << paramElems
     << " values, " << params.getTotalBytes() << " bytes\n";
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
      "  loomc MODEL.onnx|MODEL.json [--emit=mlir] [-o OUT.mlir] [--summary]\n\n"
      "Imports the model into the loom dialect and prints it. Parameters are\n"
      "function arguments marked loom.param; their values are written to a\n"
      "safetensors file (see --params), never into the IR. Training, the\n"
      "optimizations and code generation are not implemented yet.\n");

  llvm::raw_ostream &err = llvm::errs();
  bool trainingPhase = llvm::is_contained(loom::trainingPhases(),
                                          StringRef(opts.emit));
  if (opts.emit != "mlir" && opts.emit != "import" && !trainingPhase) {
    if (isPlannedPhase(opts.emit))
      err << "loomc: error: --emit=" << opts.emit
          << " is not implemented yet (implemented: mlir, loss, autodiff, "
          << "optimizer)\n";
    else
      err << "loomc: error: unknown phase '" << opts.emit
          << "' for --emit (expected: mlir, loss, autodiff or optimizer)\n";
    return 2;
  }
  bool runTraining = opts.train || trainingPhase;

  DialectRegistry registry;
  loom::registerAllDialects(registry);
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
    t.stopAfter = trainingPhase ? opts.emit : std::string("optimizer");
    PassManager pm(&context);
    loom::buildTrainingPipeline(pm, t);
    if (failed(pm.run(*module))) {
      err << "loomc: error: building the training step failed\n";
      return 1;
    }
    addOptimizerState(*module, params);
  }

  std::string paramsPath = opts.params;
  if (paramsPath.empty() && opts.output != "-") {
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
    printSummary(*module, params, err);
  return 0;
}
