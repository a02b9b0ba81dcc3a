//===- Diagnostics.h - How Loom's tools print diagnostics -------*- C++ -*-===//

#ifndef LOOM_DRIVER_DIAGNOSTICS_H
#define LOOM_DRIVER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {
/// Prints diagnostics as `file: node 'NAME': error: message`, naming the
/// model node a location came from, and counts the errors.
class ToolDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  ToolDiagnosticHandler(mlir::MLIRContext *ctx, llvm::raw_ostream &os);
  unsigned getNumErrors() const { return numErrors; }

private:
  void print(mlir::Diagnostic &diag);
  llvm::raw_ostream &os;
  unsigned numErrors = 0;
};
} // namespace loom

#endif // LOOM_DRIVER_DIAGNOSTICS_H
