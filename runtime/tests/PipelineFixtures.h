//===- PipelineFixtures.h - Hand-built pipeline-parallel artifacts --------===//
//
// A chain model cut into S stages, written as loomc --pp would lay it out
// (docs/pipeline.md, "In plan.json"), and the same model as one
// artifact (forward_backward + apply_optimizer) that one process trains
// with --accumulate M: the reference. Batch 8, 4 features (kernels.c's
// regression kernels):
//
//   stage 0:          h0 = x . w0                      (w0 [4, 1])
//   stage k (middle): hk = h(k-1) . wk                 (wk [1, 1])
//   stage S - 1:      pred = h(S-2) . w(S-1) + b; loss = mean((pred - y)^2)
//
// Boundary k is hk ([8, 1] f32, with a gradient). Every stage's backward
// recomputes what it needs from its inputs; the two artifacts run the same
// GEMMs and kernels on the same values, so they agree bit for bit when no
// sum is reassociated. Momentum SGD (lr 0.05, momentum 0.9) on each param.
//
// Tied (`ChainPipeline::tied`, a list of stages): those stages read one
// more param, `tie` ([1, 1]; a head tied to the embedding, in small):
// stage k < S - 1 computes (h(k-1) . wk) . tie, the last stage adds it,
// pred = h . w + tie + b. (Were every use a factor of the product, every
// stage's gradient of `tie` would be the same number, and the order of
// the sums below would not show.) The plan declares it in the pipeline's
// `shared`; the first listed stage owns it. The one-artifact reference
// adds the stages' gradients of `tie` per micro-batch (in stage order)
// before --accumulate sums the micro-batches; the pipeline sums each
// stage's over the micro-batches first, then adds the stages' sums: the
// two agree to rounding only.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_PIPELINEFIXTURES_H
#define LOOMRT_TESTS_PIPELINEFIXTURES_H

#include "Fixtures.h"

#include "loomrt/PipelineSchedule.h"

#include <algorithm>
#include <string>
#include <vector>

namespace loomrt::test {

inline std::string chainParam(int k) { return "w" + std::to_string(k); }
/// The param the tied stages share.
inline const char *kTie = "tie";
inline bool chainTied(const std::vector<int> &tied, int s) {
  return std::find(tied.begin(), tied.end(), s) != tied.end();
}
inline std::string chainBoundary(int b) {
  return "pp.b" + std::to_string(b) + ".0";
}

/// What stage `s`'s backward entries return.
enum class BackwardKind { Full, Input, Weight };

/// A stage's input ids: its input (x or the boundary), its weight, and
/// the shared `tie` (-1 when the stage is not tied).
struct ChainIn {
  int in, w, tie = -1;
  int64_t width; ///< columns of `in`: 4 for x, 1 for a boundary
};

/// The stage's input and weight (x . w0, or h . wk), and `tie`.
inline ChainIn chainInputs(EntryBuilder &e, int s, bool tied = false) {
  ChainIn c;
  c.width = s == 0 ? kFeatures : 1;
  c.in = e.buffer("f32", {kBatch, c.width});
  e.input(s == 0 ? "x" : chainBoundary(s - 1), "input", c.in);
  c.w = e.buffer("f32", {c.width, 1});
  e.input(chainParam(s), "param", c.w);
  if (tied) {
    c.tie = e.buffer("f32", {1, 1});
    e.input(kTie, "param", c.tie);
  }
  return c;
}

/// The stage's product: in . w, then (tied) times `tie`, or plus `tie`
/// for the last stage (`last`). `*u` (when not null): in . w, what the
/// gradient of a factor `tie` needs.
inline int chainProduct(EntryBuilder &e, const ChainIn &c, bool last,
                        int *u = nullptr) {
  int h = e.buffer("f32", {kBatch, 1});
  e.gemm(c.in, c.w, h, 1, kBatch, 1, c.width, false, false, 0, 0, 0);
  if (u)
    *u = h;
  if (c.tie < 0)
    return h;
  if (last) {
    e.kernel("lr_add_bias", {h, c.tie});
    return h;
  }
  int t = e.buffer("f32", {kBatch, 1});
  e.gemm(h, c.tie, t, 1, kBatch, 1, 1, false, false, 0, 0, 0);
  return t;
}

/// The last stage's tail: pred += b, the loss and dpred. Returns {b, y,
/// loss, dpred}.
struct ChainTail {
  int b, y, loss, dpred;
};
inline ChainTail chainTail(EntryBuilder &e, int pred) {
  ChainTail t;
  t.b = e.buffer("f32", {1});
  t.y = e.buffer("f32", {kBatch, 1});
  t.loss = e.buffer("f32", {});
  t.dpred = e.buffer("f32", {kBatch, 1});
  e.input("b", "param", t.b);
  e.input("y", "input", t.y);
  e.kernel("lr_add_bias", {pred, t.b});
  e.kernel("lr_mse", {pred, t.y, t.loss, t.dpred});
  return t;
}

inline EntryBuilder chainForward(int s, int S, bool tied = false) {
  EntryBuilder e("stage" + std::to_string(s) + "_forward");
  ChainIn c = chainInputs(e, s, tied);
  int h = chainProduct(e, c, s == S - 1);
  if (s < S - 1) {
    e.output(chainBoundary(s), "output", h);
  } else {
    ChainTail t = chainTail(e, h);
    e.output("loss", "output", t.loss);
  }
  return e;
}

inline EntryBuilder chainBackward(int s, int S, BackwardKind kind,
                                  bool tied = false) {
  const char *suffix = kind == BackwardKind::Full    ? "_backward"
                       : kind == BackwardKind::Input ? "_backward_input"
                                                     : "_backward_weight";
  EntryBuilder e("stage" + std::to_string(s) + suffix);
  ChainIn c = chainInputs(e, s, tied);
  int dout, u = -1;
  if (s < S - 1) {
    dout = e.buffer("f32", {kBatch, 1});
    e.input(chainBoundary(s) + ".grad", "input", dout);
    if (tied) // recomputed: the gradient of `tie` needs in . w
      chainProduct(e, c, false, &u);
  } else {
    int pred = chainProduct(e, c, true);
    ChainTail t = chainTail(e, pred);
    dout = t.dpred;
  }
  if (tied && s == S - 1 && kind != BackwardKind::Input) {
    // pred = h . w + tie + b: d tie = sum(dpred).
    int dtie = e.buffer("f32", {1, 1});
    e.kernel("lr_sum", {dout, dtie});
    e.output(kTie, "grad", dtie);
  } else if (tied && s < S - 1) {
    // d tie = u^T dout; the gradient of u = dout . tie^T.
    if (kind != BackwardKind::Input) {
      int dtie = e.buffer("f32", {1, 1});
      e.gemm(u, dout, dtie, 1, 1, 1, kBatch, true, false, 0, 0, 0);
      e.output(kTie, "grad", dtie);
    }
    int du = e.buffer("f32", {kBatch, 1});
    e.gemm(dout, c.tie, du, 1, kBatch, 1, 1, false, true, 0, 0, 0);
    dout = du;
  }
  if (kind != BackwardKind::Input) {
    int dw = e.buffer("f32", {c.width, 1});
    e.gemm(c.in, dout, dw, 1, c.width, 1, kBatch, true, false, 0, 0, 0);
    e.output(chainParam(s), "grad", dw);
    if (s == S - 1) {
      int db = e.buffer("f32", {1});
      e.kernel("lr_sum", {dout, db});
      e.output("b", "grad", db);
    }
  }
  if (kind != BackwardKind::Weight && s > 0) {
    int din = e.buffer("f32", {kBatch, 1});
    e.gemm(dout, c.w, din, 1, kBatch, 1, 1, false, true, 0, 0, 0);
    e.output(chainBoundary(s - 1) + ".grad", "output", din);
  }
  return e;
}

/// Momentum on `w` (and on b for the last stage), the step counter and the
/// learning rate; with `dpRanks` > 1 the gradients are averaged over mesh
/// axis dp first (in place), as loomc --dp's apply_gradients does.
inline EntryBuilder chainApply(int s, int S, int dpRanks,
                               bool gradFields = false, bool ownsTie = false) {
  EntryBuilder e("stage" + std::to_string(s) + "_apply_gradients");
  int64_t width = s == 0 ? kFeatures : 1;
  std::vector<std::pair<std::string, int64_t>> params = {
      {chainParam(s), width}};
  if (s == S - 1)
    params.push_back({"b", 1});
  if (ownsTie)
    params.push_back({kTie, 1});
  std::vector<std::vector<int>> ids;
  for (const auto &[name, n] : params) {
    std::vector<int64_t> shape =
        name == "b" ? std::vector<int64_t>{1} : std::vector<int64_t>{n, 1};
    int w = e.buffer("f32", shape), m = e.buffer("f32", shape),
        g = e.buffer("f32", shape);
    e.input(name, "param", w);
    e.input(name + ".momentum", "state", m);
    e.input(name + ".grad", "input", g);
    ids.push_back({w, m, g});
  }
  int step = e.buffer("i64", {}), next = e.buffer("i64", {}),
      lr = e.buffer("f32", {});
  e.input("step", "input", step);
  for (size_t i = 0; i < params.size(); ++i) {
    if (dpRanks > 1)
      e.collective("all_reduce", "mean", "dp", ids[i][2], ids[i][2],
                   gradFields ? params[i].first : "");
    e.kernel(params[i].second == kFeatures ? "lr_momentum_w" : "lr_momentum_b",
             {ids[i][0], ids[i][1], ids[i][2]});
  }
  e.kernel("inc_step", {step, next});
  e.kernel("lr_const", {lr});
  for (size_t i = 0; i < params.size(); ++i) {
    e.output(params[i].first, "output", ids[i][0]);
    e.output(params[i].first + ".momentum", "output", ids[i][1]);
  }
  e.output("step", "output", next);
  e.output("lr", "output", lr);
  return e;
}

/// A schedule's lists as plan.json's `actions`.
inline std::string actionsJson(const std::vector<std::vector<std::string>> &l) {
  std::string text = "[";
  for (size_t r = 0; r < l.size(); ++r) {
    text += r ? ",\n  [" : "\n  [";
    for (size_t k = 0; k < l[r].size(); ++k)
      text += (k ? ", \"" : "\"") + l[r][k] + "\"";
    text += "]";
  }
  return text + "]";
}

inline std::vector<std::vector<std::string>>
actionTokens(const pp::Schedule &schedule) {
  std::vector<std::vector<std::string>> lists;
  for (const std::vector<pp::Action> &list : schedule.actions) {
    lists.emplace_back();
    for (const pp::Action &a : list)
      lists.back().push_back(pp::formatAction(a));
  }
  return lists;
}

/// Splits a line of blank-separated tokens.
inline std::vector<std::string> tokens(const std::string &line) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string::npos)
      end = line.size();
    if (end > at)
      out.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

/// The most micro-batches stage `s` holds between its F and its B (or W)
/// in `list`: what the trainer's stash must measure.
inline int64_t peakInFlight(const std::vector<std::string> &list, int64_t s) {
  int64_t now = 0, peak = 0;
  for (const std::string &t : list) {
    pp::Action a;
    std::string why;
    if (!pp::parseAction(t, &a, &why) || a.stage != s)
      continue;
    if (a.kind == pp::ActionKind::Forward)
      peak = std::max(peak, ++now);
    if (a.kind == pp::ActionKind::Backward ||
        a.kind == pp::ActionKind::BackwardWeight)
      --now;
  }
  return peak;
}

/// The pipelined chain model.
struct ChainPipeline {
  int ranks = 2;         ///< P
  int virtualStages = 1; ///< V
  int microbatches = 4;  ///< M
  int dp = 1;            ///< data-parallel rows (mesh [dp, pp] when > 1)
  /// A tp axis after pp (mesh [pp, tp]) that no step uses: its ranks run
  /// the same stages on the same micro-batches.
  int tp = 1;
  std::string schedule = "1f1b";
  /// The dp reductions name their gradients (`grad`: gradient
  /// compression's), and the plan's top level carries `extraTop`.
  bool gradFields = false;
  std::string extraTop;
  /// The action lists; empty: pp::generateSchedule(schedule, ...).
  std::vector<std::vector<std::string>> actions;
  /// The stages that read the shared `tie` (increasing; the first owns
  /// it); empty: none. The plan's `shared` lists them.
  std::vector<int> tied;

  int stages() const { return ranks * virtualStages; }

  /// The lists (generated unless given); empty with a failed check when
  /// the generator refuses.
  std::vector<std::vector<std::string>> lists() const {
    if (!actions.empty())
      return actions;
    pp::Schedule s;
    std::string error;
    if (!pp::generateSchedule(schedule, ranks, virtualStages, microbatches, &s,
                              &error)) {
      std::fprintf(stderr, "generateSchedule: %s\n", error.c_str());
      return {};
    }
    return actionTokens(s);
  }

  /// `, "mesh": ..., "pipeline": ...` for planJson.
  std::string extra() const {
    std::vector<std::string> axes = {"pp"};
    std::vector<int64_t> sizes = {ranks};
    if (dp > 1) {
      axes.insert(axes.begin(), "dp");
      sizes.insert(sizes.begin(), dp);
    }
    if (tp > 1) {
      axes.push_back("tp");
      sizes.push_back(tp);
    }
    std::string mesh = meshJson(axes, sizes);
    std::string boundaries = "[";
    for (int b = 0; b + 1 < stages(); ++b)
      boundaries += std::string(b ? ", " : "") + "[{\"name\": \"" +
                    chainBoundary(b) +
                    "\", \"dtype\": \"f32\", \"shape\": [8, 1], "
                    "\"grad\": true}]";
    boundaries += "]";
    std::string shared;
    if (!tied.empty()) {
      shared = ",\n\"shared\": [{\"name\": \"" + std::string(kTie) +
               "\", \"stages\": [";
      for (size_t i = 0; i < tied.size(); ++i)
        shared += (i ? ", " : "") + std::to_string(tied[i]);
      shared += "]}]";
    }
    return mesh + extraTop + ", \"pipeline\": {\"axis\": \"pp\", \"stages\": " +
           std::to_string(stages()) +
           ", \"virtual_stages\": " + std::to_string(virtualStages) +
           ", \"microbatches\": " + std::to_string(microbatches) +
           ", \"schedule\": \"" + schedule +
           "\",\n\"boundaries\": " + boundaries +
           ",\n\"actions\": " + actionsJson(lists()) + shared + "}";
  }

  /// Every stage's entries, the backwards the lists use.
  std::vector<EntryBuilder> entries() const {
    std::vector<std::vector<std::string>> l = lists();
    std::vector<EntryBuilder> out;
    const int S = stages();
    for (int s = 0; s < S; ++s) {
      bool full = false, split = false;
      for (const auto &list : l)
        for (const std::string &t : list) {
          pp::Action a;
          std::string error;
          if (pp::parseAction(t, &a, &error) && a.stage == s) {
            full |= a.kind == pp::ActionKind::Backward;
            split |= a.kind == pp::ActionKind::BackwardInput ||
                     a.kind == pp::ActionKind::BackwardWeight;
          }
        }
      const bool tie = chainTied(tied, s);
      out.push_back(chainForward(s, S, tie));
      if (full)
        out.push_back(chainBackward(s, S, BackwardKind::Full, tie));
      if (split) {
        if (s > 0) // as loomc: stage 0 has no input gradients
          out.push_back(chainBackward(s, S, BackwardKind::Input, tie));
        out.push_back(chainBackward(s, S, BackwardKind::Weight, tie));
      }
      out.push_back(chainApply(s, S, dp, gradFields, tie && s == tied.front()));
    }
    return out;
  }

  std::string plan() const {
    return planJson(entries(), "\"kernels.so\"", "\"params.safetensors\"",
                    extra());
  }
};

/// params.safetensors of the chain model of S stages: w0 = [0.1, 0.2,
/// -0.1, 0.3], wk = 0.9 + 0.05 k, b = 0, (tied) tie = 1.1, momenta 0.
inline bool writeChainParams(const std::string &path, int S,
                             bool tied = false) {
  SafetensorsWriter params;
  float w0[kFeatures] = {0.1f, 0.2f, -0.1f, 0.3f};
  float zeros[kFeatures] = {0, 0, 0, 0};
  params.add("w0", DType::F32, {kFeatures, 1}, w0, sizeof w0);
  params.add("w0.momentum", DType::F32, {kFeatures, 1}, zeros, sizeof zeros);
  std::vector<float> wk(size_t(S), 0);
  for (int k = 1; k < S; ++k) {
    wk[size_t(k)] = 0.9f + 0.05f * float(k);
    params.add(chainParam(k), DType::F32, {1, 1}, &wk[size_t(k)], 4);
    params.add(chainParam(k) + ".momentum", DType::F32, {1, 1}, zeros, 4);
  }
  params.add("b", DType::F32, {1}, zeros, 4);
  params.add("b.momentum", DType::F32, {1}, zeros, 4);
  float tie = 1.1f;
  if (tied) {
    params.add(kTie, DType::F32, {1, 1}, &tie, 4);
    params.add(std::string(kTie) + ".momentum", DType::F32, {1, 1}, zeros, 4);
  }
  return params.write(path, nullptr);
}

inline bool writeChainPipelineArtifact(const std::string &dir,
                                       const ChainPipeline &p) {
  std::filesystem::create_directories(dir);
  writeBytes(dir + "/plan.json", p.plan());
  return installKernels(dir) && writeChainParams(dir + "/params.safetensors",
                                                 p.stages(), !p.tied.empty());
}

/// The chain model of S stages as one artifact: forward_backward (the
/// stages' forwards, then their backwards from the last) and
/// apply_optimizer. `tied`: as ChainPipeline's.
inline bool writeChainReferenceArtifact(const std::string &dir, int S,
                                        const std::vector<int> &tied = {}) {
  std::filesystem::create_directories(dir);
  std::vector<EntryBuilder> entries;
  {
    EntryBuilder e("forward_backward");
    int x = e.buffer("f32", {kBatch, kFeatures});
    e.input("x", "input", x);
    int tie = -1;
    if (!tied.empty()) {
      tie = e.buffer("f32", {1, 1});
      e.input(kTie, "param", tie);
    }
    // in[s]: stage s's input; u[s]: in[s] . w[s] (before `tie`).
    std::vector<int> in = {x}, w, u;
    for (int s = 0; s < S; ++s) {
      int64_t width = s == 0 ? kFeatures : 1;
      w.push_back(e.buffer("f32", {width, 1}));
      e.input(chainParam(s), "param", w.back());
      u.push_back(e.buffer("f32", {kBatch, 1}));
      e.gemm(in[size_t(s)], w.back(), u.back(), 1, kBatch, 1, width, false,
             false, 0, 0, 0);
      int h = u.back();
      if (chainTied(tied, s) && s == S - 1) {
        e.kernel("lr_add_bias", {h, tie});
      } else if (chainTied(tied, s)) {
        h = e.buffer("f32", {kBatch, 1});
        e.gemm(u.back(), tie, h, 1, kBatch, 1, 1, false, false, 0, 0, 0);
      }
      in.push_back(h);
    }
    ChainTail t = chainTail(e, in.back());
    int dout = t.dpred;
    std::vector<int> dties(size_t(S), -1);
    for (int s = S - 1; s >= 0; --s) {
      int64_t width = s == 0 ? kFeatures : 1;
      if (chainTied(tied, s) && s == S - 1) {
        dties[size_t(s)] = e.buffer("f32", {1, 1});
        e.kernel("lr_sum", {dout, dties[size_t(s)]});
      } else if (chainTied(tied, s)) {
        dties[size_t(s)] = e.buffer("f32", {1, 1});
        e.gemm(u[size_t(s)], dout, dties[size_t(s)], 1, 1, 1, kBatch, true,
               false, 0, 0, 0);
        int du = e.buffer("f32", {kBatch, 1});
        e.gemm(dout, tie, du, 1, kBatch, 1, 1, false, true, 0, 0, 0);
        dout = du;
      }
      int dw = e.buffer("f32", {width, 1});
      e.gemm(in[size_t(s)], dout, dw, 1, width, 1, kBatch, true, false, 0, 0,
             0);
      e.output(chainParam(s), "grad", dw);
      if (s == S - 1) {
        int db = e.buffer("f32", {1});
        e.kernel("lr_sum", {dout, db});
        e.output("b", "grad", db);
      }
      if (s > 0) {
        int din = e.buffer("f32", {kBatch, 1});
        e.gemm(dout, w[size_t(s)], din, 1, kBatch, 1, 1, false, true, 0, 0, 0);
        dout = din;
      }
    }
    if (!tied.empty()) {
      // The stages' contributions, per micro-batch, in stage order.
      int total = dties[size_t(tied[0])];
      for (size_t i = 1; i < tied.size(); ++i) {
        int sum = e.buffer("f32", {1, 1});
        e.kernel("add_f32_1", {total, dties[size_t(tied[i])], sum});
        total = sum;
      }
      e.output(kTie, "grad", total);
    }
    e.output("loss", "output", t.loss);
    entries.push_back(e);
  }
  {
    EntryBuilder e("apply_optimizer");
    std::vector<std::pair<std::string, int64_t>> params;
    for (int s = 0; s < S; ++s)
      params.push_back({chainParam(s), s == 0 ? kFeatures : 1});
    params.push_back({"b", 1});
    if (!tied.empty())
      params.push_back({kTie, 1});
    std::vector<std::vector<int>> ids;
    for (const auto &[name, n] : params) {
      std::vector<int64_t> shape =
          name == "b" ? std::vector<int64_t>{1} : std::vector<int64_t>{n, 1};
      int w = e.buffer("f32", shape), m = e.buffer("f32", shape),
          g = e.buffer("f32", shape);
      e.input(name, "param", w);
      e.input(name + ".momentum", "state", m);
      e.input(name + ".grad", "input", g);
      ids.push_back({w, m, g});
    }
    int step = e.buffer("i64", {}), next = e.buffer("i64", {});
    e.input("step", "input", step);
    for (size_t i = 0; i < params.size(); ++i)
      e.kernel(params[i].second == kFeatures ? "lr_momentum_w"
                                             : "lr_momentum_b",
               {ids[i][0], ids[i][1], ids[i][2]});
    e.kernel("inc_step", {step, next});
    for (size_t i = 0; i < params.size(); ++i) {
      e.output(params[i].first, "output", ids[i][0]);
      e.output(params[i].first + ".momentum", "output", ids[i][1]);
    }
    e.output("step", "output", next);
    entries.push_back(e);
  }
  writeBytes(dir + "/plan.json", planJson(entries));
  return installKernels(dir) &&
         writeChainParams(dir + "/params.safetensors", S, !tied.empty());
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_PIPELINEFIXTURES_H
