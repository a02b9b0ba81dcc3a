//===- InterpCoverageTest.cpp - Every loom op has an interpreter rule -----===//
//
// The reference interpreter is the oracle for every op; an op added to the
// dialect without a rule would make loom-interp fail on the first model that
// uses it. This test walks the ops the loaded dialect registers, so it fails
// as soon as such an op appears.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Interp/Interpreter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include <gtest/gtest.h>

namespace {

TEST(InterpCoverage, EveryLoomOpHasARule) {
  mlir::MLIRContext ctx;
  ctx.getOrLoadDialect<loom::LoomDialect>();
  ASSERT_NE(ctx.getLoadedDialect<loom::LoomDialect>(), nullptr);
  int numLoomOps = 0;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "loom")
      continue;
    ++numLoomOps;
    EXPECT_TRUE(loom::interp::hasRule(name.getStringRef()))
        << "loom-interp has no rule for " << name.getStringRef().str();
  }
  // Guards against a dialect that failed to register its ops at all.
  EXPECT_GE(numLoomOps, 49);
}

TEST(InterpCoverage, UnknownOpsHaveNoRule) {
  EXPECT_FALSE(loom::interp::hasRule("loom.no_such_op"));
  EXPECT_FALSE(loom::interp::hasRule("arith.addf"));
  EXPECT_TRUE(loom::interp::hasRule("func.return"));
  EXPECT_TRUE(loom::interp::hasRule("func.call"));
}

TEST(InterpCoverage, DropoutUniformIsTheDocumentedContract) {
  // Values from an independent Python implementation of the contract
  // (test/Interp/Inputs/ref.py: dropout_uniform).
  for (int64_t i = 0; i < 1000; ++i) {
    double u = loom::interp::dropoutUniform(7, 3, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  // The first output of the reference SplitMix64 generator seeded with 0.
  EXPECT_EQ(loom::interp::splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(loom::interp::dropoutUniform(7, 3, 0), 0.9812118411064148);
  EXPECT_EQ(loom::interp::dropoutUniform(7, 3, 1), 0.6235384941101074);
  EXPECT_EQ(loom::interp::dropoutUniform(7, 3, 2), 0.15947479009628296);
  EXPECT_EQ(loom::interp::dropoutUniform(-5, 2, 10), 0.7085349559783936);
}

} // namespace
