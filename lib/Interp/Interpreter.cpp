//===- Interpreter.cpp - Reference interpreter of the loom dialect --------===//
//
// One rule per op, kept in a table keyed by the op's name (so a test can check
// that every op the dialect registers has one). A rule reads its operands as
// doubles and fills its results, already sized to the result types; the
// driver then rounds every result element to its element type. Rules are
// plain loops over row-major indices: no tiling, no vectorization, no
// cleverness, because this is the oracle everything else is checked against.
//
// The rules live in one file per op family (Rules.h lists them). This file
// builds the table from them and holds the rules of func.call and
// loom.fusion (they run a body), the rounding, and the driver.
//
//===----------------------------------------------------------------------===//

#include "loom/Interp/Interpreter.h"

#include "Rules.h"
#include "SimulatedMesh.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loomrt/Random.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <optional>
#include <thread>

using namespace mlir;
using namespace loom::interp;

namespace {

//===----------------------------------------------------------------------===//
// Rounding to element types
//===----------------------------------------------------------------------===//

double roundToSemantics(double v, const llvm::fltSemantics &sem) {
  llvm::APFloat f(v);
  bool losesInfo = false;
  f.convert(sem, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

/// Integers: truncate toward zero, then wrap to the width (two's complement).
double roundToInteger(double v, unsigned width) {
  if (width == 1)
    return v != 0 ? 1 : 0;
  if (std::isnan(v))
    return 0;
  double t = std::trunc(v);
  // Out-of-range float-to-integer conversion is undefined; saturate rather
  // than invoke undefined behaviour in the interpreter itself.
  if (t >= 9223372036854775807.0)
    t = 9223372036854775807.0;
  if (t <= -9223372036854775808.0)
    t = -9223372036854775808.0;
  int64_t i = static_cast<int64_t>(t);
  if (width >= 64)
    return static_cast<double>(i);
  uint64_t mask = (uint64_t(1) << width) - 1;
  uint64_t u = static_cast<uint64_t>(i) & mask;
  if (u & (uint64_t(1) << (width - 1)))
    u |= ~mask; // sign-extend
  return static_cast<double>(static_cast<int64_t>(u));
}


void roundTensor(Tensor &t, bool keepF64) {
  Type elementType = t.type.getElementType();
  if (elementType.isF64() || (keepF64 && isa<FloatType>(elementType)))
    return;
  for (double &v : t.data)
    v = roundTo(v, elementType, keepF64);
}

//===----------------------------------------------------------------------===//
// func, and loom.fusion (a kernel's body runs like a function's)
//===----------------------------------------------------------------------===//

LogicalResult fusionRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &interp) {
  Block &body = cast<loom::FusionOp>(op).getBody().front();
  llvm::DenseMap<Value, Tensor> values;
  for (auto [arg, t] : llvm::zip(body.getArguments(), in))
    values[arg] = *t;
  FailureOr<std::vector<Tensor>> results =
      interp.runBlock(body, std::move(values));
  if (failed(results))
    return failure();
  for (auto [i, r] : llvm::enumerate(*results))
    out[i].data = std::move(r.data);
  return success();
}

LogicalResult callRule(Operation *op, ArrayRef<const Tensor *> in,
                       MutableArrayRef<Tensor> out, Interpreter &interp) {
  auto call = cast<func::CallOp>(op);
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      op, call.getCalleeAttr());
  if (!callee || callee.isExternal())
    return op->emitError("loom-interp: cannot find the body of callee @")
           << call.getCallee();
  SmallVector<Tensor> args;
  for (const Tensor *t : in)
    args.push_back(*t);
  FailureOr<std::vector<Tensor>> results = interp.runFunc(callee, args);
  if (failed(results))
    return op->emitError("loom-interp: call to @")
           << call.getCallee() << " failed";
  for (auto [i, r] : llvm::enumerate(*results))
    out[i].data = std::move(r.data);
  return success();
}

const llvm::StringMap<Rule> &rules() {
  static const llvm::StringMap<Rule> table = [] {
    llvm::StringMap<Rule> t;
    addElementwiseRules(t);
    addContractionRules(t);
    addReductionRules(t);
    addDataMovementRules(t);
    addNNRules(t);
    addAttentionRules(t);
    addLossRules(t);
    addCollectiveRules(t);
    // func (func.return is the terminator runFunc handles itself).
    t["func.call"] = callRule;
    t["loom.fusion"] = fusionRule;
    t["loom.yield"] = nullptr;
    t["func.return"] = nullptr;
    return t;
  }();
  return table;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// Calls deeper than this are taken for unbounded recursion.
constexpr unsigned kMaxCallDepth = 256;

} // namespace

double loom::interp::roundTo(double v, Type elementType, bool keepF64) {
  if (elementType.isF64())
    return v;
  if (auto intType = dyn_cast<IntegerType>(elementType))
    return roundToInteger(v, intType.getWidth());
  if (keepF64)
    return v;
  if (elementType.isF32())
    return static_cast<double>(static_cast<float>(v));
  if (elementType.isF16())
    return roundToSemantics(v, llvm::APFloat::IEEEhalf());
  if (elementType.isBF16())
    return roundToSemantics(v, llvm::APFloat::BFloat());
  return v; // Not a type the dialect allows; the verifier refuses it.
}

FailureOr<std::vector<Tensor>> Interpreter::runFunc(func::FuncOp func,
                                                    ArrayRef<Tensor> args) {
  if (func.isExternal())
    return func.emitError("loom-interp: @")
           << func.getSymName() << " has no body";
  if (args.size() != func.getNumArguments())
    return func.emitError("loom-interp: @")
           << func.getSymName() << " takes " << func.getNumArguments()
           << " arguments, " << args.size() << " given";
  if (depth >= kMaxCallDepth)
    return func.emitError("loom-interp: calls nested deeper than ")
           << kMaxCallDepth << " (unbounded recursion?)";
  if (!func.getBody().hasOneBlock())
    return func.emitError("loom-interp: @")
           << func.getSymName() << " has more than one block";

  llvm::DenseMap<Value, Tensor> values;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return func.emitError("loom-interp: argument ")
             << i << " has type " << arg.getType()
             << ", expected a statically shaped tensor";
    const Tensor &given = args[i];
    bool sameShape = given.type && given.type.getShape() == type.getShape();
    bool compatible =
        given.type && (given.type.getElementType() == type.getElementType() ||
                       (isFloat(given.type) && isFloat(type)));
    if (!sameShape || !compatible ||
        given.data.size() != static_cast<size_t>(type.getNumElements())) {
      InFlightDiagnostic diag = func.emitError("loom-interp: argument ")
                                << i << " of @" << func.getSymName()
                                << " expects " << type << ", given ";
      if (given.type)
        diag << given.type;
      else
        diag << "an untyped tensor";
      if (given.type &&
          given.data.size() != static_cast<size_t>(given.type.getNumElements()))
        diag << " with " << given.data.size() << " elements";
      return diag;
    }
    Tensor t{type, given.data};
    roundTensor(t, options.f64);
    values[arg] = std::move(t);
  }

  ++depth;
  llvm::scope_exit restoreDepth([&] { --depth; });
  return runBlock(func.getBody().front(), std::move(values));
}

FailureOr<std::vector<Tensor>>
Interpreter::runBlock(Block &block, llvm::DenseMap<Value, Tensor> values) {
  const llvm::StringMap<Rule> &table = rules();
  for (Operation &op : block) {
    SmallVector<const Tensor *> in;
    for (Value operand : op.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end())
        return op.emitError("loom-interp: operand has no value (defined "
                            "outside the function?)");
      in.push_back(&it->second);
    }
    if (isa<func::ReturnOp, loom::YieldOp>(op)) {
      std::vector<Tensor> results;
      for (const Tensor *t : in)
        results.push_back(*t);
      return results;
    }
    auto rule = table.find(op.getName().getStringRef());
    if (rule == table.end() || !rule->second)
      return op.emitError("loom-interp: no rule for op '")
             << op.getName() << "'";
    if (op.getNumRegions() != 0 && !isa<loom::FusionOp>(op))
      return op.emitError("loom-interp: ops with regions are not supported");

    SmallVector<Tensor> out;
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape())
        return op.emitError("loom-interp: result of type ")
               << result.getType() << " is not a statically shaped tensor";
      out.push_back(Tensor{type, std::vector<double>(type.getNumElements())});
    }
    if (failed(rule->second(&op, in, out, *this)))
      return failure();
    for (auto [result, tensor] : llvm::zip(op.getResults(), out)) {
      roundTensor(tensor, options.f64);
      values[result] = std::move(tensor);
    }
  }
  return block.getParentOp()->emitError(
      "loom-interp: the body does not end with a terminator");
}

FailureOr<std::vector<Tensor>> loom::interp::run(func::FuncOp func,
                                                 ArrayRef<Tensor> args,
                                                 const Options &options) {
  Interpreter interp(options);
  return interp.runFunc(func, args);
}

int64_t loom::interp::meshSize(func::FuncOp func) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return 1;
  FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
  int64_t n = 1;
  if (succeeded(mesh))
    for (const MeshAxis &a : *mesh)
      n *= a.size;
  return n;
}

int64_t loom::interp::meshCoordinate(func::FuncOp func, int64_t rank,
                                     StringRef axis) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return 0;
  FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
  return succeeded(mesh) ? SimulatedMesh(*mesh).coordinate(rank, axis) : 0;
}

FailureOr<std::vector<std::vector<Tensor>>>
loom::interp::runRanks(func::FuncOp func, ArrayRef<std::vector<Tensor>> args,
                       const Options &options) {
  auto module = func->getParentOfType<ModuleOp>();
  FailureOr<std::vector<MeshAxis>> mesh =
      module ? getMesh(module) : FailureOr<std::vector<MeshAxis>>{};
  if (failed(mesh))
    return failure();
  SimulatedMesh ranks(*mesh);
  if (static_cast<int64_t>(args.size()) != ranks.size())
    return func.emitError("loom-interp: the mesh has ")
           << ranks.size() << " ranks, " << args.size()
           << " argument lists given";
  std::vector<std::optional<std::vector<Tensor>>> results(args.size());
  auto runOne = [&](int64_t rank) {
    Options o = options;
    o.mesh = &ranks;
    o.rank = rank;
    Interpreter interp(o);
    FailureOr<std::vector<Tensor>> r = interp.runFunc(func, args[rank]);
    if (failed(r))
      ranks.abort();
    else
      results[rank] = std::move(*r);
  };
  std::vector<std::thread> threads;
  for (int64_t rank = 1; rank < ranks.size(); ++rank)
    threads.emplace_back(runOne, rank);
  runOne(0);
  for (std::thread &t : threads)
    t.join();
  std::vector<std::vector<Tensor>> all;
  for (auto &r : results) {
    if (!r)
      return failure();
    all.push_back(std::move(*r));
  }
  return all;
}

bool loom::interp::hasRule(llvm::StringRef opName) {
  if (opName == "func.return" || opName == "loom.yield")
    return true;
  auto it = rules().find(opName);
  return it != rules().end() && it->second;
}

uint64_t loom::interp::splitmix64(uint64_t x) { return loomrt::splitmix64(x); }

double loom::interp::dropoutUniform(int64_t seed, int64_t stream,
                                    int64_t index) {
  return loomrt::randomUniform(loomrt::randomStreamKey(seed, stream), index);
}

double loom::interp::normalDraw(int64_t seed, int64_t stream, int64_t index) {
  double u1 = dropoutUniform(seed, stream, 2 * index);
  double u2 = dropoutUniform(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) *
         std::cos(2.0 * M_PI * u2);
}
