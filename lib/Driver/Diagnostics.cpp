//===- Diagnostics.cpp - How Loom's tools print diagnostics ---------------===//

#include "loom/Driver/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

using namespace mlir;

/// `file:line:col` or `file` plus, for named locations, `node 'NAME'`.
static void printLocation(Location loc, llvm::raw_ostream &os) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    printLocation(name.getChildLoc(), os);
    os << "node '" << name.getName().getValue() << "': ";
    return;
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue();
    if (file.getLine() != 0)
      os << ":" << file.getLine() << ":" << file.getColumn();
    os << ": ";
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (!fused.getLocations().empty())
      printLocation(fused.getLocations().front(), os);
    return;
  }
  if (auto callsite = dyn_cast<CallSiteLoc>(loc)) {
    printLocation(callsite.getCallee(), os);
    return;
  }
}

loom::ToolDiagnosticHandler::ToolDiagnosticHandler(MLIRContext *ctx,
                                                   llvm::raw_ostream &os)
    : ScopedDiagnosticHandler(ctx), os(os) {
  setHandler([this](Diagnostic &diag) {
    print(diag);
    return success();
  });
}

void loom::ToolDiagnosticHandler::print(Diagnostic &diag) {
  printLocation(diag.getLocation(), os);
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    ++numErrors;
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  }
  os << diag << "\n";
  for (Diagnostic &note : diag.getNotes()) {
    printLocation(note.getLocation(), os);
    os << "note: " << note << "\n";
  }
  os.flush();
}
