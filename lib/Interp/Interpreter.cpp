//===- Interpreter.cpp - Reference interpreter of the loom dialect --------===//
//
// One rule per op, kept in a table keyed by the op's name (so a test can check
// that every op the dialect registers has one). A rule reads its operands as
// doubles and fills its results, already sized to the result types; the
// driver then rounds every result element to its element type. Rules are
// plain loops over row-major indices: no tiling, no vectorization, no
// cleverness, because this is the oracle everything else is checked against.
//
//===----------------------------------------------------------------------===//

#include "loom/Interp/Interpreter.h"

#include "SimulatedMesh.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>

using namespace mlir;
using loom::interp::Options;
using loom::interp::Tensor;

namespace {

//===----------------------------------------------------------------------===//
// Shapes and indices
//===----------------------------------------------------------------------===//

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// The multi-index of row-major position `linear` in `shape`.
void unravel(int64_t linear, ArrayRef<int64_t> shape,
             SmallVectorImpl<int64_t> &index) {
  index.resize(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    index[i] = shape[i] == 0 ? 0 : linear % shape[i];
    linear = shape[i] == 0 ? 0 : linear / shape[i];
  }
}

std::string formatIndex(ArrayRef<int64_t> index) {
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(index))
    s += (i ? ", " : "") + std::to_string(v);
  return s + "]";
}

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

double roundTo(double v, Type elementType, bool keepF64) {
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

void roundTensor(Tensor &t, bool keepF64) {
  Type elementType = t.type.getElementType();
  if (elementType.isF64() || (keepF64 && isa<FloatType>(elementType)))
    return;
  for (double &v : t.data)
    v = roundTo(v, elementType, keepF64);
}

bool isFloat(Type type) { return isa<FloatType>(getElementTypeOrSelf(type)); }

/// NaN-propagating max/min (numpy's maximum/minimum, ONNX Max/Min).
double nanMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}
double nanMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return a < b ? a : b;
}

//===----------------------------------------------------------------------===//
// The rule table
//===----------------------------------------------------------------------===//

class Interpreter;

/// A rule reads `in` (one tensor per operand) and fills `out` (one tensor per
/// result, typed and sized already). It emits a diagnostic and fails on bad
/// data.
using Rule = std::function<LogicalResult(
    Operation *op, ArrayRef<const Tensor *> in, MutableArrayRef<Tensor> out,
    Interpreter &interp)>;

class Interpreter {
public:
  Interpreter(const Options &options) : options(options) {}
  FailureOr<std::vector<Tensor>> runFunc(func::FuncOp func,
                                         ArrayRef<Tensor> args);
  /// Runs the ops of `block` (ending in func.return or loom.yield) with
  /// `values` holding its arguments.
  FailureOr<std::vector<Tensor>> runBlock(Block &block,
                                          llvm::DenseMap<Value, Tensor> values);
  const Options &getOptions() const { return options; }

private:
  Options options;
  unsigned depth = 0;
};

const llvm::StringMap<Rule> &rules();

//===----------------------------------------------------------------------===//
// Elementwise rules
//===----------------------------------------------------------------------===//

Rule unary(std::function<double(double)> f) {
  return [f](Operation *, ArrayRef<const Tensor *> in,
             MutableArrayRef<Tensor> out, Interpreter &) {
    for (size_t i = 0; i < out[0].data.size(); ++i)
      out[0].data[i] = f(in[0]->data[i]);
    return success();
  };
}

Rule binary(std::function<double(double, double)> f) {
  return [f](Operation *, ArrayRef<const Tensor *> in,
             MutableArrayRef<Tensor> out, Interpreter &) {
    for (size_t i = 0; i < out[0].data.size(); ++i)
      out[0].data[i] = f(in[0]->data[i], in[1]->data[i]);
    return success();
  };
}

LogicalResult divRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  bool integer = !isFloat(op->getResult(0).getType());
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    double x = in[0]->data[i], y = in[1]->data[i];
    if (integer) {
      if (y == 0) {
        SmallVector<int64_t> index;
        unravel(i, out[0].type.getShape(), index);
        return op->emitError("integer division by zero at element ")
               << formatIndex(index);
      }
      out[0].data[i] = std::trunc(x / y);
    } else {
      out[0].data[i] = x / y;
    }
  }
  return success();
}

double gelu(double x, loom::GeluApproximation approximation) {
  if (approximation == loom::GeluApproximation::Tanh) {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

LogicalResult geluRule(Operation *op, ArrayRef<const Tensor *> in,
                       MutableArrayRef<Tensor> out, Interpreter &) {
  auto approximation = cast<loom::GeluOp>(op).getApproximate();
  for (size_t i = 0; i < out[0].data.size(); ++i)
    out[0].data[i] = gelu(in[0]->data[i], approximation);
  return success();
}

LogicalResult selectRule(Operation *, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  for (size_t i = 0; i < out[0].data.size(); ++i)
    out[0].data[i] = in[0]->data[i] != 0 ? in[1]->data[i] : in[2]->data[i];
  return success();
}

LogicalResult compareRule(Operation *op, ArrayRef<const Tensor *> in,
                          MutableArrayRef<Tensor> out, Interpreter &) {
  loom::ComparePredicate predicate = cast<loom::CompareOp>(op).getPredicate();
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    // C++ comparisons of doubles are ordered: false with NaN except !=.
    double a = in[0]->data[i], b = in[1]->data[i];
    bool r = false;
    switch (predicate) {
    case loom::ComparePredicate::EQ:
      r = a == b;
      break;
    case loom::ComparePredicate::NE:
      r = a != b;
      break;
    case loom::ComparePredicate::LT:
      r = a < b;
      break;
    case loom::ComparePredicate::LE:
      r = a <= b;
      break;
    case loom::ComparePredicate::GT:
      r = a > b;
      break;
    case loom::ComparePredicate::GE:
      r = a >= b;
      break;
    }
    out[0].data[i] = r ? 1 : 0;
  }
  return success();
}

/// Identity: cast's conversion is the rounding every result gets (float to
/// float rounds to nearest even, float to integer truncates, to i1 is != 0).
LogicalResult copyRule(Operation *, ArrayRef<const Tensor *> in,
                       MutableArrayRef<Tensor> out, Interpreter &) {
  out[0].data = in[0]->data;
  return success();
}

LogicalResult constantRule(Operation *op, ArrayRef<const Tensor *>,
                           MutableArrayRef<Tensor> out, Interpreter &) {
  auto attr =
      dyn_cast<DenseElementsAttr>(cast<loom::ConstantOp>(op).getValue());
  if (!attr)
    return op->emitError("loom-interp: constant is not a dense elements "
                         "attribute");
  std::vector<double> &data = out[0].data;
  Type elementType = attr.getElementType();
  size_t i = 0;
  if (isa<FloatType>(elementType)) {
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat d = v;
      bool losesInfo = false;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      data[i++] = d.convertToDouble();
    }
  } else if (auto intType = dyn_cast<IntegerType>(elementType)) {
    for (const APInt &v : attr.getValues<APInt>())
      data[i++] = intType.getWidth() == 1 ? double(v.getBoolValue())
                                          : double(v.getSExtValue());
  } else {
    return op->emitError("loom-interp: constant of element type ")
           << elementType << " is not supported";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult matmulRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  auto mm = cast<loom::MatmulOp>(op);
  bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
  ArrayRef<int64_t> ls = in[0]->type.getShape(), rs = in[1]->type.getShape();
  int64_t rank = ls.size();
  int64_t M = ta ? ls[rank - 1] : ls[rank - 2];
  int64_t K = ta ? ls[rank - 2] : ls[rank - 1];
  int64_t N = tb ? rs[rs.size() - 2] : rs[rs.size() - 1];
  int64_t batch = product(ls.drop_back(2));
  bool sharedRhs = rs.size() == 2 && rank != 2;
  const std::vector<double> &A = in[0]->data, &B = in[1]->data;
  const std::vector<double> *bias = in.size() > 2 ? &in[2]->data : nullptr;
  std::vector<double> &C = out[0].data;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t aBase = b * M * K, bBase = sharedRhs ? 0 : b * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double sum = bias ? (*bias)[n] : 0;
        for (int64_t k = 0; k < K; ++k) {
          double a = A[aBase + (ta ? k * M + m : m * K + k)];
          double w = B[bBase + (tb ? n * K + k : k * N + n)];
          sum += a * w;
        }
        C[(b * M + m) * N + n] = sum;
      }
  }
  return success();
}

/// An activation of a convolution: its NCHW sizes and where element (n, c,
/// y, x) lies, in NCHW or (channels-last convolutions) NHWC.
struct Activation {
  int64_t N, C, H, W;
  bool channelsLast;
  Activation(ArrayRef<int64_t> s, bool channelsLast)
      : N(s[0]), C(channelsLast ? s[3] : s[1]), H(channelsLast ? s[1] : s[2]),
        W(channelsLast ? s[2] : s[3]), channelsLast(channelsLast) {}
  int64_t at(int64_t n, int64_t c, int64_t y, int64_t x) const {
    return channelsLast ? ((n * H + y) * W + x) * C + c
                        : ((n * C + c) * H + y) * W + x;
  }
};

LogicalResult conv2dRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  auto conv = cast<loom::Conv2DOp>(op);
  ArrayRef<int64_t> fs = in[1]->type.getShape();
  ArrayRef<int64_t> strides = conv.getStrides(), pad = conv.getPadding(),
                    dil = conv.getDilations();
  int64_t groups = conv.getGroups();
  Activation X(in[0]->type.getShape(), conv.getChannelsLast()),
      Y(out[0].type.getShape(), conv.getChannelsLast());
  int64_t N = X.N, H = X.H, W = X.W;
  int64_t O = fs[0], CG = fs[1], KH = fs[2], KW = fs[3];
  int64_t OH = Y.H, OW = Y.W;
  int64_t OG = O / groups;
  const std::vector<double> &XD = in[0]->data, &F = in[1]->data;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / OG;
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double sum = 0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t i = 0; i < KH; ++i) {
              int64_t iy = y * strides[0] + i * dil[0] - pad[0];
              if (iy < 0 || iy >= H)
                continue;
              for (int64_t j = 0; j < KW; ++j) {
                int64_t ix = x * strides[1] + j * dil[1] - pad[1];
                if (ix < 0 || ix >= W)
                  continue;
                sum += XD[X.at(n, g * CG + c, iy, ix)] *
                       F[((o * CG + c) * KH + i) * KW + j];
              }
            }
          out[0].data[Y.at(n, o, y, x)] = sum;
        }
    }
  return success();
}

/// The adjoint of conv2d in its input: every product conv2d would form is
/// sent back to the input position it read.
LogicalResult conv2dInputGradRule(Operation *op, ArrayRef<const Tensor *> in,
                                  MutableArrayRef<Tensor> out, Interpreter &) {
  auto conv = cast<loom::Conv2DInputGradOp>(op);
  ArrayRef<int64_t> fs = in[1]->type.getShape();
  ArrayRef<int64_t> strides = conv.getStrides(), pad = conv.getPadding(),
                    dil = conv.getDilations();
  int64_t groups = conv.getGroups();
  Activation DYA(in[0]->type.getShape(), conv.getChannelsLast()),
      DXA(out[0].type.getShape(), conv.getChannelsLast());
  int64_t N = DYA.N, O = DYA.C, OH = DYA.H, OW = DYA.W;
  int64_t CG = fs[1], KH = fs[2], KW = fs[3];
  int64_t H = DXA.H, W = DXA.W;
  int64_t OG = O / groups;
  const std::vector<double> &DY = in[0]->data, &F = in[1]->data;
  std::vector<double> &DX = out[0].data;
  std::fill(DX.begin(), DX.end(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / OG;
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double dy = DY[DYA.at(n, o, y, x)];
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t i = 0; i < KH; ++i) {
              int64_t iy = y * strides[0] + i * dil[0] - pad[0];
              if (iy < 0 || iy >= H)
                continue;
              for (int64_t j = 0; j < KW; ++j) {
                int64_t ix = x * strides[1] + j * dil[1] - pad[1];
                if (ix < 0 || ix >= W)
                  continue;
                DX[DXA.at(n, g * CG + c, iy, ix)] +=
                    dy * F[((o * CG + c) * KH + i) * KW + j];
              }
            }
        }
    }
  return success();
}

LogicalResult conv2dFilterGradRule(Operation *op, ArrayRef<const Tensor *> in,
                                   MutableArrayRef<Tensor> out, Interpreter &) {
  auto conv = cast<loom::Conv2DFilterGradOp>(op);
  ArrayRef<int64_t> fs = out[0].type.getShape();
  ArrayRef<int64_t> strides = conv.getStrides(), pad = conv.getPadding(),
                    dil = conv.getDilations();
  int64_t groups = conv.getGroups();
  Activation X(in[0]->type.getShape(), conv.getChannelsLast()),
      DYA(in[1]->type.getShape(), conv.getChannelsLast());
  int64_t N = X.N, H = X.H, W = X.W;
  int64_t O = DYA.C, OH = DYA.H, OW = DYA.W;
  int64_t CG = fs[1], KH = fs[2], KW = fs[3];
  int64_t OG = O / groups;
  const std::vector<double> &XD = in[0]->data, &DY = in[1]->data;
  for (int64_t o = 0; o < O; ++o) {
    int64_t g = o / OG;
    for (int64_t c = 0; c < CG; ++c)
      for (int64_t i = 0; i < KH; ++i)
        for (int64_t j = 0; j < KW; ++j) {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t y = 0; y < OH; ++y) {
              int64_t iy = y * strides[0] + i * dil[0] - pad[0];
              if (iy < 0 || iy >= H)
                continue;
              for (int64_t x = 0; x < OW; ++x) {
                int64_t ix = x * strides[1] + j * dil[1] - pad[1];
                if (ix < 0 || ix >= W)
                  continue;
                sum += DY[DYA.at(n, o, y, x)] * XD[X.at(n, g * CG + c, iy, ix)];
              }
            }
          out[0].data[((o * CG + c) * KH + i) * KW + j] = sum;
        }
  }
  return success();
}

/// Calls `fn(colsIndex, xIndex)` for every entry of im2col's `[C*KH*KW,
/// N*OH*OW]` matrix that reads the image (not the padding), row by row.
template <typename Op, typename Fn>
void forEachIm2ColEntry(Op op, ArrayRef<int64_t> xs, Fn fn) {
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(),
                    pad = op.getPadding(), dil = op.getDilations();
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t OH = (H + pad[0] + pad[2] - (k[0] - 1) * dil[0] - 1) / s[0] + 1;
  int64_t OW = (W + pad[1] + pad[3] - (k[1] - 1) * dil[1] - 1) / s[1] + 1;
  int64_t cols = N * OH * OW;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < k[0]; ++i)
      for (int64_t j = 0; j < k[1]; ++j) {
        int64_t row = (c * k[0] + i) * k[1] + j;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t y = 0; y < OH; ++y) {
            int64_t iy = y * s[0] + i * dil[0] - pad[0];
            if (iy < 0 || iy >= H)
              continue;
            for (int64_t x = 0; x < OW; ++x) {
              int64_t ix = x * s[1] + j * dil[1] - pad[1];
              if (ix < 0 || ix >= W)
                continue;
              fn(row * cols + (n * OH + y) * OW + x,
                 ((n * C + c) * H + iy) * W + ix);
            }
          }
      }
}

LogicalResult im2colRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  std::vector<double> &cols = out[0].data;
  std::fill(cols.begin(), cols.end(), 0.0);
  const std::vector<double> &x = in[0]->data;
  forEachIm2ColEntry(cast<loom::Im2ColOp>(op), in[0]->type.getShape(),
                     [&](int64_t ci, int64_t xi) { cols[ci] = x[xi]; });
  return success();
}

LogicalResult col2imRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  std::vector<double> &x = out[0].data;
  std::fill(x.begin(), x.end(), 0.0);
  const std::vector<double> &cols = in[0]->data;
  forEachIm2ColEntry(cast<loom::Col2ImOp>(op), out[0].type.getShape(),
                     [&](int64_t ci, int64_t xi) { x[xi] += cols[ci]; });
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Max, Min, Mean };

Rule reduce(ReduceKind kind) {
  return [kind](Operation *op, ArrayRef<const Tensor *> in,
                MutableArrayRef<Tensor> out, Interpreter &) -> LogicalResult {
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    ArrayRef<int64_t> xs = in[0]->type.getShape();
    SmallVector<bool> reduced(xs.size(), false);
    int64_t count = 1;
    for (int64_t d : dims) {
      reduced[d] = true;
      count *= xs[d];
    }
    // The result's shape with reduced dims kept as size 1, whatever
    // keep_dims says: both layouts are the same row-major order.
    SmallVector<int64_t> keptShape(xs);
    for (int64_t d : dims)
      keptShape[d] = 1;
    SmallVector<int64_t> keptStrides = stridesOf(keptShape);
    double init = 0;
    if (kind == ReduceKind::Max)
      init = -std::numeric_limits<double>::infinity();
    if (kind == ReduceKind::Min)
      init = std::numeric_limits<double>::infinity();
    std::vector<double> &y = out[0].data;
    std::fill(y.begin(), y.end(), init);
    SmallVector<int64_t> index;
    for (size_t i = 0; i < in[0]->data.size(); ++i) {
      unravel(i, xs, index);
      int64_t o = 0;
      for (size_t d = 0; d < xs.size(); ++d)
        o += (reduced[d] ? 0 : index[d]) * keptStrides[d];
      double v = in[0]->data[i];
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
        y[o] += v;
        break;
      case ReduceKind::Max:
        y[o] = nanMax(y[o], v);
        break;
      case ReduceKind::Min:
        y[o] = nanMin(y[o], v);
        break;
      }
    }
    if (kind == ReduceKind::Mean)
      for (double &v : y)
        v = count == 0 ? std::numeric_limits<double>::quiet_NaN() : v / count;
    return success();
  };
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult broadcastRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  ArrayRef<int64_t> dims = cast<loom::BroadcastInDimOp>(op).getDims();
  ArrayRef<int64_t> xs = in[0]->type.getShape(), ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(xs), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      src += (xs[d] == 1 ? 0 : index[dims[d]]) * xStrides[d];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult transposeRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  ArrayRef<int64_t> perm = cast<loom::TransposeOp>(op).getPerm();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(in[0]->type.getShape()), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      src += index[d] * xStrides[perm[d]];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult sliceRule(Operation *op, ArrayRef<const Tensor *> in,
                        MutableArrayRef<Tensor> out, Interpreter &) {
  auto slice = cast<loom::SliceOp>(op);
  ArrayRef<int64_t> start = slice.getStart(), stride = slice.getStride();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(in[0]->type.getShape()), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      src += (start[d] + index[d] * stride[d]) * xStrides[d];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult concatRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t dim = cast<loom::ConcatOp>(op).getDim();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  int64_t outer = product(ys.take_front(dim));
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor *t : in) {
      int64_t block = product(t->type.getShape().drop_front(dim));
      for (int64_t k = 0; k < block; ++k)
        out[0].data[pos++] = t->data[o * block + k];
    }
  return success();
}

LogicalResult gatherRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t axis = cast<loom::GatherOp>(op).getAxis();
  ArrayRef<int64_t> ts = in[0]->type.getShape();
  int64_t outer = product(ts.take_front(axis));
  int64_t axisSize = ts[axis];
  int64_t inner = product(ts.drop_front(axis + 1));
  int64_t numIndices = in[1]->data.size();
  for (int64_t k = 0; k < numIndices; ++k) {
    int64_t index = static_cast<int64_t>(in[1]->data[k]);
    int64_t wrapped = index < 0 ? index + axisSize : index;
    if (wrapped < 0 || wrapped >= axisSize) {
      SmallVector<int64_t> position;
      unravel(k, in[1]->type.getShape(), position);
      return op->emitError("gather index ")
             << index << " (at position " << formatIndex(position)
             << " of the indices) is out of range for dimension " << axis
             << " of size " << axisSize;
    }
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < numIndices; ++k) {
      int64_t index = static_cast<int64_t>(in[1]->data[k]);
      if (index < 0)
        index += axisSize;
      for (int64_t s = 0; s < inner; ++s)
        out[0].data[(o * numIndices + k) * inner + s] =
            in[0]->data[(o * axisSize + index) * inner + s];
    }
  return success();
}

LogicalResult scatterAddRule(Operation *op, ArrayRef<const Tensor *> in,
                             MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t axis = cast<loom::ScatterAddOp>(op).getAxis();
  ArrayRef<int64_t> rs = out[0].type.getShape();
  int64_t outer = product(rs.take_front(axis));
  int64_t axisSize = rs[axis];
  int64_t inner = product(rs.drop_front(axis + 1));
  int64_t numIndices = in[1]->data.size();
  for (int64_t k = 0; k < numIndices; ++k) {
    int64_t index = static_cast<int64_t>(in[1]->data[k]);
    int64_t wrapped = index < 0 ? index + axisSize : index;
    if (wrapped < 0 || wrapped >= axisSize) {
      SmallVector<int64_t> position;
      unravel(k, in[1]->type.getShape(), position);
      return op->emitError("scatter_add index ")
             << index << " (at position " << formatIndex(position)
             << " of the indices) is out of range for dimension " << axis
             << " of size " << axisSize;
    }
  }
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < numIndices; ++k) {
      int64_t index = static_cast<int64_t>(in[1]->data[k]);
      if (index < 0)
        index += axisSize;
      for (int64_t s = 0; s < inner; ++s)
        out[0].data[(o * axisSize + index) * inner + s] +=
            in[0]->data[(o * numIndices + k) * inner + s];
    }
  return success();
}

LogicalResult padRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  auto pad = cast<loom::PadOp>(op);
  ArrayRef<int64_t> low = pad.getLow(), interior = pad.getInterior();
  ArrayRef<int64_t> xs = in[0]->type.getShape();
  SmallVector<int64_t> yStrides = stridesOf(out[0].type.getShape()), index;
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (size_t i = 0; i < in[0]->data.size(); ++i) {
    unravel(i, xs, index);
    int64_t dst = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      dst += (low[d] + index[d] * (interior[d] + 1)) * yStrides[d];
    out[0].data[dst] = in[0]->data[i];
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Composite neural-network ops
//===----------------------------------------------------------------------===//

/// Splits `shape` around `axis` into (outer, axis size, inner).
struct AxisSplit {
  int64_t outer, size, inner;
  int64_t at(int64_t o, int64_t a, int64_t i) const {
    return (o * size + a) * inner + i;
  }
};
AxisSplit splitAt(ArrayRef<int64_t> shape, int64_t axis) {
  return {product(shape.take_front(axis)), shape[axis],
          product(shape.drop_front(axis + 1))};
}

Rule softmaxLike(bool logSoftmax) {
  return [logSoftmax](Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    AxisSplit s = splitAt(in[0]->type.getShape(), axis);
    const std::vector<double> &x = in[0]->data;
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t a = 0; a < s.size; ++a)
          mx = nanMax(mx, x[s.at(o, a, i)]);
        double sum = 0;
        for (int64_t a = 0; a < s.size; ++a)
          sum += std::exp(x[s.at(o, a, i)] - mx);
        for (int64_t a = 0; a < s.size; ++a) {
          double v = x[s.at(o, a, i)] - mx;
          out[0].data[s.at(o, a, i)] =
              logSoftmax ? v - std::log(sum) : std::exp(v) / sum;
        }
      }
    return success();
  };
}

double epsilonOf(Operation *op) {
  return op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble();
}

LogicalResult layerNormRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  auto ln = cast<loom::LayerNormOp>(op);
  ArrayRef<int64_t> xs = in[0]->type.getShape();
  int64_t axis = ln.getAxis();
  int64_t outer = product(xs.take_front(axis)),
          inner = product(xs.drop_front(axis));
  double eps = epsilonOf(op);
  const std::vector<double> &x = in[0]->data, &g = in[1]->data,
                            &b = in[2]->data;
  for (int64_t o = 0; o < outer; ++o) {
    const double *row = &x[o * inner];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j)
      mean += row[j];
    mean /= inner;
    for (int64_t j = 0; j < inner; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= inner;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j)
      out[0].data[o * inner + j] = (row[j] - mean) * inv * g[j] + b[j];
  }
  return success();
}

LogicalResult rmsNormRule(Operation *op, ArrayRef<const Tensor *> in,
                          MutableArrayRef<Tensor> out, Interpreter &) {
  auto rn = cast<loom::RmsNormOp>(op);
  ArrayRef<int64_t> xs = in[0]->type.getShape();
  int64_t axis = rn.getAxis();
  int64_t outer = product(xs.take_front(axis)),
          inner = product(xs.drop_front(axis));
  double eps = epsilonOf(op);
  const std::vector<double> &x = in[0]->data, &g = in[1]->data;
  for (int64_t o = 0; o < outer; ++o) {
    const double *row = &x[o * inner];
    double ms = 0;
    for (int64_t j = 0; j < inner; ++j)
      ms += row[j] * row[j];
    ms /= inner;
    double inv = 1.0 / std::sqrt(ms + eps);
    for (int64_t j = 0; j < inner; ++j)
      out[0].data[o * inner + j] = row[j] * inv * g[j];
  }
  return success();
}

LogicalResult batchNormRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  AxisSplit s = splitAt(in[0]->type.getShape(), 1);
  double eps = epsilonOf(op);
  const std::vector<double> &x = in[0]->data, &scale = in[1]->data,
                            &bias = in[2]->data, &mean = in[3]->data,
                            &var = in[4]->data;
  for (int64_t n = 0; n < s.outer; ++n)
    for (int64_t c = 0; c < s.size; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t k = s.at(n, c, i);
        out[0].data[k] =
            (x[k] - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + bias[c];
      }
  return success();
}

LogicalResult batchNormStatsRule(Operation *, ArrayRef<const Tensor *> in,
                                 MutableArrayRef<Tensor> out, Interpreter &) {
  AxisSplit s = splitAt(in[0]->type.getShape(), 1);
  const std::vector<double> &x = in[0]->data;
  double count = static_cast<double>(s.outer * s.inner);
  for (int64_t c = 0; c < s.size; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < s.outer; ++n)
      for (int64_t i = 0; i < s.inner; ++i)
        mean += x[s.at(n, c, i)];
    mean /= count;
    for (int64_t n = 0; n < s.outer; ++n)
      for (int64_t i = 0; i < s.inner; ++i) {
        double d = x[s.at(n, c, i)] - mean;
        var += d * d;
      }
    out[0].data[c] = mean;
    out[1].data[c] = var / count;
  }
  return success();
}

enum class PoolKind { Max, Avg, Argmax };

/// Max and average pooling, and the flat input index of each window's
/// maximum (the first one in row-major window order among equals).
Rule pool(PoolKind kind) {
  return [kind](Operation *op, ArrayRef<const Tensor *> in,
                MutableArrayRef<Tensor> out, Interpreter &) {
    bool isMax = kind != PoolKind::Avg;
    auto kernel = op->getAttrOfType<DenseI64ArrayAttr>("kernel").asArrayRef();
    auto strides = op->getAttrOfType<DenseI64ArrayAttr>("strides").asArrayRef();
    auto pad = op->getAttrOfType<DenseI64ArrayAttr>("padding").asArrayRef();
    bool countPad = op->hasAttr("count_include_pad");
    ArrayRef<int64_t> xs = in[0]->type.getShape(), ys = out[0].type.getShape();
    int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
    const std::vector<double> &X = in[0]->data;
    for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double acc = isMax ? -std::numeric_limits<double>::infinity() : 0;
          int64_t count = 0, argmax = -1;
          for (int64_t i = 0; i < kernel[0]; ++i) {
            int64_t iy = y * strides[0] + i - pad[0];
            if (iy < 0 || iy >= H)
              continue;
            for (int64_t j = 0; j < kernel[1]; ++j) {
              int64_t ix = x * strides[1] + j - pad[1];
              if (ix < 0 || ix >= W)
                continue;
              int64_t at = (nc * H + iy) * W + ix;
              double v = X[at];
              if (isMax) {
                // The first NaN wins (max propagates it); otherwise only a
                // strictly greater value, so the first of equal maxima stays.
                bool better = argmax < 0 ||
                              (!std::isnan(acc) && (std::isnan(v) || v > acc));
                if (better)
                  argmax = at;
                acc = nanMax(acc, v);
              } else {
                acc += v;
              }
              ++count;
            }
          }
          if (!isMax)
            acc /= countPad ? static_cast<double>(kernel[0] * kernel[1])
                            : static_cast<double>(count);
          out[0].data[(nc * OH + y) * OW + x] =
              kind == PoolKind::Argmax ? static_cast<double>(argmax) : acc;
        }
    return success();
  };
}

/// Max pooling's gradient: each window's dy added at its argmax, in
/// row-major order of the windows; an index outside its window is an
/// error (C4).
LogicalResult maxPoolGradRule(Operation *op, ArrayRef<const Tensor *> in,
                              MutableArrayRef<Tensor> out, Interpreter &) {
  auto grad = cast<loom::MaxPool2DGradOp>(op);
  ArrayRef<int64_t> kernel = grad.getKernel(), strides = grad.getStrides(),
                    pad = grad.getPadding();
  ArrayRef<int64_t> xs = out[0].type.getShape(), ys = in[0]->type.getShape();
  int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (int64_t nc = 0; nc < ys[0] * ys[1]; ++nc)
    for (int64_t y = 0; y < OH; ++y)
      for (int64_t x = 0; x < OW; ++x) {
        int64_t k = (nc * OH + y) * OW + x;
        int64_t at = static_cast<int64_t>(in[1]->data[k]);
        int64_t iy = at / W % H, ix = at % W, wy = iy - (y * strides[0] - pad[0]),
                wx = ix - (x * strides[1] - pad[1]);
        if (at < 0 || at / (H * W) != nc || wy < 0 || wy >= kernel[0] ||
            wx < 0 || wx >= kernel[1]) {
          SmallVector<int64_t> position;
          unravel(k, ys, position);
          return op->emitError("max_pool2d_grad index ")
                 << at << " (at position " << formatIndex(position)
                 << " of argmax) is outside its window";
        }
        out[0].data[at] += in[0]->data[k];
      }
  return success();
}

LogicalResult dropoutRule(Operation *op, ArrayRef<const Tensor *> in,
                          MutableArrayRef<Tensor> out, Interpreter &) {
  auto dropout = cast<loom::DropoutOp>(op);
  double ratio = dropout.getRatio().convertToFloat();
  int64_t stream = static_cast<int64_t>(dropout.getStream());
  int64_t seed = static_cast<int64_t>(in[1]->data[0]);
  double scale = 1.0 / (1.0 - ratio);
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    bool drop = loom::interp::dropoutUniform(seed, stream, i) < ratio;
    out[0].data[i] = drop ? 0.0 : in[0]->data[i] * scale;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult crossEntropyRule(Operation *op, ArrayRef<const Tensor *> in,
                               MutableArrayRef<Tensor> out, Interpreter &) {
  auto ce = cast<loom::CrossEntropyOp>(op);
  AxisSplit s = splitAt(in[0]->type.getShape(), 1);
  std::optional<int64_t> ignore;
  if (IntegerAttr attr = ce.getIgnoreIndexAttr())
    ignore = attr.getInt();
  const std::vector<double> &x = in[0]->data, &labels = in[1]->data;
  std::vector<double> losses(labels.size(), 0.0);
  int64_t counted = 0;
  for (int64_t n = 0; n < s.outer; ++n)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t k = n * s.inner + i;
      int64_t label = static_cast<int64_t>(labels[k]);
      if (ignore && label == *ignore)
        continue;
      if (label < 0 || label >= s.size) {
        SmallVector<int64_t> position;
        unravel(k, in[1]->type.getShape(), position);
        return op->emitError("label ")
               << label << " at position " << formatIndex(position)
               << " is out of range [0, " << s.size << ")";
      }
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < s.size; ++c)
        mx = nanMax(mx, x[s.at(n, c, i)]);
      double sum = 0;
      for (int64_t c = 0; c < s.size; ++c)
        sum += std::exp(x[s.at(n, c, i)] - mx);
      losses[k] = mx + std::log(sum) - x[s.at(n, label, i)];
      ++counted;
    }
  switch (ce.getReduction()) {
  case loom::Reduction::None:
    out[0].data = losses;
    break;
  case loom::Reduction::Sum:
  case loom::Reduction::Mean: {
    double total = 0;
    for (double l : losses)
      total += l;
    if (ce.getReduction() == loom::Reduction::Mean)
      total = counted == 0 ? 0.0 : total / counted;
    out[0].data[0] = total;
    break;
  }
  }
  return success();
}

LogicalResult mseRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  auto mse = cast<loom::MseOp>(op);
  size_t n = in[0]->data.size();
  std::vector<double> sq(n);
  for (size_t i = 0; i < n; ++i) {
    double d = in[0]->data[i] - in[1]->data[i];
    sq[i] = d * d;
  }
  if (mse.getReduction() == loom::Reduction::None) {
    out[0].data = sq;
    return success();
  }
  double total = 0;
  for (double v : sq)
    total += v;
  if (mse.getReduction() == loom::Reduction::Mean)
    total /= static_cast<double>(n);
  out[0].data[0] = total;
  return success();
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

//===----------------------------------------------------------------------===//
// Collectives (the ranks meet in the SimulatedMesh of runRanks)
//===----------------------------------------------------------------------===//

/// Every rank's `x` along `axis`, in coordinate order. Without a mesh the
/// run is the only rank, which is right for an axis of size 1 only.
FailureOr<std::vector<std::vector<double>>>
exchange(Operation *op, StringRef axis, const Tensor &x, Interpreter &interp) {
  const Options &o = interp.getOptions();
  if (!o.mesh) {
    int64_t n = loom::meshAxisSize(op, axis);
    if (n > 1)
      return op->emitError("loom-interp: axis '")
             << axis << "' has " << n << " ranks: run every rank "
             << "(loom-interp --ranks, interp::runRanks)";
    return std::vector<std::vector<double>>{x.data};
  }
  std::string what = op->getName().getStringRef().str() + " of " +
                     std::to_string(x.data.size()) + " elements";
  std::string error;
  auto all = o.mesh->exchange(o.rank, axis, what, x.data, error);
  if (!all)
    return op->emitError("loom-interp: rank ") << o.rank << ": " << error;
  return std::move(*all);
}

/// Combines `values` (equal sizes) elementwise, in order.
std::vector<double> combine(ArrayRef<std::vector<double>> values,
                            loom::CollectiveReduce reduce, size_t begin,
                            size_t count) {
  std::vector<double> r(values[0].begin() + begin,
                        values[0].begin() + begin + count);
  for (const std::vector<double> &v : values.drop_front())
    for (size_t i = 0; i < count; ++i)
      r[i] = reduce == loom::CollectiveReduce::Max ? nanMax(r[i], v[begin + i])
                                                   : r[i] + v[begin + i];
  if (reduce == loom::CollectiveReduce::Mean)
    for (double &e : r)
      e /= static_cast<double>(values.size());
  return r;
}

int64_t coordinateOf(Operation *op, StringRef axis, Interpreter &interp) {
  const Options &o = interp.getOptions();
  return o.mesh ? o.mesh->coordinate(o.rank, axis) : 0;
}

LogicalResult allReduceRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  auto ar = cast<loom::AllReduceOp>(op);
  auto all = exchange(op, ar.getAxis(), *in[0], interp);
  if (failed(all))
    return failure();
  out[0].data = combine(*all, ar.getReduce(), 0, in[0]->data.size());
  return success();
}

LogicalResult reduceScatterRule(Operation *op, ArrayRef<const Tensor *> in,
                                MutableArrayRef<Tensor> out,
                                Interpreter &interp) {
  auto rs = cast<loom::ReduceScatterOp>(op);
  auto all = exchange(op, rs.getAxis(), *in[0], interp);
  if (failed(all))
    return failure();
  size_t block = out[0].data.size();
  int64_t r = coordinateOf(op, rs.getAxis(), interp);
  out[0].data = combine(*all, rs.getReduce(), r * block, block);
  return success();
}

LogicalResult allGatherRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  auto all = exchange(op, cast<loom::AllGatherOp>(op).getAxis(), *in[0],
                      interp);
  if (failed(all))
    return failure();
  if (all->size() * in[0]->data.size() != out[0].data.size())
    return op->emitError("loom-interp: the mesh gives ")
           << all->size() << " ranks, the result type another number";
  out[0].data.clear();
  for (const std::vector<double> &v : *all)
    out[0].data.insert(out[0].data.end(), v.begin(), v.end());
  return success();
}

LogicalResult rankSliceRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  size_t block = out[0].data.size();
  int64_t r = coordinateOf(op, cast<loom::RankSliceOp>(op).getAxis(), interp);
  if ((r + 1) * block > in[0]->data.size())
    return op->emitError("loom-interp: rank_slice out of range");
  std::copy_n(in[0]->data.begin() + r * block, block, out[0].data.begin());
  return success();
}

const llvm::StringMap<Rule> &rules() {
  static const llvm::StringMap<Rule> table = [] {
    llvm::StringMap<Rule> t;
    // Elementwise.
    t["loom.add"] = binary([](double x, double y) { return x + y; });
    t["loom.sub"] = binary([](double x, double y) { return x - y; });
    t["loom.mul"] = binary([](double x, double y) { return x * y; });
    t["loom.div"] = divRule;
    t["loom.pow"] = binary([](double x, double y) { return std::pow(x, y); });
    t["loom.max"] = binary(nanMax);
    t["loom.min"] = binary(nanMin);
    t["loom.neg"] = unary([](double x) { return -x; });
    t["loom.abs"] = unary([](double x) { return std::fabs(x); });
    t["loom.exp"] = unary([](double x) { return std::exp(x); });
    t["loom.log"] = unary([](double x) { return std::log(x); });
    t["loom.tanh"] = unary([](double x) { return std::tanh(x); });
    t["loom.sigmoid"] =
        unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
    // relu(NaN) is NaN, as max(x, 0) with NaN propagation.
    t["loom.relu"] = unary([](double x) { return nanMax(x, 0.0); });
    t["loom.erf"] = unary([](double x) { return std::erf(x); });
    t["loom.sqrt"] = unary([](double x) { return std::sqrt(x); });
    t["loom.rsqrt"] = unary([](double x) { return 1.0 / std::sqrt(x); });
    t["loom.floor"] = unary([](double x) { return std::floor(x); });
    t["loom.cos"] = unary([](double x) { return std::cos(x); });
    t["loom.sin"] = unary([](double x) { return std::sin(x); });
    t["loom.gelu"] = geluRule;
    t["loom.select"] = selectRule;
    t["loom.compare"] = compareRule;
    t["loom.cast"] = copyRule;
    t["loom.stop_gradient"] = copyRule;
    t["loom.constant"] = constantRule;
    // Contractions.
    t["loom.matmul"] = matmulRule;
    t["loom.conv2d"] = conv2dRule;
    t["loom.conv2d_input_grad"] = conv2dInputGradRule;
    t["loom.conv2d_filter_grad"] = conv2dFilterGradRule;
    t["loom.im2col"] = im2colRule;
    t["loom.col2im"] = col2imRule;
    // Reductions.
    t["loom.reduce_sum"] = reduce(ReduceKind::Sum);
    t["loom.reduce_max"] = reduce(ReduceKind::Max);
    t["loom.reduce_min"] = reduce(ReduceKind::Min);
    t["loom.reduce_mean"] = reduce(ReduceKind::Mean);
    // Data movement.
    t["loom.broadcast_in_dim"] = broadcastRule;
    t["loom.reshape"] = copyRule;
    t["loom.transpose"] = transposeRule;
    t["loom.slice"] = sliceRule;
    t["loom.concat"] = concatRule;
    t["loom.gather"] = gatherRule;
    t["loom.scatter_add"] = scatterAddRule;
    t["loom.pad"] = padRule;
    // Composite ops.
    t["loom.softmax"] = softmaxLike(/*logSoftmax=*/false);
    t["loom.log_softmax"] = softmaxLike(/*logSoftmax=*/true);
    t["loom.layer_norm"] = layerNormRule;
    t["loom.rms_norm"] = rmsNormRule;
    t["loom.batch_norm"] = batchNormRule;
    t["loom.batch_norm_stats"] = batchNormStatsRule;
    t["loom.max_pool2d"] = pool(PoolKind::Max);
    t["loom.avg_pool2d"] = pool(PoolKind::Avg);
    t["loom.max_pool2d_argmax"] = pool(PoolKind::Argmax);
    t["loom.max_pool2d_grad"] = maxPoolGradRule;
    t["loom.dropout"] = dropoutRule;
    // Losses.
    t["loom.cross_entropy"] = crossEntropyRule;
    t["loom.mse"] = mseRule;
    // Collectives.
    t["loom.all_reduce"] = allReduceRule;
    t["loom.reduce_scatter"] = reduceScatterRule;
    t["loom.all_gather"] = allGatherRule;
    t["loom.rank_slice"] = rankSliceRule;
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

} // namespace

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

uint64_t loom::interp::splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double loom::interp::dropoutUniform(int64_t seed, int64_t stream,
                                    int64_t index) {
  uint64_t h =
      splitmix64(static_cast<uint64_t>(seed) ^
                 (static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull));
  h = splitmix64(h + static_cast<uint64_t>(index));
  return static_cast<double>(h >> 40) * 0x1p-24;
}
