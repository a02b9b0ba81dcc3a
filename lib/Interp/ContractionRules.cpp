//===- ContractionRules.cpp - matmul, conv2d and its gradients, im2col ----===//
//
// The rules of the contractions: loom.matmul, loom.conv2d and its input
// and filter gradients (NCHW or channels-last), loom.im2col and
// loom.col2im.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <algorithm>

using namespace mlir;
using namespace loom::interp;

namespace {

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

} // namespace

void loom::interp::addContractionRules(llvm::StringMap<Rule> &t) {
  t["loom.matmul"] = matmulRule;
  t["loom.conv2d"] = conv2dRule;
  t["loom.conv2d_input_grad"] = conv2dInputGradRule;
  t["loom.conv2d_filter_grad"] = conv2dFilterGradRule;
  t["loom.im2col"] = im2colRule;
  t["loom.col2im"] = col2imRule;
}
