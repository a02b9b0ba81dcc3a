//===- Passes.h - Loom's passes ---------------------------------*- C++ -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>

namespace loom {
#define GEN_PASS_DECL
#include "loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Passes.h.inc"

/// A byte count: digits with an optional K, M or G suffix (powers of
/// 1024), as loom-remat's memory-budget and loomc --memory-budget take it.
std::optional<int64_t> parseByteSize(llvm::StringRef text);
} // namespace loom

#endif // LOOM_TRANSFORMS_PASSES_H
