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
      cl::desc("Phase whose IR to print. Implemented: 'mlir' (alias "
               "'import'): the imported loom IR"),
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
  cl::opt<bool> summary{"summary",
                        cl::desc("Print a summary of the imported model "
                                 "(inputs, outputs, parameters, ops) to "
                                 "stderr"),
                        cl::cat(category)};
};

/// Phases DESIGN.md names that later issues implement: refused, not ignored.
bool isPlannedPhase(StringRef phase) {
  return llvm::is_contained({"autodiff", "optimizer", "mixed-precision",
                             "shard", "pipeline", "remat", "fuse", "bufferize",
                             "plan-memory", "codegen"},
                            phase);
}

std::string shapeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
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
  if (opts.emit != "mlir" && opts.emit != "import") {
    if (isPlannedPhase(opts.emit))
      err << "loomc: error: --emit=" << opts.emit
          << " is not implemented yet (only --emit=mlir is)\n";
    else
      err << "loomc: error: unknown phase '" << opts.emit
          << "' for --emit (expected: mlir)\n";
    return 2;
  }

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
