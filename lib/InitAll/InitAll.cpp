//===- InitAll.cpp - Registers everything Loom's tools know ---------------===//

#include "loom/InitAll.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/Transforms/Pipelines.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/Passes.h"

void loom::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
}

void loom::registerAllPasses() {
  // Upstream generic passes users combine with Loom's (canonicalize, cse,
  // inline, symbol-dce, ...).
  mlir::registerTransformsPasses();
  loom::registerLoomPasses();
  loom::registerTrainingPipeline();
}
