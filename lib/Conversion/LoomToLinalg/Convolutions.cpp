//===- Convolutions.cpp - conv2d, its gradients, im2col, pooling ----------===//
//
// The convert-loom-to-linalg rules of the windowed ops: loom.conv2d and its
// two gradients as direct contractions (what loom-conv-to-gemm leaves:
// grouped, depthwise and 16-bit convolutions), loom.im2col and loom.col2im
// (around the GEMMs of the others), and pooling.
//
//===----------------------------------------------------------------------===//

#include "Lowerer.h"

namespace loom::lowering {

/// conv2d and its filter gradient are one contraction over a padded input;
/// `ChannelExpr` gives the input channel read for an output channel `o` and
/// an in-group channel `c` (groups make it `(o floordiv OG) * CG + c`).
static AffineExpr groupChannel(Lowerer &l, AffineExpr o, AffineExpr c, int64_t OG,
                        int64_t CG, int64_t groups) {
  if (groups == 1)
    return c;
  return o.floorDiv(OG) * CG + c;
}

/// conv2d and its filter gradient are one contraction over the loops (n, o,
/// oy, ox, c, ky, kx) of padded-x[n, ch(o, c), oy*s + ky*d, ox*s + kx*d]
/// times a second operand: the filter F[o, c, ky, kx] into y[n, o, oy, ox]
/// (reducing c, ky, kx), or dy[n, o, oy, ox] into dF[o, c, ky, kx]
/// (reducing n, oy, ox, in that order, as the interpreter sums). Either way
/// the output's loops come first and the reduced ones last, so that each
/// output element is one inner reduction (loom-cpu-reduction-loops keeps
/// its sum in a register and splits the outer loops across threads; the
/// CUDA mapping gives it a thread): the filter gradient's loops are (o, c,
/// ky, kx, n, oy, ox).
static Value convContraction(Lowerer &l, Value x, Value other,
                      RankedTensorType outType, bool filterGrad,
                      ArrayRef<int64_t> s, ArrayRef<int64_t> d,
                      ArrayRef<int64_t> p, int64_t groups, int64_t O,
                      int64_t CG) {
  Value xp = l.padSpatial(x, p);
  AffineExpr n = l.dim(0), o = l.dim(1), oy = l.dim(2), ox = l.dim(3),
             c = l.dim(4), ky = l.dim(5), kx = l.dim(6);
  if (filterGrad) {
    o = l.dim(0), c = l.dim(1), ky = l.dim(2), kx = l.dim(3);
    n = l.dim(4), oy = l.dim(5), ox = l.dim(6);
  }
  AffineMap xMap = l.map(7, {n, groupChannel(l, o, c, O / groups, CG, groups),
                             oy * s[0] + ky * d[0], ox * s[1] + kx * d[1]});
  AffineMap fMap = l.map(7, {o, c, ky, kx});
  AffineMap yMap = l.map(7, {n, o, oy, ox});
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
  SmallVector<IteratorType> its{par, par, par, par, red, red, red};
  SmallVector<AffineMap> maps = filterGrad
                                    ? SmallVector<AffineMap>{xMap, yMap, fMap}
                                    : SmallVector<AffineMap>{xMap, fMap, yMap};
  return l.generic({xp, other}, l.filled(outType, 0), maps, its,
                   [&](ValueRange a) {
                     return one(l.add(a[2], l.mul(a[0], a[1])));
                   })[0];
}

Rewrite lowerConv2D(Lowerer &l, Conv2DOp op, Value x, Value f) {
  RankedTensorType ft = tensorType(f);
  return one(convContraction(l, x, f, tensorType(op.getResult()), false,
                             op.getStrides(), op.getDilations(),
                             op.getPadding(), op.getGroups(),
                             ft.getDimSize(0), ft.getDimSize(1)));
}

Rewrite lowerConv2DFilterGrad(Lowerer &l, Conv2DFilterGradOp op, Value x,
                              Value dy) {
  RankedTensorType ft = tensorType(op.getResult());
  return one(convContraction(l, x, dy, ft, true, op.getStrides(),
                             op.getDilations(), op.getPadding(),
                             op.getGroups(), ft.getDimSize(0),
                             ft.getDimSize(1)));
}

/// im2col: one parallel loop per (c, i, j, n, y, x) of the columns (as a
/// 6-D tensor, reshaped to 2-D), reading the padded image at an affine
/// position.
Rewrite lowerIm2Col(Lowerer &l, Im2ColOp op, Value x) {
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(),
                    d = op.getDilations();
  RankedTensorType xt = tensorType(x), rt = tensorType(op.getResult());
  int64_t N = xt.getDimSize(0), C = xt.getDimSize(1);
  int64_t P = rt.getDimSize(1) / N;
  Value xp = l.padSpatial(x, op.getPadding());
  int64_t OW = (tensorType(xp).getDimSize(3) - (k[1] - 1) * d[1] - 1) / s[1] + 1;
  auto six = RankedTensorType::get({C, k[0], k[1], N, P / OW, OW},
                                   xt.getElementType());
  AffineExpr c = l.dim(0), i = l.dim(1), j = l.dim(2), n = l.dim(3),
             y = l.dim(4), xx = l.dim(5);
  AffineMap xMap = l.map(6, {n, c, y * s[0] + i * d[0], xx * s[1] + j * d[1]});
  SmallVector<IteratorType> par(6, IteratorType::parallel);
  Value cols = l.generic(xp, l.empty(six), {xMap, l.identity(6)}, par,
                         [&](ValueRange a) { return one(a[0]); })[0];
  return one(l.reshape(cols, rt));
}

/// col2im as a gather: each image position sums, over the kernel offsets
/// (i, j) in order, the column entry that read it, if any. No atomics, so
/// the same code and sum order on the CPU and the GPU.
Rewrite lowerCol2Im(Lowerer &l, Col2ImOp op, Value cols) {
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(),
                    p = op.getPadding(), d = op.getDilations();
  RankedTensorType rt = tensorType(op.getResult());
  int64_t N = rt.getDimSize(0), C = rt.getDimSize(1);
  int64_t OH = (rt.getDimSize(2) + p[0] + p[2] - (k[0] - 1) * d[0] - 1) / s[0] + 1;
  int64_t OW = (rt.getDimSize(3) + p[1] + p[3] - (k[1] - 1) * d[1] - 1) / s[1] + 1;
  Value six = l.reshape(cols, RankedTensorType::get({C, k[0], k[1], N, OH, OW},
                                                    rt.getElementType()));
  using P = arith::CmpIPredicate;
  // The output row or column a window at kernel offset `kk` reads position
  // `pos` from, and whether there is one.
  auto source = [&](Value pos, Value kk, int64_t dim, Value &valid) {
    Value at = l.sub(l.add(pos, l.index(p[dim])), l.mul(kk, l.index(d[dim])));
    Value ok = l.cmpi(P::sge, at, l.index(0));
    if (s[dim] > 1) {
      Value rem = arith::RemSIOp::create(l.b, l.loc, at, l.index(s[dim]));
      ok = l.andi(ok, l.cmpi(P::eq, rem, l.index(0)));
      at = l.div(at, l.index(s[dim]));
    }
    int64_t out = dim == 0 ? OH : OW;
    ok = l.andi(ok, l.cmpi(P::slt, at, l.index(out)));
    valid = valid ? l.andi(valid, ok) : ok;
    return at;
  };
  SmallVector<IteratorType> its(4, IteratorType::parallel);
  its.append(2, IteratorType::reduction);
  AffineMap outMap = l.map(6, {l.dim(0), l.dim(1), l.dim(2), l.dim(3)});
  // The window only gives the (i, j) loops their sizes, as in pooling.
  Value window =
      l.empty(RankedTensorType::get({k[0], k[1]}, rt.getElementType()));
  return one(l.generic(window, l.filled(rt, 0),
                       {l.map(6, {l.dim(4), l.dim(5)}), outMap}, its,
                       [&](ValueRange a) {
                         Value n = l.linalgIndex(0), c = l.linalgIndex(1);
                         Value i = l.linalgIndex(4), j = l.linalgIndex(5);
                         Value valid;
                         Value y = source(l.linalgIndex(2), i, 0, valid);
                         Value x = source(l.linalgIndex(3), j, 1, valid);
                         Value v = l.extractClamped(six, {c, i, j, n, y, x});
                         v = l.select(valid, v, l.constant(rt.getElementType(), 0));
                         return one(l.add(a[1], v));
                       })[0]);
}

/// The input gradient as a stride-1 convolution of the stride-dilated,
/// padded output gradient with the flipped filter: dy[oy] lands at row
/// q = oy*s - pad + d*(KH-1) of P, and dx[iy] = sum_k P[iy + k*d] *
/// F[KH-1-k]. Rows of dy that land outside P reach no input row.
Rewrite lowerConv2DInputGrad(Lowerer &l, Conv2DInputGradOp op, Value dy,
                             Value f) {
  ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                    p = op.getPadding();
  RankedTensorType xt = tensorType(op.getResult());
  RankedTensorType dyt = tensorType(dy), ft = tensorType(f);
  int64_t groups = op.getGroups();
  int64_t N = dyt.getDimSize(0), O = dyt.getDimSize(1);
  int64_t CG = ft.getDimSize(1), KH = ft.getDimSize(2), KW = ft.getDimSize(3);
  int64_t OG = O / groups;
  int64_t H = xt.getDimSize(2), W = xt.getDimSize(3);
  int64_t K[2] = {KH, KW}, In[2] = {H, W};
  int64_t Out[2] = {dyt.getDimSize(2), dyt.getDimSize(3)};
  int64_t lo[2], hi[2], first[2], P[2];
  bool empty = false;
  for (int i = 0; i < 2; ++i) {
    int64_t shift = d[i] * (K[i] - 1) - p[i];
    P[i] = In[i] + d[i] * (K[i] - 1);
    // Smallest oy with oy*s + shift >= 0, largest with it <= P - 1.
    lo[i] = shift >= 0 ? 0 : (-shift + s[i] - 1) / s[i];
    hi[i] = std::min(Out[i] - 1, (P[i] - 1 - shift) >= 0
                                     ? (P[i] - 1 - shift) / s[i]
                                     : -1);
    first[i] = lo[i] * s[i] + shift;
    if (lo[i] > hi[i])
      empty = true;
  }
  Type et = xt.getElementType();
  auto pType = RankedTensorType::get({N, O, P[0], P[1]}, et);
  Value padded = l.filled(pType, 0);
  if (!empty) {
    SmallVector<OpFoldResult> off{l.b.getIndexAttr(0), l.b.getIndexAttr(0),
                                  l.b.getIndexAttr(lo[0]),
                                  l.b.getIndexAttr(lo[1])};
    SmallVector<OpFoldResult> size{
        l.b.getIndexAttr(N), l.b.getIndexAttr(O),
        l.b.getIndexAttr(hi[0] - lo[0] + 1), l.b.getIndexAttr(hi[1] - lo[1] + 1)};
    SmallVector<OpFoldResult> ones(4, l.b.getIndexAttr(1));
    Value part = tensor::ExtractSliceOp::create(l.b, l.loc, dy, off, size, ones);
    padded = l.insertSlice(part, padded, {0, 0, first[0], first[1]},
                           {1, 1, s[0], s[1]});
  }
  // Loops: n, c, iy, ix, og, ky, kx (c is the input channel).
  AffineExpr n = l.dim(0), c = l.dim(1), iy = l.dim(2), ix = l.dim(3),
             og = l.dim(4), ky = l.dim(5), kx = l.dim(6);
  AffineExpr oc = groups == 1 ? og : c.floorDiv(CG) * OG + og;
  AffineExpr fc = groups == 1 ? c : c % CG;
  AffineMap pMap = l.map(7, {n, oc, iy + ky * d[0], ix + kx * d[1]});
  AffineMap fMap = l.map(7, {oc, fc, ky * -1 + (KH - 1), kx * -1 + (KW - 1)});
  AffineMap xMap = l.map(7, {n, c, iy, ix});
  SmallVector<IteratorType> its(4, IteratorType::parallel);
  its.append(3, IteratorType::reduction);
  // The og loop's range comes from a shape-only operand.
  Value ogShape =
      l.empty(RankedTensorType::get({OG, KH, KW}, et));
  AffineMap ogMap = l.map(7, {og, ky, kx});
  return one(l.generic({padded, f, ogShape}, l.filled(xt, 0),
                       {pMap, fMap, ogMap, xMap}, its, [&](ValueRange a) {
                         return one(l.add(a[3], l.mul(a[0], a[1])));
                       })[0]);
}

/// Max/average pooling and the argmax of max pooling, window by window in
/// row-major order like the interpreter; out-of-bounds window positions are
/// skipped.
Rewrite lowerPool(Lowerer &l, Operation *op, Value x, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> s, ArrayRef<int64_t> p, bool countPad) {
  bool argmax = isa<MaxPool2DArgmaxOp>(op), isMax = !isa<AvgPool2DOp>(op);
  RankedTensorType xt = tensorType(x), yt = tensorType(op->getResult(0));
  Type et = xt.getElementType();
  int64_t H = xt.getDimSize(2), W = xt.getDimSize(3);
  auto valType = RankedTensorType::get(yt.getShape(), et);
  auto idxType = RankedTensorType::get(yt.getShape(), l.b.getI64Type());
  Value window = l.empty(RankedTensorType::get({kernel[0], kernel[1]}, et));
  // Loops (n, c, oy, ky, kx, ox): the window's loops outside the output
  // column's, so that the innermost loop runs along a row of the output
  // (and a strided row of the input) and vectorizes; the window's loops
  // innermost would leave 3x3 scalar iterations per output element.
  constexpr unsigned kY = 3, kX = 4, oX = 5;
  SmallVector<IteratorType> its(3, IteratorType::parallel);
  its.append(2, IteratorType::reduction);
  its.push_back(IteratorType::parallel);
  AffineMap wMap = l.map(6, {l.dim(kY), l.dim(kX)});
  AffineMap yMap = l.map(6, {l.dim(0), l.dim(1), l.dim(2), l.dim(oX)});
  SmallVector<Value> inits{l.filledWith(
      valType, isMax ? l.extreme(et, false) : l.constant(et, 0))};
  SmallVector<AffineMap> maps{wMap, yMap};
  if (argmax) {
    inits.push_back(l.filled(idxType, -1));
    maps.push_back(yMap);
  }
  SmallVector<Value> res = l.generic(window, inits, maps, its, [&](ValueRange a) {
    Value nI = l.linalgIndex(0), cI = l.linalgIndex(1);
    Value iy = l.sub(l.add(l.mul(l.linalgIndex(2), l.index(s[0])),
                           l.linalgIndex(kY)),
                     l.index(p[0]));
    Value ix = l.sub(l.add(l.mul(l.linalgIndex(oX), l.index(s[1])),
                           l.linalgIndex(kX)),
                     l.index(p[1]));
    auto inRange = [&](Value v, int64_t size) {
      return l.andi(l.cmpi(arith::CmpIPredicate::sge, v, l.index(0)),
                    l.cmpi(arith::CmpIPredicate::slt, v, l.index(size)));
    };
    Value valid = l.andi(inRange(iy, H), inRange(ix, W));
    Value v = l.extractClamped(x, {nI, cI, iy, ix});
    Value acc = a[1];
    if (!isMax)
      return one(l.select(valid, l.add(acc, v), acc));
    Value newAcc = l.select(valid, l.max(acc, v), acc);
    if (!argmax)
      return one(newAcc);
    // The first NaN wins; otherwise only a strictly greater value.
    Value curIdx = a[2];
    Value none = l.cmpi(arith::CmpIPredicate::slt, curIdx,
                        l.constant(l.b.getI64Type(), 0));
    Value accNotNan = arith::CmpFOp::create(l.b, l.loc,
                                            arith::CmpFPredicate::ORD, acc, acc);
    Value vNan = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::UNO,
                                       v, v);
    Value greater =
        arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OGT, v, acc);
    Value better = arith::OrIOp::create(
        l.b, l.loc, none,
        l.andi(accNotNan, arith::OrIOp::create(l.b, l.loc, vNan, greater)));
    better = l.andi(valid, better);
    Value c = l.add(l.mul(nI, l.index(xt.getDimSize(1))), cI);
    Value at = l.add(l.mul(l.add(l.mul(c, l.index(H)), iy), l.index(W)), ix);
    Value atI64 = arith::IndexCastOp::create(l.b, l.loc, l.b.getI64Type(), at);
    return SmallVector<Value>{newAcc, l.select(better, atI64, curIdx)};
  });
  if (argmax)
    return one(res[1]);
  if (isMax)
    return one(res[0]);
  // Average: divide by the window size or by the in-bounds count.
  return one(l.generic({res[0]}, l.empty(valType),
                       {l.identity(4), l.identity(4)},
                       SmallVector<IteratorType>(4, IteratorType::parallel),
                       [&](ValueRange a) {
                         if (countPad)
                           return one(l.div(
                               a[0], l.constant(et, kernel[0] * kernel[1])));
                         auto count = [&](int64_t outDim, int64_t st,
                                          int64_t pd, int64_t k, int64_t sz) {
                           Value start = l.sub(
                               l.mul(l.linalgIndex(outDim), l.index(st)),
                               l.index(pd));
                           Value lo = arith::MaxSIOp::create(
                               l.b, l.loc, start, l.index(0));
                           Value hi = arith::MinSIOp::create(
                               l.b, l.loc, l.add(start, l.index(k)),
                               l.index(sz));
                           return l.sub(hi, lo);
                         };
                         Value n = l.mul(count(2, s[0], p[0], kernel[0], H),
                                         count(3, s[1], p[1], kernel[1], W));
                         Value nf = l.convert(
                             arith::IndexCastOp::create(l.b, l.loc,
                                                        l.b.getI64Type(), n),
                             et);
                         return one(l.div(a[0], nf));
                       })[0]);
}

/// Max pooling's gradient: one scf.forall iteration per (n, c) plane
/// (an argmax never leaves its plane), each adding the plane's dy at its
/// argmax in row-major window order, as the interpreter does. A gather
/// (each input element reading the windows that cover it) was tried: every
/// element then checks ceil(kernel / stride)^2 windows, and ResNet-18's
/// took 23 ms on 2 cores where the sequential scatter took 10.
Rewrite lowerMaxPoolGrad(Lowerer &l, MaxPool2DGradOp op, Value dy,
                         Value argmax) {
  RankedTensorType xt = tensorType(op.getResult()), yt = tensorType(dy);
  int64_t C = xt.getDimSize(1), H = xt.getDimSize(2), W = xt.getDimSize(3);
  Value result = l.filled(xt, 0);
  SmallVector<OpFoldResult> planes = {l.b.getIndexAttr(xt.getDimSize(0)),
                                      l.b.getIndexAttr(C)};
  auto forall = scf::ForallOp::create(l.b, l.loc, planes, ValueRange{result},
                                      std::nullopt);
  OpBuilder::InsertionGuard guard(l.b);
  l.b.setInsertionPoint(forall.getTerminator());
  Value n = forall.getInductionVars()[0], c = forall.getInductionVars()[1];
  SmallVector<OpFoldResult> offsets = {n, c, l.b.getIndexAttr(0),
                                       l.b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {l.b.getIndexAttr(1), l.b.getIndexAttr(1),
                                     l.b.getIndexAttr(H), l.b.getIndexAttr(W)};
  SmallVector<OpFoldResult> strides(4, l.b.getIndexAttr(1));
  auto planeType = RankedTensorType::get({H, W}, xt.getElementType());
  Value shared = forall.getBody()->getArguments().back();
  Value plane = tensor::ExtractSliceOp::create(l.b, l.loc, planeType, shared,
                                               offsets, sizes, strides);
  Value base = l.mul(l.add(l.mul(n, l.index(C)), c), l.index(H * W));
  plane = l.forLoop(yt.getDimSize(2), plane, [&](Value oy, Value rows) {
    return l.forLoop(yt.getDimSize(3), rows, [&](Value ox, Value a) {
      // The index within the plane, kept inside it.
      Value at = l.sub(l.toIndex(l.extractClamped(argmax, {n, c, oy, ox})),
                       base);
      at = l.max(at, l.index(0));
      at = l.min(at, l.index(H * W - 1));
      Value iy = arith::DivUIOp::create(l.b, l.loc, at, l.index(W));
      Value ix = arith::RemUIOp::create(l.b, l.loc, at, l.index(W));
      Value g = l.extractClamped(dy, {n, c, oy, ox});
      Value cur = tensor::ExtractOp::create(l.b, l.loc, a, ValueRange{iy, ix});
      return Value(tensor::InsertOp::create(l.b, l.loc, l.add(cur, g), a,
                                            ValueRange{iy, ix}));
    });
  });
  l.b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(l.b, l.loc, plane, shared, offsets,
                                        sizes, strides);
  return one(forall.getResult(0));
}

} // namespace loom::lowering

void loom::lowering::populateConvolutionRules(RewritePatternSet &patterns) {
  // Channels-last convolutions are plan conv steps only (loom-channels-last
  // makes them from library calls): no rule, so a kernel that holds one is
  // reported.
  addRule<Conv2DOp>(patterns, [](Lowerer &l, Conv2DOp c) -> Rewrite {
    if (c.getChannelsLast())
      return failure();
    return lowerConv2D(l, c, c->getOperand(0), c->getOperand(1));
  });
  addRule<Conv2DFilterGradOp>(patterns,
                              [](Lowerer &l, Conv2DFilterGradOp c) -> Rewrite {
    if (c.getChannelsLast())
      return failure();
    return lowerConv2DFilterGrad(l, c, c->getOperand(0), c->getOperand(1));
  });
  addRule<Conv2DInputGradOp>(patterns,
                             [](Lowerer &l, Conv2DInputGradOp c) -> Rewrite {
    if (c.getChannelsLast())
      return failure();
    return lowerConv2DInputGrad(l, c, c->getOperand(0), c->getOperand(1));
  });
  addRule<Im2ColOp>(patterns, [](Lowerer &l, Im2ColOp c) {
    return lowerIm2Col(l, c, c->getOperand(0));
  });
  addRule<Col2ImOp>(patterns, [](Lowerer &l, Col2ImOp c) {
    return lowerCol2Im(l, c, c->getOperand(0));
  });
  addRule<MaxPool2DOp>(patterns, [](Lowerer &l, MaxPool2DOp p) {
    return lowerPool(l, p, p->getOperand(0), p.getKernel(), p.getStrides(),
                     p.getPadding(), false);
  });
  addRule<AvgPool2DOp>(patterns, [](Lowerer &l, AvgPool2DOp p) {
    return lowerPool(l, p, p->getOperand(0), p.getKernel(), p.getStrides(),
                     p.getPadding(), p.getCountIncludePad());
  });
  addRule<MaxPool2DArgmaxOp>(patterns, [](Lowerer &l, MaxPool2DArgmaxOp p) {
    return lowerPool(l, p, p->getOperand(0), p.getKernel(), p.getStrides(),
                     p.getPadding(), false);
  });
  addRule<MaxPool2DGradOp>(patterns, [](Lowerer &l, MaxPool2DGradOp p) {
    return lowerMaxPoolGrad(l, p, p->getOperand(0), p->getOperand(1));
  });
}
