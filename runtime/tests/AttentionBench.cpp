//===- AttentionBench.cpp - Times the CPU backend's attention steps -------===//
//
// loomrt-attention-bench [--threads N] [--batch B] [--heads H] [--kv-heads G]
//   [--seq T] [--dim D] [--no-causal] [--window W] [--documents L]
//   [--dropout P] [--runs R] [--isa NAME]
//
// Runs the forward and the backward attention loops (src/cpu/CpuAttention.h)
// on random f32 tensors, one warm-up then R timed runs each, and prints the
// fastest and the median in milliseconds with the rate of the block
// products (4 B H T S D flops forward, 10 B H T S D backward, half of it
// under causal; with --documents, packed documents of L tokens each, the
// rate is still counted over all those pairs). Not a test: timings depend
// on the machine.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuAttention.h"

#include "loomrt/Backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace loomrt;

namespace {

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--threads N] [--batch B] [--heads H] "
               "[--kv-heads G] [--seq T] [--dim D] [--no-causal] "
               "[--window W] [--documents L] [--dropout P] [--runs R] "
               "[--isa avx512|avx2|baseline]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 2, runs = 5;
  int64_t batch = 1, heads = 8, kvHeads = 0, seq = 2048, dim = 64, window = 0;
  int64_t documents = 0;
  double dropout = 0.0;
  bool causal = true;
  AttentionIsa isa = AttentionIsa::Best;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char *v = nullptr;
    if (arg == "--no-causal") {
      causal = false;
      continue;
    }
    if (!(v = value()))
      return usage(argv[0]);
    if (arg == "--threads")
      threads = std::atoi(v);
    else if (arg == "--batch")
      batch = std::atoll(v);
    else if (arg == "--heads")
      heads = std::atoll(v);
    else if (arg == "--kv-heads")
      kvHeads = std::atoll(v);
    else if (arg == "--seq")
      seq = std::atoll(v);
    else if (arg == "--dim")
      dim = std::atoll(v);
    else if (arg == "--window")
      window = std::atoll(v);
    else if (arg == "--documents")
      documents = std::atoll(v);
    else if (arg == "--dropout")
      dropout = std::atof(v);
    else if (arg == "--runs")
      runs = std::atoi(v);
    else if (arg == "--isa") {
      std::string name = v;
      isa = name == "avx512"     ? AttentionIsa::Avx512
            : name == "avx2"     ? AttentionIsa::Avx2
            : name == "baseline" ? AttentionIsa::Baseline
                                 : AttentionIsa::Best;
    } else
      return usage(argv[0]);
  }
  if (kvHeads == 0)
    kvHeads = heads;
  if (threads < 1 || runs < 1 || batch < 1 || heads < 1 || kvHeads < 1 ||
      heads % kvHeads || seq < 1 || dim < 1 || window < 0 || documents < 0 ||
      (window && !causal) || !(dropout >= 0.0 && dropout < 1.0))
    return usage(argv[0]);
  setCpuThreads(threads); // before the OpenMP team starts

  std::vector<AttentionIsa> available = availableAttentionIsas();
  if (isa == AttentionIsa::Best ||
      std::find(available.begin(), available.end(), isa) == available.end())
    isa = available.front();

  const int64_t T = seq, S = seq, D = dim;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float &e : x)
      e = u(rng);
    return x;
  };
  std::vector<float> q = random(batch * heads * T * D),
                     k = random(batch * kvHeads * S * D),
                     v = random(batch * kvHeads * S * D),
                     dout = random(batch * heads * T * D);
  std::vector<float> out(q.size()), lse(batch * heads * T), dq(q.size()),
      dk(k.size()), dv(v.size());

  PlanBuffer qb, kb;
  qb.shape = {batch, heads, T, D};
  kb.shape = {batch, kvHeads, S, D};
  AttentionShape shape = attentionShape(qb, kb, kb, nullptr, nullptr);
  AttentionTensors t;
  t.q = q.data(), t.k = k.data(), t.v = v.data();
  t.out = out.data(), t.lse = lse.data();
  t.dout = dout.data();
  t.dq = dq.data(), t.dk = dk.data(), t.dv = dv.data();
  std::vector<int64_t> ids;
  if (documents > 0) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < T; ++i)
        ids.push_back(i / documents);
    t.segments = ids.data();
    t.segments64 = true;
  }
  AttentionStep step;
  step.scale = 1.0 / std::sqrt(double(D));
  step.causal = causal;
  step.window = window;
  if (dropout > 0.0) {
    step.seed = 0; // the value is t.seed
    step.dropout = static_cast<float>(dropout);
    step.stream = 1;
    t.seed = 12345;
  }

  std::printf("attention B=%lld Hq=%lld Hkv=%lld T=S=%lld D=%lld%s, f32, "
              "%d threads, %s",
              (long long)batch, (long long)heads, (long long)kvHeads,
              (long long)T, (long long)D, causal ? " causal" : "", threads,
              attentionIsaName(isa));
  if (documents > 0)
    std::printf(", documents of %lld tokens", (long long)documents);
  if (dropout > 0.0)
    std::printf(", dropout %g", dropout);
  std::printf("\n");
  // Products per direction: 2 (forward) or 5 (backward) GEMMs of
  // T x S x D, halved under causal (the window is not counted).
  const double pairs = double(batch) * heads * T * S * (causal ? 0.5 : 1.0);
  for (AttentionDirection direction :
       {AttentionDirection::Forward, AttentionDirection::Backward}) {
    step.direction = direction;
    std::vector<double> ms;
    for (int r = 0; r <= runs; ++r) {
      std::string error;
      auto start = std::chrono::steady_clock::now();
      if (!runAttention(step, shape, t, &error, isa)) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 1;
      }
      std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      if (r > 0) // the first run warms the caches and the OpenMP team
        ms.push_back(took.count());
    }
    std::sort(ms.begin(), ms.end());
    const bool forward = direction == AttentionDirection::Forward;
    const double flops = (forward ? 4.0 : 10.0) * pairs * double(D);
    std::printf("  %-8s min %8.2f ms  median %8.2f ms  %6.1f GFLOP/s\n",
                fusedDirectionName(direction), ms.front(),
                ms[ms.size() / 2], flops / (ms.front() * 1e6));
  }
  return 0;
}
