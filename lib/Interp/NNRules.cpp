//===- NNRules.cpp - Composite neural-network ops -------------------------===//
//
// The rules of the composite neural-network ops: softmax and log-softmax,
// layer and RMS norm, batch norm and its statistics, max and average
// pooling (and max pooling's argmax and gradient), and dropout.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace loom::interp;

namespace {

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

LogicalResult randomRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  auto random = cast<loom::RandomOp>(op);
  double a = random.getA().convertToDouble();
  double b = random.getB().convertToDouble();
  int64_t stream = static_cast<int64_t>(random.getStream());
  int64_t seed = static_cast<int64_t>(in[0]->data[0]);
  bool normal = random.getDistribution() == "normal";
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    int64_t k = static_cast<int64_t>(i);
    out[0].data[i] =
        normal ? a + b * loom::interp::normalDraw(seed, stream, k)
               : a + (b - a) * loom::interp::dropoutUniform(seed, stream, k);
  }
  return success();
}

} // namespace

void loom::interp::addNNRules(llvm::StringMap<Rule> &t) {
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
  t["loom.random"] = randomRule;
}
