//===- Passes.cpp - Pass pipelines on IR text, from Python ----------------===//
//
// loom.passes.run(ir, pipeline) parses `ir` with every dialect Loom's tools
// load, runs the textual pass pipeline `pipeline` (any pass or pipeline
// registered by loom::registerAllPasses, as loom-opt accepts them) and
// prints the result; loom.passes.parse keeps the parsed module for Python
// to walk and rewrite (Ir.cpp) and to run pipelines on in place.
// Diagnostics are collected with their source location and raised as
// loom.PassError.
//
// loom.passes.run on text runs in a forked child process (runIsolated,
// FdCapture.h): a pass that crashes, aborts or calls exit() ends the child,
// and PassError says so with the output so far. A kept module
// (parse_ir, run_passes_on) lives in this process and cannot come back
// from a child, so its pipelines run here, unprotected (docs/python.md).
//
//===----------------------------------------------------------------------===//

#include "FdCapture.h"
#include "Ir.h"
#include "Module.h"

#include "loom/Driver/Loomc.h"
#include "loom/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>

namespace py = pybind11;

void loom::python::raisePassError(const std::string &message) {
  py::gil_scoped_acquire gil;
  py::object cls = py::module_::import("loom._errors").attr("PassError");
  PyErr_SetObject(cls.ptr(), py::str(message).ptr());
  throw py::error_already_set();
}

namespace {
/// Registers Loom's passes and pipelines with MLIR's registry, once (in
/// this process, before a child is forked: the child inherits them).
void registerPassesOnce() {
  static std::once_flag registered;
  std::call_once(registered, [] { loom::registerAllPasses(); });
}
} // namespace

std::shared_ptr<loom::python::IrModule>
loom::python::parseIr(const std::string &text, std::string &error) {
  registerPassesOnce();

  auto m = std::make_shared<IrModule>();
  mlir::DialectRegistry registry;
  loom::registerCodegenDialects(registry);
  m->context = std::make_unique<mlir::MLIRContext>(registry);
  // Printing the diagnostics' source lines needs the buffer in a SourceMgr.
  m->sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "<ir>"), llvm::SMLoc());
  llvm::raw_string_ostream errorStream(error);
  mlir::SourceMgrDiagnosticHandler handler(m->sourceMgr, m->context.get(),
                                           errorStream);
  m->module =
      mlir::parseSourceFile<mlir::ModuleOp>(m->sourceMgr, m->context.get());
  if (!m->module) {
    if (error.empty())
      error = "cannot parse the IR";
    return nullptr;
  }
  return m;
}

bool loom::python::runPipelineOn(IrModule &m, const std::string &pipeline,
                                 std::string &error) {
  llvm::raw_string_ostream errorStream(error);
  mlir::SourceMgrDiagnosticHandler handler(m.sourceMgr, m.context.get(),
                                           errorStream);
  // "builtin.module(...)" names the anchor a bare list has anyway.
  mlir::PassManager pm(m.context.get());
  llvm::StringRef text = llvm::StringRef(pipeline).trim();
  if (text.starts_with("builtin.module(") && text.ends_with(")"))
    text = text.drop_front(strlen("builtin.module(")).drop_back();
  if (mlir::failed(mlir::parsePassPipeline(text, pm, errorStream))) {
    if (error.empty())
      error = "cannot parse the pass pipeline '" + pipeline + "'";
    return false;
  }
  ++m.generation; // handles to the module's ops may dangle from here on
  if (mlir::failed(pm.run(*m.module))) {
    if (error.empty())
      error = "the pass pipeline '" + pipeline + "' failed";
    return false;
  }
  return true;
}

namespace {

/// Runs `work` without the GIL, with what MLIR prints on stderr (a bad
/// pass option goes there rather than to the diagnostic handler) put
/// before `error` if it fails; raises loom.PassError then.
void withCapturedErrors(const std::function<bool(std::string &)> &work) {
  std::string error;
  bool ok;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(loom::python::captureMutex());
    std::fflush(stderr);
    loom::python::FdCapture captureErr(2);
    ok = work(error);
    std::fflush(stderr);
    std::string printed = captureErr.finish();
    if (!ok && !printed.empty())
      error = printed + error;
  }
  if (!ok)
    loom::python::raisePassError(error);
}

/// Parses `ir`, runs `pipeline` on it and prints the result into `result`;
/// false with the diagnostics in `error` when that fails.
bool parseRunPrint(const std::string &ir, const std::string &pipeline,
                   std::string &result, std::string &error) {
  std::shared_ptr<loom::python::IrModule> m = loom::python::parseIr(ir, error);
  if (!m || !loom::python::runPipelineOn(*m, pipeline, error))
    return false;
  llvm::raw_string_ostream out(result);
  m->module->print(out);
  return true;
}

/// Raises loom.PassError for a pipeline that did not finish: `message`
/// says how it ended, then what it printed.
[[noreturn]] void raisePassCrash(const std::string &message, int signal) {
  py::object cls = py::module_::import("loom._errors").attr("PassError");
  py::object error =
      cls(py::str(message),
          py::arg("signal") =
              signal ? py::object(py::int_(signal)) : py::object(py::none()),
          py::arg("crashed") = true);
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

std::string run(const std::string &ir, const std::string &pipeline,
                bool isolated, const std::string &debugCrash) {
  std::string result;
  if (!isolated) {
    if (!debugCrash.empty())
      throw py::value_error("debug_crash needs isolated=True");
    withCapturedErrors([&](std::string &error) {
      return parseRunPrint(ir, pipeline, result, error);
    });
    return result;
  }
  loom::python::IsolatedRun run;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(loom::python::captureMutex());
    // Here rather than in each child (and under the lock: LLVM work).
    registerPassesOnce();
    std::fflush(stdout);
    std::fflush(stderr);
    run = loom::python::runIsolated(
        [&](std::string &out) {
          llvm::PrettyStackTraceFormat stackTrace(
              "loom.passes.run: running the pass pipeline '%s'",
              pipeline.c_str());
          if (!debugCrash.empty() && !loom::crashForTesting(debugCrash)) {
            out = "unknown debug_crash kind '" + debugCrash +
                  "' (expected abort, segv, fatal, internal or unreachable)";
            return 1;
          }
          std::string error;
          if (parseRunPrint(ir, pipeline, out, error))
            return 0;
          out = error;
          return 1;
        },
        "loom.passes.run", loom::python::pythonSignalRaised);
  }
  if (run.interrupted)
    throw py::error_already_set(); // what pythonSignalRaised raised
  loom::python::raisePendingInterrupt(run.signal);
  if (!run.finished) {
    std::string message = run.failure("the pass pipeline '" + pipeline + "'");
    if (!run.startError.empty()) // it did not run
      loom::python::raisePassError(message);
    llvm::StringRef printed = llvm::StringRef(run.err).rtrim();
    if (!printed.empty())
      message += "\n" + printed.str();
    raisePassCrash(message, run.signal);
  }
  if (run.code != 0) {
    // What MLIR printed on stderr (a bad pass option goes there), then the
    // diagnostics.
    loom::python::raisePassError(run.err + run.result);
  }
  return std::move(run.result);
}

std::shared_ptr<loom::python::IrModule> parse(const std::string &ir) {
  std::shared_ptr<loom::python::IrModule> m;
  withCapturedErrors([&](std::string &error) {
    m = loom::python::parseIr(ir, error);
    return m != nullptr;
  });
  return m;
}

void runInPlace(const std::shared_ptr<loom::python::IrModule> &m,
                const std::string &pipeline) {
  withCapturedErrors([&](std::string &error) {
    return loom::python::runPipelineOn(*m, pipeline, error);
  });
}

} // namespace

void loom::python::registerPasses(py::module_ &m) {
  m.def("run_passes", &run, py::arg("ir"), py::arg("pipeline"),
        py::arg("isolated") = true, py::arg("debug_crash") = "",
        "Runs the textual pass pipeline on the IR text, in a child process "
        "(isolated=True) or in this one; returns the new IR text. Raises "
        "loom.PassError with the diagnostics, or saying how the pipeline "
        "crashed. debug_crash (abort, segv, fatal, internal, unreachable) "
        "crashes the child that way before parsing: it exists to test the "
        "crash handling.");
  registerIr(m);
  m.def("parse_ir", &parse, py::arg("ir"),
        "Parses IR text into a Module; raises loom.PassError.");
  m.def("run_passes_on", &runInPlace, py::arg("module"), py::arg("pipeline"),
        "Runs the textual pass pipeline on a Module, in place.");
}
