//===- Fixtures.h - Hand-built artifacts (plan.json + kernels.so) for tests
//===//
//
// Tests build their artifacts the way loomc would lay them out: a plan made
// with PlanBuilder, kernels.so copied from the LoomRTTestKernels module
// (kernels.c), params.safetensors written with SafetensorsWriter.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_FIXTURES_H
#define LOOMRT_TESTS_FIXTURES_H

#include "TestUtil.h"

#include "loomrt/Npy.h"
#include "loomrt/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace loomrt::test {

/// One entry point, with buffers laid out one after another at 64-byte
/// aligned offsets.
class EntryBuilder {
public:
  explicit EntryBuilder(std::string name) : name(std::move(name)) {}

  int buffer(const std::string &dtype, const std::vector<int64_t> &shape) {
    uint64_t elements = 1;
    for (int64_t d : shape)
      elements *= static_cast<uint64_t>(d);
    uint64_t size = elements * dtypeBytes(dtype);
    std::string text = "{\"offset\": " + std::to_string(next) +
                       ", \"dtype\": \"" + dtype + "\", \"shape\": [";
    for (size_t i = 0; i < shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(shape[i]);
    text += "]}";
    buffers.push_back(text);
    next += (size + 63) / 64 * 64;
    if (size == 0)
      next += 64;
    return static_cast<int>(buffers.size()) - 1;
  }
  /// A buffer at byte `offset` (which need not be past the others: the
  /// bytes of another buffer, as the memory planner reuses them).
  int bufferAt(uint64_t offset, const std::string &dtype,
               const std::vector<int64_t> &shape) {
    uint64_t saved = next;
    next = offset;
    int id = buffer(dtype, shape);
    next = std::max(saved, next);
    return id;
  }
  void input(const std::string &n, const std::string &kind, int id,
             const std::string &shard = "") {
    inputs.push_back(binding(n, kind, id, shard));
  }
  void output(const std::string &n, const std::string &kind, int id,
              const std::string &shard = "") {
    outputs.push_back(binding(n, kind, id, shard));
  }
  /// A collective step; `reduce` "" leaves the field out, and so does
  /// `grad` (the parameter whose gradient the step reduces).
  void collective(const std::string &op, const std::string &reduce,
                  const std::string &axis, int src, int dst,
                  const std::string &grad = "") {
    steps.push_back("{\"kind\": \"collective\", \"op\": \"" + op + "\"" +
                    (reduce.empty() ? "" : ", \"reduce\": \"" + reduce + "\"") +
                    ", \"axis\": \"" + axis + "\", \"src\": " +
                    std::to_string(src) + ", \"dst\": " + std::to_string(dst) +
                    (grad.empty() ? "" : ", \"grad\": \"" + grad + "\"") + "}");
  }
  /// A kernel step; `grid`, `block` and `shared_bytes` are what a cuda plan
  /// needs (a cpu plan ignores them).
  void kernel(const std::string &symbol, const std::vector<int> &ids) {
    std::string text =
        "{\"kind\": \"kernel\", \"name\": \"" + symbol + "\", \"buffers\": [";
    for (size_t i = 0; i < ids.size(); ++i)
      text += (i ? ", " : "") + std::to_string(ids[i]);
    steps.push_back(text + "], \"grid\": [1, 1, 1], \"block\": [32, 1, 1], "
                           "\"shared_bytes\": 0}");
  }
  void gemm(int a, int b, int c, int64_t batch, int64_t m, int64_t n, int64_t k,
            bool ta, bool tb, uint64_t sa, uint64_t sb, uint64_t sc) {
    steps.push_back(
        "{\"kind\": \"gemm\", \"a\": " + std::to_string(a) +
        ", \"b\": " + std::to_string(b) + ", \"c\": " + std::to_string(c) +
        ", \"batch\": " + std::to_string(batch) +
        ", \"m\": " + std::to_string(m) + ", \"n\": " + std::to_string(n) +
        ", \"k\": " + std::to_string(k) + ", \"trans_a\": " +
        (ta ? "true" : "false") + ", \"trans_b\": " + (tb ? "true" : "false") +
        ", \"stride_a\": " + std::to_string(sa) + ", \"stride_b\": " +
        std::to_string(sb) + ", \"stride_c\": " + std::to_string(sc) + "}");
  }
  void copy(int src, int dst) {
    steps.push_back("{\"kind\": \"copy\", \"src\": " + std::to_string(src) +
                    ", \"dst\": " + std::to_string(dst) + "}");
  }
  /// A raw step, for malformed cases.
  void rawStep(const std::string &json) { steps.push_back(json); }

  std::string json() const {
    return "{\"name\": \"" + name +
           "\", \"arena_bytes\": " + std::to_string(next) +
           ",\n \"buffers\": [" + join(buffers) + "],\n \"inputs\": [" +
           join(inputs) + "],\n \"outputs\": [" + join(outputs) +
           "],\n \"steps\": [" + join(steps) + "]}";
  }

private:
  static uint64_t dtypeBytes(const std::string &dtype) {
    if (dtype == "f64" || dtype == "i64")
      return 8;
    if (dtype == "f32" || dtype == "i32")
      return 4;
    if (dtype == "f16" || dtype == "bf16")
      return 2;
    return 1;
  }
  static std::string binding(const std::string &n, const std::string &kind,
                             int id, const std::string &shard) {
    return "{\"name\": \"" + n + "\", \"kind\": \"" + kind +
           "\", \"buffer\": " + std::to_string(id) +
           (shard.empty() ? "" : ", \"shard\": " + shard) + "}";
  }
  static std::string join(const std::vector<std::string> &items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i)
      out += (i ? ",\n  " : "") + items[i];
    return out;
  }

  std::string name;
  uint64_t next = 0;
  std::vector<std::string> buffers, inputs, outputs, steps;
};

/// An entry `main`: y = relu(a . b + bias) (gemm, kernel `add_relu4` of
/// tests/kernels.c), flat = copy of y. Shared by the CPU and CUDA backend
/// tests, which must agree on it.
inline EntryBuilder mainEntry() {
  EntryBuilder e("main");
  int a = e.buffer("f32", {2, 3});
  int b = e.buffer("f32", {3, 2});
  int c = e.buffer("f32", {2, 2});
  int bias = e.buffer("f32", {2, 2});
  int y = e.buffer("f32", {2, 2});
  int flat = e.buffer("f32", {4});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.input("bias", "input", bias);
  e.gemm(a, b, c, 1, 2, 2, 3, false, false, 0, 0, 0);
  e.kernel("add_relu4", {c, bias, y});
  e.copy(y, flat);
  e.output("y", "output", y);
  e.output("flat", "output", flat);
  return e;
}

inline std::string
planJson(const std::vector<EntryBuilder> &entries,
         const std::string &kernels = "\"kernels.so\"",
         const std::string &params = "\"params.safetensors\"",
         const std::string &extra = "") {
  std::string text = "{\"format\": \"loom-plan\", \"version\": 1, "
                     "\"target\": \"cpu\", \"kernel_abi\": 1,\n"
                     "\"kernels\": " +
                     kernels + ", \"params\": " + params + extra +
                     ",\n\"entries\": [\n";
  for (size_t i = 0; i < entries.size(); ++i)
    text += (i ? ",\n" : "") + entries[i].json();
  return text + "]}\n";
}

/// Copies the test kernels into `dir` as kernels.so.
inline bool installKernels(const std::string &dir,
                           const std::string &name = "kernels.so") {
  std::error_code ec;
  std::filesystem::copy_file(LOOMRT_TEST_KERNELS_PATH, dir + "/" + name,
                             std::filesystem::copy_options::overwrite_existing,
                             ec);
  return !ec;
}

inline NpyArray makeArray(DType dtype, std::vector<int64_t> shape,
                          const void *data) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  size_t n = 1;
  for (int64_t d : a.shape)
    n *= static_cast<size_t>(d);
  a.data.resize(n * dtypeSize(dtype));
  if (data)
    std::memcpy(a.data.data(), data, a.data.size());
  return a;
}

inline NpyArray f32Array(std::vector<int64_t> shape,
                         const std::vector<float> &values) {
  return makeArray(DType::F32, std::move(shape), values.data());
}

inline std::vector<float> f32Values(const NpyArray &a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), v.size() * 4);
  return v;
}

// The linear-regression model of kernels.c: batch 8, 4 features, momentum
// SGD (lr 0.05, momentum 0.9) on w [4, 1] and b [1].
inline constexpr int kBatch = 8;
inline constexpr int kFeatures = 4;

/// The model's forward pass and loss into `e`; returns the ids
/// {x, y, w, b, pred, loss, dpred}.
struct ForwardIds {
  int x, y, w, b, pred, loss, dpred;
};
inline ForwardIds regressionForward(EntryBuilder &e) {
  ForwardIds f;
  f.x = e.buffer("f32", {kBatch, kFeatures});
  f.y = e.buffer("f32", {kBatch, 1});
  f.w = e.buffer("f32", {kFeatures, 1});
  f.b = e.buffer("f32", {1});
  f.pred = e.buffer("f32", {kBatch, 1});
  f.loss = e.buffer("f32", {});
  f.dpred = e.buffer("f32", {kBatch, 1});
  e.input("x", "input", f.x);
  e.input("y", "input", f.y);
  e.input("w", "param", f.w);
  e.input("b", "param", f.b);
  e.gemm(f.x, f.w, f.pred, 1, kBatch, 1, kFeatures, false, false, 0, 0, 0);
  e.kernel("lr_add_bias", {f.pred, f.b});
  e.kernel("lr_mse", {f.pred, f.y, f.loss, f.dpred});
  return f;
}

/// What train_step adds to the forward pass, in this buffer order: w's
/// momentum, b's, the step, the gradients dw and db, the next step and the
/// learning rate.
struct TrainStepIds {
  int wm, bm, step, dw, db, next, lr;
};
/// train_step's buffers (w's momentum of `wmShape`: a shard's under a
/// mesh).
inline TrainStepIds trainStepBuffers(EntryBuilder &e,
                                     const std::vector<int64_t> &wmShape) {
  TrainStepIds t;
  t.wm = e.buffer("f32", wmShape);
  t.bm = e.buffer("f32", {1});
  t.step = e.buffer("i64", {});
  t.dw = e.buffer("f32", {kFeatures, 1});
  t.db = e.buffer("f32", {1});
  t.next = e.buffer("i64", {});
  t.lr = e.buffer("f32", {});
  return t;
}
/// train_step's inputs besides the forward's: the momenta (w's bound with
/// `wmShard`) and the step.
inline void trainStepInputs(EntryBuilder &e, const TrainStepIds &t,
                            const std::string &wmShard = "") {
  e.input("w.momentum", "state", t.wm, wmShard);
  e.input("b.momentum", "state", t.bm);
  e.input("step", "input", t.step);
}
/// dw = x^T . dpred and db = sum(dpred), this process's (unreduced).
inline void regressionGradients(EntryBuilder &e, const ForwardIds &f, int dw,
                                int db) {
  e.gemm(f.x, f.dpred, dw, 1, kFeatures, 1, kBatch, true, false, 0, 0, 0);
  e.kernel("lr_sum", {f.dpred, db});
}
/// What follows w's update: b's, the next step, the learning rate.
inline void trainStepTail(EntryBuilder &e, const ForwardIds &f,
                          const TrainStepIds &t) {
  e.kernel("lr_momentum_b", {f.b, t.bm, t.db});
  e.kernel("inc_step", {t.step, t.next});
  e.kernel("lr_const", {t.lr});
}
/// train_step's outputs: `loss`, w (buffer `w`, bound with `wShard`), b,
/// the momenta (w's bound with `wmShard`), the next step, the learning rate.
inline void trainStepOutputs(EntryBuilder &e, const ForwardIds &f,
                             const TrainStepIds &t, int loss, int w,
                             const std::string &wShard = "",
                             const std::string &wmShard = "") {
  e.output("loss", "output", loss);
  e.output("w", "output", w, wShard);
  e.output("b", "output", f.b);
  e.output("w.momentum", "output", t.wm, wmShard);
  e.output("b.momentum", "output", t.bm);
  e.output("step", "output", t.next);
  e.output("lr", "output", t.lr);
}
/// `forward`: the forward pass on whole parameters, the loss out.
inline EntryBuilder regressionForwardEntry() {
  EntryBuilder e("forward");
  ForwardIds f = regressionForward(e);
  e.output("loss", "output", f.loss);
  return e;
}
/// The kernel of kernels.c that updates `k` rows of w with their momentum.
inline const char *momentumKernel(int64_t k) {
  return k == 4 ? "lr_momentum_w" : k == 2 ? "lr_momentum_2" : "lr_momentum_b";
}
/// Writes `plan` as plan.json, kernels.so and the params of every
/// regression artifact: whole w = b = 0 and zero momentum.
inline bool writeRegressionFiles(const std::string &dir,
                                 const std::string &plan) {
  writeBytes(dir + "/plan.json", plan);
  if (!installKernels(dir))
    return false;
  SafetensorsWriter params;
  float zeros[kFeatures] = {0, 0, 0, 0};
  params.add("w", DType::F32, {kFeatures, 1}, zeros, sizeof zeros);
  params.add("b", DType::F32, {1}, zeros, 4);
  params.add("w.momentum", DType::F32, {kFeatures, 1}, zeros, sizeof zeros);
  params.add("b.momentum", DType::F32, {1}, zeros, 4);
  return params.write(dir + "/params.safetensors", nullptr);
}

/// Writes the regression artifact: train_step, forward_backward,
/// apply_optimizer, forward; params w = b = 0 and zero momentum.
inline bool writeRegressionArtifact(const std::string &dir,
                                    bool withSeed = false) {
  std::vector<EntryBuilder> entries;
  {
    EntryBuilder e("train_step");
    ForwardIds f = regressionForward(e);
    TrainStepIds t = trainStepBuffers(e, {kFeatures, 1});
    trainStepInputs(e, t);
    if (withSeed)
      e.input("seed", "input", e.buffer("i64", {}));
    regressionGradients(e, f, t.dw, t.db);
    e.kernel("lr_momentum_w", {f.w, t.wm, t.dw});
    trainStepTail(e, f, t);
    trainStepOutputs(e, f, t, f.loss, f.w);
    entries.push_back(e);
  }
  {
    EntryBuilder e("forward_backward");
    ForwardIds f = regressionForward(e);
    int dw = e.buffer("f32", {kFeatures, 1});
    int db = e.buffer("f32", {1});
    regressionGradients(e, f, dw, db);
    e.output("loss", "output", f.loss);
    e.output("w", "grad", dw);
    e.output("b", "grad", db);
    entries.push_back(e);
  }
  {
    EntryBuilder e("apply_optimizer");
    int w = e.buffer("f32", {kFeatures, 1});
    int b = e.buffer("f32", {1});
    int wm = e.buffer("f32", {kFeatures, 1});
    int bm = e.buffer("f32", {1});
    int step = e.buffer("i64", {});
    int gw = e.buffer("f32", {kFeatures, 1});
    int gb = e.buffer("f32", {1});
    int next = e.buffer("i64", {});
    e.input("w", "param", w);
    e.input("b", "param", b);
    e.input("w.momentum", "state", wm);
    e.input("b.momentum", "state", bm);
    e.input("step", "input", step);
    e.input("w.grad", "input", gw);
    e.input("b.grad", "input", gb);
    e.kernel("lr_momentum_w", {w, wm, gw});
    e.kernel("lr_momentum_b", {b, bm, gb});
    e.kernel("inc_step", {step, next});
    e.output("w", "output", w);
    e.output("b", "output", b);
    e.output("w.momentum", "output", wm);
    e.output("b.momentum", "output", bm);
    e.output("step", "output", next);
    entries.push_back(e);
  }
  entries.push_back(regressionForwardEntry());
  return writeRegressionFiles(dir, planJson(entries));
}

/// `"shard": ...` of a binding: a slice over `axis` of a tensor of `shape`.
inline std::string shardJson(const std::string &axis,
                             const std::vector<int64_t> &shape) {
  std::string text = "{\"axis\": \"" + axis + "\", \"shape\": [";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]}";
}

/// `, "mesh": ...` for planJson's `extra`: one axis per name.
inline std::string meshJson(const std::vector<std::string> &axes,
                            const std::vector<int64_t> &shape) {
  std::string text = ", \"mesh\": {\"axes\": [";
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", \"" : "\"") + axes[i] + "\"";
  text += "], \"shape\": [";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]}";
}

/// The regression artifact as `loomc --train --dp=ranks --zero=zero` would
/// compile it (mesh dp=ranks; ranks 1, 2 or 4): train_step averages the
/// loss and the gradients over the ranks itself, and each rank updates its
/// shard of w with its shard of w's momentum (b and its momentum stay
/// whole: all-reduced). zero 1: dw all-reduced, w and dw sliced
/// (rank_slice), the updated w all-gathered; zero 2: dw reduce-scattered;
/// zero 3: w itself sharded (all-gathered before the forward, updated in
/// its shard). `forward` takes w as train_step does (zero 3: its shard,
/// all-gathered: every rank evaluates). params.safetensors holds whole
/// tensors. Equivalent to writeRegressionArtifact trained with the
/// runtime's data parallelism over `ranks` ranks.
inline bool writeMeshRegressionArtifact(const std::string &dir, int ranks,
                                        int zero) {
  const int64_t k = (kFeatures + ranks - 1) / ranks;
  std::string shard = shardJson("dp", {kFeatures, 1});
  // The forward pass on a whole w (gathered from `ws` under zero 3).
  auto forwardOf = [&](EntryBuilder &e, ForwardIds &f) {
    f.x = e.buffer("f32", {kBatch, kFeatures});
    f.y = e.buffer("f32", {kBatch, 1});
    f.b = e.buffer("f32", {1});
    f.pred = e.buffer("f32", {kBatch, 1});
    f.loss = e.buffer("f32", {});
    f.dpred = e.buffer("f32", {kBatch, 1});
    f.w = e.buffer("f32", {kFeatures, 1});
    e.input("x", "input", f.x);
    e.input("y", "input", f.y);
    int ws = -1;
    if (zero == 3) {
      ws = e.buffer("f32", {k});
      e.input("w", "param", ws, shard);
      e.collective("all_gather", "", "dp", ws, f.w);
    } else {
      e.input("w", "param", f.w);
    }
    e.input("b", "param", f.b);
    e.gemm(f.x, f.w, f.pred, 1, kBatch, 1, kFeatures, false, false, 0, 0, 0);
    e.kernel("lr_add_bias", {f.pred, f.b});
    e.kernel("lr_mse", {f.pred, f.y, f.loss, f.dpred});
    return ws;
  };
  std::vector<EntryBuilder> entries;
  {
    EntryBuilder e("train_step");
    ForwardIds f;
    int ws = forwardOf(e, f);
    TrainStepIds t = trainStepBuffers(e, {k});
    int lossMean = e.buffer("f32", {});
    int dws = e.buffer("f32", {k});
    if (zero != 3)
      ws = e.buffer("f32", {k});
    trainStepInputs(e, t, shard);
    regressionGradients(e, f, t.dw, t.db);
    e.collective("all_reduce", "mean", "dp", t.db, t.db);
    if (zero == 1) {
      e.collective("all_reduce", "mean", "dp", t.dw, t.dw);
      e.collective("rank_slice", "", "dp", t.dw, dws);
    } else {
      e.collective("reduce_scatter", "mean", "dp", t.dw, dws);
    }
    if (zero != 3)
      e.collective("rank_slice", "", "dp", f.w, ws);
    e.kernel(momentumKernel(k), {ws, t.wm, dws});
    if (zero != 3)
      e.collective("all_gather", "", "dp", ws, f.w);
    trainStepTail(e, f, t);
    e.collective("all_reduce", "mean", "dp", f.loss, lossMean);
    if (zero == 3)
      trainStepOutputs(e, f, t, lossMean, ws, shard, shard);
    else
      trainStepOutputs(e, f, t, lossMean, f.w, "", shard);
    entries.push_back(e);
  }
  {
    EntryBuilder e("forward");
    ForwardIds f;
    forwardOf(e, f);
    e.output("loss", "output", f.loss);
    entries.push_back(e);
  }
  return writeRegressionFiles(dir, planJson(entries, "\"kernels.so\"",
                                            "\"params.safetensors\"",
                                            meshJson({"dp"}, {ranks})));
}

/// The regression artifact on a mesh [dp=`dp`, tp=`tp`] (dp * tp ranks;
/// tp 1, 2 or 4): the ranks of a tp group take the same micro-batch (the
/// trainer batches by the dp coordinate alone) and split w's update, w's
/// momentum a shard along dim 0 over tp ([4 / tp, 1] per rank); the loss
/// and the gradients are averaged over dp. train_step: dw and db
/// all-reduced (mean) over dp, this tp rank's rows of dw and w taken
/// (rank_slice over tp), updated with its momentum shard, the rows
/// all-gathered over tp back into w. `forward` takes the whole w and
/// communicates nothing. Equivalent to writeRegressionArtifact trained by
/// one process with --accumulate dp.
inline bool writeTensorParallelRegressionArtifact(const std::string &dir,
                                                  int dp, int tp) {
  const int64_t k = kFeatures / tp;
  const std::string shard = "{\"axis\": \"tp\", \"shape\": [" +
                            std::to_string(kFeatures) + ", 1], \"dim\": 0}";
  std::vector<EntryBuilder> entries;
  {
    EntryBuilder e("train_step");
    ForwardIds f = regressionForward(e);
    TrainStepIds t = trainStepBuffers(e, {k, 1});
    int lossMean = e.buffer("f32", {});
    int ws = e.buffer("f32", {k, 1});
    int dws = e.buffer("f32", {k, 1});
    trainStepInputs(e, t, shard);
    regressionGradients(e, f, t.dw, t.db);
    e.collective("all_reduce", "mean", "dp", t.db, t.db);
    e.collective("all_reduce", "mean", "dp", t.dw, t.dw);
    e.collective("rank_slice", "", "tp", t.dw, dws);
    e.collective("rank_slice", "", "tp", f.w, ws);
    e.kernel(momentumKernel(k), {ws, t.wm, dws});
    e.collective("all_gather", "", "tp", ws, f.w);
    trainStepTail(e, f, t);
    e.collective("all_reduce", "mean", "dp", f.loss, lossMean);
    trainStepOutputs(e, f, t, lossMean, f.w, "", shard);
    entries.push_back(e);
  }
  entries.push_back(regressionForwardEntry());
  return writeRegressionFiles(dir, planJson(entries, "\"kernels.so\"",
                                            "\"params.safetensors\"",
                                            meshJson({"dp", "tp"}, {dp, tp})));
}

/// y = x . [1, -2, 3, 0.5] + 0.25 for `samples` random x in [-1, 1].
inline bool writeRegressionData(const std::string &path, int64_t samples,
                                uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(samples * kFeatures)),
      y(static_cast<size_t>(samples));
  const float w[kFeatures] = {1.0f, -2.0f, 3.0f, 0.5f};
  for (int64_t i = 0; i < samples; ++i) {
    float acc = 0.25f;
    for (int j = 0; j < kFeatures; ++j) {
      x[i * kFeatures + j] = u(rng);
      acc += w[j] * x[i * kFeatures + j];
    }
    y[i] = acc;
  }
  std::map<std::string, NpyArray> arrays;
  arrays["x"] = f32Array({samples, kFeatures}, x);
  arrays["y"] = f32Array({samples, 1}, y);
  return writeNpz(path, arrays, nullptr);
}

/// x.npy (every element 0.5) and y.npy (1) in `dir`: one batch of the
/// model's inputs, for an entry run by hand.
inline bool writeRegressionBatch(const std::string &dir, std::string *error) {
  std::vector<float> x(kBatch * kFeatures, 0.5f), y(kBatch, 1.0f);
  return writeNpy(dir + "/x.npy", f32Array({kBatch, kFeatures}, x), error) &&
         writeNpy(dir + "/y.npy", f32Array({kBatch, 1}, y), error);
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_FIXTURES_H
