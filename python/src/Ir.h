//===- Ir.h - Parsed IR that Python walks, rewrites and runs passes on -*- C++ -*-===//
//
// loom.passes.parse(text) gives Python a module it can walk and rewrite
// (Ir.cpp) and run pass pipelines on in place; loom.passes.run on text is
// parse, run, print (Passes.cpp). Upstream MLIR's Python bindings are not
// packaged for LLVM 22 here (docs/python.md), so this is Loom's own, small
// binding: ops, values, attributes and types as their printed text.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PYTHON_IR_H
#define LOOM_PYTHON_IR_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/SourceMgr.h"

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

namespace loom::python {

/// A parsed module with its own context; the source text stays for the
/// diagnostics' line and column.
struct IrModule {
  std::unique_ptr<mlir::MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Ops erased through Python: handles to them raise.
  llvm::DenseSet<mlir::Operation *> erased;
  /// Pass pipelines run on the module in place: a handle made before the
  /// last one raises (the pipeline may have erased or replaced its op).
  unsigned generation = 0;
};

/// Parses `text` with every dialect Loom's tools load; null with the
/// diagnostics in `error`.
std::shared_ptr<IrModule> parseIr(const std::string &text, std::string &error);

/// Runs the textual pass pipeline `pipeline` on `m` in place; false with
/// the diagnostics in `error`.
bool runPipelineOn(IrModule &m, const std::string &pipeline,
                   std::string &error);

/// Raises loom.PassError(message).
[[noreturn]] void raisePassError(const std::string &message);

/// The classes Module, Operation and Value (Ir.cpp).
void registerIr(pybind11::module_ &m);

} // namespace loom::python

#endif // LOOM_PYTHON_IR_H
