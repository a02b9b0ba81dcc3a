//===- Rules.h - What the interpreter's rules share -------------*- C++ -*-===//
//
// The rule type, the interpreter a rule may call back into, the helpers on
// shapes, indices and NaNs the rules share, and one function per family of
// rules that adds them to the table (ElementwiseRules.cpp, ...,
// CollectiveRules.cpp; Interpreter.cpp builds the table and runs it).
// Private to lib/Interp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERP_RULES_H
#define LOOM_LIB_INTERP_RULES_H

#include "loom/Interp/Interpreter.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace loom::interp {

//===----------------------------------------------------------------------===//
// Shapes and indices
//===----------------------------------------------------------------------===//

inline int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Row-major strides of `shape`.
inline llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// The multi-index of row-major position `linear` in `shape`.
inline void unravel(int64_t linear, llvm::ArrayRef<int64_t> shape,
                    llvm::SmallVectorImpl<int64_t> &index) {
  index.resize(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    index[i] = shape[i] == 0 ? 0 : linear % shape[i];
    linear = shape[i] == 0 ? 0 : linear / shape[i];
  }
}

inline std::string formatIndex(llvm::ArrayRef<int64_t> index) {
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(index))
    s += (i ? ", " : "") + std::to_string(v);
  return s + "]";
}

/// Splits `shape` around `axis` into (outer, axis size, inner).
struct AxisSplit {
  int64_t outer, size, inner;
  int64_t at(int64_t o, int64_t a, int64_t i) const {
    return (o * size + a) * inner + i;
  }
};
inline AxisSplit splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis) {
  return {product(shape.take_front(axis)), shape[axis],
          product(shape.drop_front(axis + 1))};
}

//===----------------------------------------------------------------------===//
// Element types and NaNs
//===----------------------------------------------------------------------===//

inline bool isFloat(mlir::Type type) {
  return llvm::isa<mlir::FloatType>(mlir::getElementTypeOrSelf(type));
}

/// NaN-propagating max/min (numpy's maximum/minimum, ONNX Max/Min).
inline double nanMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}
inline double nanMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return a < b ? a : b;
}

//===----------------------------------------------------------------------===//
// The rule table
//===----------------------------------------------------------------------===//

class Interpreter;

/// `v` rounded to `elementType` as the driver rounds every result (kept
/// as it is for floats when `keepF64`): for rules whose definition rounds
/// an intermediate value (a fused op's 16-bit logits).
double roundTo(double v, mlir::Type elementType, bool keepF64);

/// A rule reads `in` (one tensor per operand) and fills `out` (one tensor per
/// result, typed and sized already). It emits a diagnostic and fails on bad
/// data.
using Rule = std::function<mlir::LogicalResult(
    mlir::Operation *op, llvm::ArrayRef<const Tensor *> in,
    llvm::MutableArrayRef<Tensor> out, Interpreter &interp)>;

class Interpreter {
public:
  Interpreter(const Options &options) : options(options) {}
  mlir::FailureOr<std::vector<Tensor>> runFunc(mlir::func::FuncOp func,
                                               llvm::ArrayRef<Tensor> args);
  /// Runs the ops of `block` (ending in func.return or loom.yield) with
  /// `values` holding its arguments.
  mlir::FailureOr<std::vector<Tensor>>
  runBlock(mlir::Block &block, llvm::DenseMap<mlir::Value, Tensor> values);
  const Options &getOptions() const { return options; }

private:
  Options options;
  unsigned depth = 0;
};

/// The identity rule of loom.cast, loom.stop_gradient and loom.reshape
/// (ElementwiseRules.cpp).
mlir::LogicalResult copyRule(mlir::Operation *,
                             llvm::ArrayRef<const Tensor *> in,
                             llvm::MutableArrayRef<Tensor> out, Interpreter &);

/// Each adds the rules of one family to `t`, keyed by op name. The rules of
/// func.call and loom.fusion, which run a body, are Interpreter.cpp's.
void addElementwiseRules(llvm::StringMap<Rule> &t);
void addContractionRules(llvm::StringMap<Rule> &t);
void addReductionRules(llvm::StringMap<Rule> &t);
void addDataMovementRules(llvm::StringMap<Rule> &t);
void addNNRules(llvm::StringMap<Rule> &t);
void addAttentionRules(llvm::StringMap<Rule> &t);
void addLossRules(llvm::StringMap<Rule> &t);
void addCollectiveRules(llvm::StringMap<Rule> &t);

} // namespace loom::interp

#endif // LOOM_LIB_INTERP_RULES_H
