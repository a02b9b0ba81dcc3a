//===- Interpreter.h - Reference interpreter of loom ops --------*- C++ -*-===//
//
// Runs a func.func of loom ops with plain loops. It is the oracle compiled
// code and passes are checked against: simple and obviously right beats fast.
// Values are held as doubles; after every op the result is rounded to the
// op's element type (f32, bf16, f16 by widening/narrowing) unless `f64` is
// set, in which case every float is kept in double precision.
//
// Rounding after each op: f32 through `(float)`; f16 and bf16 round to
// nearest even (directly from the double, one rounding); integers truncate
// toward zero and wrap to their width (two's complement); i1 is `x != 0`.
// An op computes in double precision from its (already rounded) operands and
// rounds once: a matmul or a softmax accumulates in double, more accurately
// than compiled code will, which is what an oracle should do.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERP_INTERPRETER_H
#define LOOM_INTERP_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace loom::interp {

/// A tensor value: its type and its elements, row-major, as doubles
/// (integers and booleans exactly; i64 beyond 2^53 is not supported).
struct Tensor {
  mlir::RankedTensorType type;
  std::vector<double> data;
};

class SimulatedMesh;

struct Options {
  /// Keep every float in double precision (for finite-difference checks).
  bool f64 = false;
  /// Set by runRanks for each rank's run: where the collectives meet, and
  /// this run's rank. Without a mesh, collectives see one rank (an error
  /// when the module's mesh has more).
  SimulatedMesh *mesh = nullptr;
  int64_t rank = 0;
};

/// Runs `func` on `args` (one per function argument, of the argument's
/// shape; element types may differ from float to float). Failures (an op
/// the interpreter does not know, an out-of-range index, ...) are emitted as
/// diagnostics at the failing op. `func.call` runs the callee, looked up in
/// the symbol table around `func`.
mlir::FailureOr<std::vector<Tensor>> run(mlir::func::FuncOp func,
                                         llvm::ArrayRef<Tensor> args,
                                         const Options &options = {});

/// Runs `func` once for every rank of its module's mesh (loom.mesh_axes,
/// loom.mesh_shape), each on a thread of its own with `args[r]` as its
/// arguments, so that the collectives combine the ranks' values as the
/// ranks of a distributed run would. Returns each rank's results. With no
/// mesh, one rank. A failing rank makes the others fail too.
mlir::FailureOr<std::vector<std::vector<Tensor>>>
runRanks(mlir::func::FuncOp func, llvm::ArrayRef<std::vector<Tensor>> args,
         const Options &options = {});

/// The number of ranks of `func`'s module's mesh (1 without one).
int64_t meshSize(mlir::func::FuncOp func);

/// Rank `rank`'s coordinate along `axis` of `func`'s module's mesh (ranks
/// are numbered row-major over the axes); 0 without one.
int64_t meshCoordinate(mlir::func::FuncOp func, int64_t rank,
                       llvm::StringRef axis);

/// True if the interpreter has a rule for the op called `opName` (as in
/// "loom.matmul"). An op without one fails with "loom-interp: no rule for
/// op 'NAME'".
bool hasRule(llvm::StringRef opName);

/// The standard SplitMix64 mixing function (Steele, Lea, Flood 2014):
///   z = x + 0x9E3779B97F4A7C15
///   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
///   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
///   return z ^ (z >> 31)
/// all in wrapping uint64 arithmetic.
uint64_t splitmix64(uint64_t x);

/// The dropout keep/drop decision shared by the interpreter and code
/// generation: element `index` of dropout `stream` under `seed` is dropped
/// when dropoutUniform(...) < ratio. This is a contract: every backend must
/// compute exactly
///   h = splitmix64(uint64(seed) ^ (uint64(stream) * 0x9E3779B97F4A7C15))
///   h = splitmix64(h + uint64(index))
///   u = double(h >> 40) * 2^-24          (in [0, 1), exact in f32 too)
/// where `index` is the row-major linear index of the element in the
/// dropout's operand, `seed` is the value of its seed operand, `stream` its
/// `stream` attribute, and `ratio` the f32 value of its `ratio` attribute.
/// A kept element becomes `x * (1 / (1 - ratio))`, the scale computed in
/// double and the product rounded to the element type.
double dropoutUniform(int64_t seed, int64_t stream, int64_t index);

/// A standard normal draw for element `index` of `loom.random` `stream`
/// (Box-Muller on two of the uniforms above):
///   sqrt(-2 log(1 - u(2 index))) * cos(2 pi u(2 index + 1)).
double normalDraw(int64_t seed, int64_t stream, int64_t index);

} // namespace loom::interp

#endif // LOOM_INTERP_INTERPRETER_H
