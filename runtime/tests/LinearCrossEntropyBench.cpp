//===- LinearCrossEntropyBench.cpp - Times linear_cross_entropy steps -----===//
//
// loomrt-linear-cross-entropy-bench [--threads N] [--rows N] [--features C]
//   [--classes V] [--runs R] [--scratch-mib M] [--tile ROWSxCLASSES]
//   [--w-cv] [--openblas]
//
// Runs the forward and the backward of the fused head
// (src/cpu/CpuLinearCrossEntropy.h) on random f32 tensors, then the same
// kernel with one tile of all N x V logits: the unfused head (one logits
// GEMM, the softmax and loss over [N, V], the dx and dw GEMMs, with
// N x V x 4 bytes of logits). One warm-up then R timed runs each; prints
// the fastest and the median in milliseconds, the GEMMs' rate (2 N C V
// flops forward, 6 N C V backward) and the scratch each needs. Defaults:
// GPT-2 small's head (N 2048 tokens, C 768, V 50304), w [V, C], oneDNN
// where it opens. The two alternate run by run. Not a test: timings
// depend on the machine.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuGemm.h"
#include "cpu/CpuLinearCrossEntropy.h"

#include "loomrt/Backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

using namespace loomrt;

namespace {

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--threads N] [--rows N] [--features C] "
               "[--classes V] [--runs R] [--scratch-mib M] "
               "[--tile ROWSxCLASSES] [--w-cv] [--openblas]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 2, runs = 5;
  int64_t N = 2048, C = 768, V = 50304;
  double scratchMib = 0;         // 0: the kernel's default budget
  LinearCrossEntropyBlocks tile; // zero: from the budget
  bool transposeW = true, openblas = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--w-cv") {
      transposeW = false;
      continue;
    }
    if (arg == "--openblas") {
      openblas = true;
      continue;
    }
    const char *v = i + 1 < argc ? argv[++i] : nullptr;
    if (!v)
      return usage(argv[0]);
    if (arg == "--threads")
      threads = std::atoi(v);
    else if (arg == "--rows")
      N = std::atoll(v);
    else if (arg == "--features")
      C = std::atoll(v);
    else if (arg == "--classes")
      V = std::atoll(v);
    else if (arg == "--runs")
      runs = std::atoi(v);
    else if (arg == "--scratch-mib")
      scratchMib = std::atof(v);
    else if (arg == "--tile" &&
             std::sscanf(v, "%lldx%lld", (long long *)&tile.rows,
                         (long long *)&tile.classes) == 2)
      continue;
    else
      return usage(argv[0]);
  }
  if (threads < 1 || runs < 1 || N < 1 || C < 1 || V < 1 || scratchMib < 0)
    return usage(argv[0]);
  setCpuThreads(threads); // before the OpenMP team starts
  DnnlGemm gemm;
  if (!openblas)
    gemm.open();

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(N * C), w(V * C), dx(N * C), dw(V * C), lse(N), loss(1),
      dloss(1, 1.0f);
  for (float &e : x)
    e = u(rng);
  for (float &e : w)
    e = 0.1f * u(rng);
  std::vector<int64_t> labels(N);
  std::uniform_int_distribution<int64_t> label(0, V - 1);
  for (int64_t &l : labels)
    l = label(rng);

  const LinearCrossEntropyShape shape{N, C, V};
  LinearCrossEntropyTensors t;
  t.x = x.data(), t.w = w.data(), t.labels = labels.data();
  t.lse = lse.data(), t.loss = loss.data(), t.dloss = dloss.data();
  t.dx = dx.data(), t.dw = dw.data();
  LinearCrossEntropyStep step;
  step.transposeW = transposeW;
  step.reduction = LinearCrossEntropyReduction::Mean;

  const LinearCrossEntropyBlocks fused =
      tile.rows > 0 && tile.classes > 0
          ? LinearCrossEntropyBlocks{std::min(tile.rows, N),
                                     std::min(tile.classes, V)}
      : scratchMib > 0
          ? linearCrossEntropyBlocks(
                shape, static_cast<int64_t>(scratchMib * (1 << 20) / 4))
          : linearCrossEntropyBlocks(shape);
  const LinearCrossEntropyBlocks unfused{N, V};
  std::printf("linear_cross_entropy N=%lld C=%lld V=%lld, w %s, f32, %d "
              "threads, GEMMs on %s\n",
              (long long)N, (long long)C, (long long)V,
              transposeW ? "[V, C]" : "[C, V]", threads, cpuGemmLibrary(gemm));
  const double flops = 2.0 * double(N) * double(C) * double(V);
  // Each variant's scratch allocated once, as an arena would hold the
  // unfused head's logits (and so that neither pays for fresh pages).
  struct Variant {
    const char *name = "";
    LinearCrossEntropyBlocks blocks;
    float *scratch = nullptr;
    std::vector<double> ms[2]; ///< forward, backward
  };
  Variant variants[2];
  variants[0].name = "fused", variants[0].blocks = fused;
  variants[1].name = "unfused", variants[1].blocks = unfused;
  for (Variant &v : variants) {
    const uint64_t bytes = linearCrossEntropyScratchBytes(shape, v.blocks);
    v.scratch = static_cast<float *>(
        ::operator new(bytes, std::align_val_t(64), std::nothrow));
    if (!v.scratch) {
      std::fprintf(stderr, "out of memory for %s's scratch\n", v.name);
      return 1;
    }
    std::printf("%-7s: tiles of %lld rows x %lld classes, scratch %.1f MiB "
                "(N x V x 4 = %.1f MiB)\n",
                v.name, (long long)v.blocks.rows, (long long)v.blocks.classes,
                double(bytes) / (1 << 20), double(N) * V * 4 / (1 << 20));
  }
  // The variants alternate, run by run, so that a machine whose speed
  // drifts (shared cores) slows both alike.
  float losses[2] = {};
  for (int r = 0; r <= runs; ++r)
    for (int k = 0; k < 2; ++k)
      for (int d = 0; d < 2; ++d) {
        step.direction = d ? LinearCrossEntropyDirection::Backward
                           : LinearCrossEntropyDirection::Forward;
        std::string error;
        auto start = std::chrono::steady_clock::now();
        if (!runLinearCrossEntropy(step, shape, t, gemm, &error,
                                   variants[k].blocks, variants[k].scratch)) {
          std::fprintf(stderr, "%s\n", error.c_str());
          return 1;
        }
        std::chrono::duration<double, std::milli> took =
            std::chrono::steady_clock::now() - start;
        if (r > 0) // the first run warms the caches and the thread teams
          variants[k].ms[d].push_back(took.count());
        if (d == 0)
          losses[k] = loss[0];
      }
  for (Variant &v : variants) {
    for (int d = 0; d < 2; ++d) {
      std::vector<double> &ms = v.ms[d];
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      std::printf("%-7s %-8s min %9.1f ms  median %9.1f ms  %6.1f GFLOP/s\n",
                  v.name, d ? "backward" : "forward", ms.front(), median,
                  (d ? 3 : 1) * flops / (median * 1e6));
    }
    ::operator delete(v.scratch, std::align_val_t(64), std::nothrow);
  }
  std::printf("loss: fused %.6f, unfused %.6f\n", losses[0], losses[1]);
  return 0;
}
