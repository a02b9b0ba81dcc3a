//===- loom-opt.cpp - mlir-opt with Loom's dialect and passes -------------===//

#include "loom/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  loom::registerCodegenDialects(registry);
  loom::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Loom optimizer driver (loom dialect, Loom passes)\n",
      registry));
}
