//===- GradCompressionFixtures.h - A model whose gradients compress ------===//
//
// The matrix regression of kernels.c (pred = x W + b: x [8, 8], W [8, 8],
// b [8], loss = sum((pred - y)^2) / 8; momentum SGD, lr 0.05, momentum
// 0.9) compiled as loomc --train --dp=N --zero=Z would lay it out, its
// gradient reductions naming their parameters (`grad`): W's gradient is a
// matrix PowerSGD compresses at ranks 1 and 2 ((8 + 8) R < 64), b's a
// vector it never does. Data: y = x Wtrue + btrue.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_GRADCOMPRESSIONFIXTURES_H
#define LOOMRT_TESTS_GRADCOMPRESSIONFIXTURES_H

#include "Fixtures.h"

#include <random>
#include <string>
#include <vector>

namespace loomrt::test {

inline constexpr int kMatrixIn = 8, kMatrixOut = 8;

/// train_step of the matrix model over mesh dp=`ranks` (1, 2 or 4) with
/// ZeRO `zero` (0: W's gradient all-reduced and W updated whole, and the
/// entries of --accumulate, forward_backward and apply_gradients; 1: then
/// sliced, W's momentum a flat shard; 2: reduce-scattered). `grads`: the
/// reductions carry `grad`. `top`: more top-level fields (`,
/// "grad_compression": "int8"`).
inline std::string matrixPlan(int ranks, int zero, bool grads = true,
                              const std::string &top = "") {
  const int64_t whole = kMatrixIn * kMatrixOut, k = whole / ranks;
  const std::string shard = shardJson("dp", {kMatrixIn, kMatrixOut});
  EntryBuilder e("train_step");
  int x = e.buffer("f32", {kBatch, kMatrixIn});
  int y = e.buffer("f32", {kBatch, kMatrixOut});
  int w = e.buffer("f32", {kMatrixIn, kMatrixOut});
  int b = e.buffer("f32", {kMatrixOut});
  int wm =
      zero ? e.buffer("f32", {k}) : e.buffer("f32", {kMatrixIn, kMatrixOut});
  int bm = e.buffer("f32", {kMatrixOut});
  int step = e.buffer("i64", {});
  int pred = e.buffer("f32", {kBatch, kMatrixOut});
  int loss = e.buffer("f32", {});
  int dpred = e.buffer("f32", {kBatch, kMatrixOut});
  int dw = e.buffer("f32", {kMatrixIn, kMatrixOut});
  int db = e.buffer("f32", {kMatrixOut});
  int next = e.buffer("i64", {});
  int lr = e.buffer("f32", {});
  int lossMean = e.buffer("f32", {});
  int ws = e.buffer("f32", {k});
  int dws = e.buffer("f32", {k});
  e.input("x", "input", x);
  e.input("y", "input", y);
  e.input("W", "param", w);
  e.input("b", "param", b);
  e.input("W.momentum", "state", wm, zero ? shard : "");
  e.input("b.momentum", "state", bm);
  e.input("step", "input", step);
  e.gemm(x, w, pred, 1, kBatch, kMatrixOut, kMatrixIn, false, false, 0, 0, 0);
  e.kernel("mr_add_bias", {pred, b});
  e.kernel("mr_mse", {pred, y, loss, dpred});
  e.gemm(x, dpred, dw, 1, kMatrixIn, kMatrixOut, kBatch, true, false, 0, 0, 0);
  e.kernel("mr_colsum", {dpred, db});
  const std::string g = grads ? "b" : "", gw = grads ? "W" : "";
  e.collective("all_reduce", "mean", "dp", db, db, g);
  const char *momentum = k == 64   ? "mr_momentum64"
                         : k == 32 ? "mr_momentum32"
                                   : "mr_momentum16";
  if (zero == 0) {
    e.collective("all_reduce", "mean", "dp", dw, dw, gw);
    e.kernel(momentum, {w, wm, dw});
  } else {
    if (zero == 1) {
      e.collective("all_reduce", "mean", "dp", dw, dw, gw);
      e.collective("rank_slice", "", "dp", dw, dws);
    } else {
      e.collective("reduce_scatter", "mean", "dp", dw, dws, gw);
    }
    e.collective("rank_slice", "", "dp", w, ws);
    e.kernel(momentum, {ws, wm, dws});
    e.collective("all_gather", "", "dp", ws, w);
  }
  e.kernel("mr_momentum8", {b, bm, db});
  e.kernel("inc_step", {step, next});
  e.kernel("lr_const", {lr});
  e.collective("all_reduce", "mean", "dp", loss, lossMean);
  e.output("loss", "output", lossMean);
  e.output("W", "output", w);
  e.output("b", "output", b);
  e.output("W.momentum", "output", wm, zero ? shard : "");
  e.output("b.momentum", "output", bm);
  e.output("step", "output", next);
  e.output("lr", "output", lr);
  std::vector<EntryBuilder> entries = {e};
  if (zero == 0) {
    // --accumulate: forward_backward (this rank's gradients, unreduced),
    // then apply_gradients (their reductions over dp and the update).
    EntryBuilder f("forward_backward");
    int fx = f.buffer("f32", {kBatch, kMatrixIn});
    int fy = f.buffer("f32", {kBatch, kMatrixOut});
    int fw = f.buffer("f32", {kMatrixIn, kMatrixOut});
    int fb = f.buffer("f32", {kMatrixOut});
    int fpred = f.buffer("f32", {kBatch, kMatrixOut});
    int floss = f.buffer("f32", {});
    int fdpred = f.buffer("f32", {kBatch, kMatrixOut});
    int fdw = f.buffer("f32", {kMatrixIn, kMatrixOut});
    int fdb = f.buffer("f32", {kMatrixOut});
    f.input("x", "input", fx);
    f.input("y", "input", fy);
    f.input("W", "param", fw);
    f.input("b", "param", fb);
    f.gemm(fx, fw, fpred, 1, kBatch, kMatrixOut, kMatrixIn, false, false, 0, 0,
           0);
    f.kernel("mr_add_bias", {fpred, fb});
    f.kernel("mr_mse", {fpred, fy, floss, fdpred});
    f.gemm(fx, fdpred, fdw, 1, kMatrixIn, kMatrixOut, kBatch, true, false, 0, 0,
           0);
    f.kernel("mr_colsum", {fdpred, fdb});
    f.output("loss", "output", floss);
    f.output("W", "grad", fdw);
    f.output("b", "grad", fdb);
    entries.push_back(f);
    EntryBuilder a("apply_gradients");
    int aw = a.buffer("f32", {kMatrixIn, kMatrixOut});
    int ab = a.buffer("f32", {kMatrixOut});
    int awm = a.buffer("f32", {kMatrixIn, kMatrixOut});
    int abm = a.buffer("f32", {kMatrixOut});
    int astep = a.buffer("i64", {});
    int agw = a.buffer("f32", {kMatrixIn, kMatrixOut});
    int agb = a.buffer("f32", {kMatrixOut});
    int anext = a.buffer("i64", {});
    a.input("W", "param", aw);
    a.input("b", "param", ab);
    a.input("W.momentum", "state", awm);
    a.input("b.momentum", "state", abm);
    a.input("step", "input", astep);
    a.input("W.grad", "input", agw);
    a.input("b.grad", "input", agb);
    a.collective("all_reduce", "mean", "dp", agw, agw, gw);
    a.collective("all_reduce", "mean", "dp", agb, agb, g);
    a.kernel("mr_momentum64", {aw, awm, agw});
    a.kernel("mr_momentum8", {ab, abm, agb});
    a.kernel("inc_step", {astep, anext});
    a.output("W", "output", aw);
    a.output("b", "output", ab);
    a.output("W.momentum", "output", awm);
    a.output("b.momentum", "output", abm);
    a.output("step", "output", anext);
    entries.push_back(a);
  }
  return planJson(entries, "\"kernels.so\"", "\"params.safetensors\"",
                  meshJson({"dp"}, {ranks}) + top);
}

/// The artifact in `dir` (created): matrixPlan, kernels.so, zero params.
inline bool writeMatrixArtifact(const std::string &dir, int ranks, int zero,
                                bool grads = true,
                                const std::string &top = "") {
  std::filesystem::create_directories(dir);
  writeBytes(dir + "/plan.json", matrixPlan(ranks, zero, grads, top));
  if (!installKernels(dir))
    return false;
  std::vector<float> zeros(kMatrixIn * kMatrixOut, 0.0f);
  SafetensorsWriter params;
  params.add("W", DType::F32, {kMatrixIn, kMatrixOut}, zeros.data(), 256);
  params.add("b", DType::F32, {kMatrixOut}, zeros.data(), 32);
  params.add("W.momentum", DType::F32, {kMatrixIn, kMatrixOut}, zeros.data(),
             256);
  params.add("b.momentum", DType::F32, {kMatrixOut}, zeros.data(), 32);
  return params.write(dir + "/params.safetensors", nullptr);
}

/// `samples` rows of x in [-1, 1] and y = x Wtrue + btrue (fixed random
/// Wtrue and btrue).
inline bool writeMatrixData(const std::string &path, int64_t samples) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> wTrue(kMatrixIn * kMatrixOut), bTrue(kMatrixOut);
  for (float &v : wTrue)
    v = u(rng);
  for (float &v : bTrue)
    v = u(rng);
  std::vector<float> x(size_t(samples * kMatrixIn)),
      y(size_t(samples * kMatrixOut));
  for (int64_t i = 0; i < samples; ++i) {
    for (int f = 0; f < kMatrixIn; ++f)
      x[size_t(i * kMatrixIn + f)] = u(rng);
    for (int o = 0; o < kMatrixOut; ++o) {
      float acc = bTrue[size_t(o)];
      for (int f = 0; f < kMatrixIn; ++f)
        acc += x[size_t(i * kMatrixIn + f)] * wTrue[size_t(f * kMatrixOut + o)];
      y[size_t(i * kMatrixOut + o)] = acc;
    }
  }
  std::map<std::string, NpyArray> arrays;
  arrays["x"] = f32Array({samples, kMatrixIn}, x);
  arrays["y"] = f32Array({samples, kMatrixOut}, y);
  return writeNpz(path, arrays, nullptr);
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_GRADCOMPRESSIONFIXTURES_H
