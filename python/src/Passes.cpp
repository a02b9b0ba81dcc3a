//===- Passes.cpp - Pass pipelines on IR text, from Python ----------------===//
//
// loom.passes.run(ir, pipeline) parses `ir` with every dialect Loom's tools
// load, runs the textual pass pipeline `pipeline` (any pass or pipeline
// registered by loom::registerAllPasses, as loom-opt accepts them) and
// prints the result. Diagnostics are collected with their source location
// and raised as loom.PassError.
//
//===----------------------------------------------------------------------===//

#include "FdCapture.h"
#include "Module.h"

#include "loom/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace py = pybind11;

namespace {

[[noreturn]] void raisePassError(const std::string &message) {
  py::gil_scoped_acquire gil;
  py::object cls = py::module_::import("loom._errors").attr("PassError");
  PyErr_SetObject(cls.ptr(), py::str(message).ptr());
  throw py::error_already_set();
}

/// Parses `ir`, runs `pipeline` on it and prints it, or fails with the
/// diagnostics in `error`.
bool runPipeline(const std::string &ir, const std::string &pipeline,
                 std::string &result, std::string &error) {
  static std::once_flag registered;
  std::call_once(registered, [] { loom::registerAllPasses(); });

  mlir::DialectRegistry registry;
  loom::registerCodegenDialects(registry);
  mlir::MLIRContext context(registry);
  // Printing the diagnostics' source lines needs the buffer in a SourceMgr.
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(ir, "<ir>"),
                               llvm::SMLoc());
  llvm::raw_string_ostream errorStream(error);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, errorStream);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module) {
    if (error.empty())
      error = "cannot parse the IR";
    return false;
  }
  // "builtin.module(...)" names the anchor a bare list has anyway.
  mlir::PassManager pm(&context);
  llvm::StringRef text = llvm::StringRef(pipeline).trim();
  if (text.starts_with("builtin.module(") && text.ends_with(")"))
    text = text.drop_front(strlen("builtin.module(")).drop_back();
  mlir::LogicalResult parsed = mlir::parsePassPipeline(text, pm, errorStream);
  if (mlir::failed(parsed)) {
    if (error.empty())
      error = "cannot parse the pass pipeline '" + pipeline + "'";
    return false;
  }
  if (mlir::failed(pm.run(*module))) {
    if (error.empty())
      error = "the pass pipeline '" + pipeline + "' failed";
    return false;
  }
  llvm::raw_string_ostream out(result);
  module->print(out);
  return true;
}

std::string run(const std::string &ir, const std::string &pipeline) {
  std::string result, error;
  bool ok;
  {
    py::gil_scoped_release release;
    // Some messages (a bad pass option) go to stderr rather than to the
    // diagnostic handler: they join the error.
    std::lock_guard<std::mutex> lock(loom::python::captureMutex());
    std::fflush(stderr);
    loom::python::FdCapture captureErr(2);
    ok = runPipeline(ir, pipeline, result, error);
    std::fflush(stderr);
    std::string printed = captureErr.finish();
    if (!ok && !printed.empty())
      error = printed + error;
  }
  if (!ok)
    raisePassError(error);
  return result;
}

} // namespace

void loom::python::registerPasses(py::module_ &m) {
  m.def("run_passes", &run, py::arg("ir"), py::arg("pipeline"),
        "Runs the textual pass pipeline on the IR text; returns the new IR "
        "text. Raises loom.PassError with the diagnostics.");
}
