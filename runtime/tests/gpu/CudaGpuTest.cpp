//===- CudaGpuTest.cpp - The CUDA backend on a real GPU
//--------------------===//
//
// Runs where a GPU is: the real driver, cuBLASLt, PTX JIT, cubins from
// ptxas, CUDA graphs, and training, each compared with the CPU backend on the
// same plan. Without a driver or a device it prints why and exits 77 (CTest
// reports the test as skipped). Kernels: kernels.ptx (from kernels.cu, see
// there). Run: ctest --test-dir build-rt -R CudaGpu --output-on-failure, or
// build-rt/tests/loomrt-cuda-gpu-test directly.
//
//===----------------------------------------------------------------------===//

#include "../CudaFixtures.h"
#include "../Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace loomrt;
using namespace loomrt::test;

namespace {

int failures = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok)
    ++failures;
}

/// toCudaPlan, with `kernels` also where the cpu plan had none.
std::string toCuda(const std::string &cpuPlan, int sm,
                   const std::string &kernels, const std::string &ptx) {
  return replaceAll(toCudaPlan(cpuPlan, sm, kernels, ptx), "\"kernels\": null",
                    "\"kernels\": " + kernels);
}

void copyPtx(const std::string &dir) {
  writeBytes(dir + "/kernels.ptx", readBytes(LOOMRT_GPU_PTX_PATH));
}

std::unique_ptr<Artifact> load(const std::string &dir, bool graphs = true,
                               std::FILE *log = nullptr) {
  LoadOptions options;
  options.graphs = graphs;
  options.log = log;
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir, options, &error);
  if (!artifact)
    std::printf("  load %s: %s\n", dir.c_str(), error.c_str());
  return artifact;
}

double value(const NpyArray &a, size_t i) {
  if (a.dtype == DType::F64) {
    double d;
    std::memcpy(&d, a.data.data() + 8 * i, 8);
    return d;
  }
  float f;
  std::memcpy(&f, a.data.data() + 4 * i, 4);
  return f;
}

/// max |got - want| / (1 + |want|).
double maxError(const NpyArray &got, const NpyArray &want) {
  if (got.data.size() != want.data.size())
    return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < want.data.size() / dtypeSize(want.dtype); ++i)
    worst = std::max(worst, std::fabs(value(got, i) - value(want, i)) /
                                (1 + std::fabs(value(want, i))));
  return worst;
}

NpyArray random(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  NpyArray arr = makeArray(dtype, shape, nullptr);
  for (size_t j = 0; j < arr.data.size() / dtypeSize(dtype); ++j) {
    double v = u(rng);
    float f = float(v);
    if (dtype == DType::F64)
      std::memcpy(arr.data.data() + 8 * j, &v, 8);
    else
      std::memcpy(arr.data.data() + 4 * j, &f, 4);
  }
  return arr;
}

/// The device's sm (e.g. 90) from nvidia-smi, or 0.
int deviceSm() {
  std::FILE *p = ::popen("nvidia-smi --query-gpu=compute_cap --format=csv,"
                         "noheader -i ${LOOMRT_CUDA_DEVICE:-0} 2>/dev/null",
                         "r");
  if (!p)
    return 0;
  int major = 0, minor = 0;
  int got = std::fscanf(p, "%d.%d", &major, &minor);
  ::pclose(p);
  return got == 2 ? major * 10 + minor : 0;
}

void gemms() {
  struct Case {
    bool ta, tb;
    int64_t batch, m, n, k;
    const char *epilogue;
    const char *dtype;
  };
  const Case cases[] = {
      {false, false, 1, 37, 53, 29, "none", "f32"},
      {true, false, 1, 37, 53, 29, "none", "f32"},
      {false, true, 1, 37, 53, 29, "none", "f32"},
      {true, true, 3, 37, 53, 29, "none", "f32"},
      {false, false, 1, 256, 512, 384, "none", "f32"},
      {false, false, 2, 64, 96, 80, "bias", "f32"},
      {false, true, 1, 64, 96, 80, "relu", "f32"},
      {true, false, 1, 64, 96, 80, "gelu", "f32"},
      {false, false, 2, 64, 96, 80, "bias_relu", "f32"},
      {true, true, 2, 64, 96, 80, "bias_gelu", "f32"},
      {true, false, 2, 33, 17, 65, "none", "f64"},
  };
  std::vector<EntryBuilder> entries;
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case &c = cases[i];
    EntryBuilder e("g" + std::to_string(i));
    int a = e.buffer(c.dtype, {c.batch, c.ta ? c.k : c.m, c.ta ? c.m : c.k});
    int b = e.buffer(c.dtype, {c.batch, c.tb ? c.n : c.k, c.tb ? c.k : c.n});
    int out = e.buffer(c.dtype, {c.batch, c.m, c.n});
    int bias = e.buffer(c.dtype, {c.n});
    e.input("a", "input", a);
    e.input("b", "input", b);
    e.input("bias", "input", bias);
    bool hasBias = std::string(c.epilogue).find("bias") != std::string::npos;
    e.rawStep(
        "{\"kind\": \"gemm\", \"a\": " + std::to_string(a) +
        ", \"b\": " + std::to_string(b) + ", \"c\": " + std::to_string(out) +
        ", \"batch\": " + std::to_string(c.batch) +
        ", \"m\": " + std::to_string(c.m) + ", \"n\": " + std::to_string(c.n) +
        ", \"k\": " + std::to_string(c.k) +
        ", \"trans_a\": " + (c.ta ? "true" : "false") +
        ", \"trans_b\": " + (c.tb ? "true" : "false") +
        ", \"stride_a\": " + std::to_string(c.m * c.k) +
        ", \"stride_b\": " + std::to_string(c.k * c.n) + ", \"stride_c\": " +
        std::to_string(c.m * c.n) + ", \"epilogue\": \"" + c.epilogue + "\"" +
        (hasBias ? ", \"bias\": " + std::to_string(bias) : "") + "}");
    e.output("c", "output", out);
    entries.push_back(e);
  }
  TempDir cpuDir, gpuDir;
  std::string plan = planJson(entries, "null", "null");
  writeBytes(cpuDir.file("plan.json"), plan);
  writeBytes(gpuDir.file("plan.json"), toCuda(plan, 90, "null", "null"));
  std::unique_ptr<Artifact> cpu = load(cpuDir.path());
  std::unique_ptr<Artifact> gpu = load(gpuDir.path());
  check(cpu && gpu, "load the gemm artifacts (cuBLASLt)");
  if (!cpu || !gpu)
    return;
  std::mt19937 rng(1);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case &c = cases[i];
    DType dtype = std::string(c.dtype) == "f64" ? DType::F64 : DType::F32;
    NpyArray a =
        random(dtype, {c.batch, c.ta ? c.k : c.m, c.ta ? c.m : c.k}, rng);
    NpyArray b =
        random(dtype, {c.batch, c.tb ? c.n : c.k, c.tb ? c.k : c.n}, rng);
    NpyArray bias = random(dtype, {c.n}, rng);
    std::string name = "g" + std::to_string(i), error;
    std::vector<NpyArray> want, got;
    bool ok =
        cpu->run(name, {{"a", &a}, {"b", &b}, {"bias", &bias}}, &want, &error);
    for (int run = 0; ok && run < 3; ++run) // eager, recorded, replayed
      ok =
          gpu->run(name, {{"a", &a}, {"b", &b}, {"bias", &bias}}, &got, &error);
    double err = ok ? maxError(got[0], want[0]) : INFINITY;
    char what[256];
    std::snprintf(what, sizeof what,
                  "gemm %s batch %lld %lldx%lldx%lld trans_a %d trans_b %d "
                  "epilogue %s: max rel error %.3g %s",
                  c.dtype, (long long)c.batch, (long long)c.m, (long long)c.n,
                  (long long)c.k, c.ta, c.tb, c.epilogue, err,
                  ok ? "" : error.c_str());
    check(ok && err < (dtype == DType::F64 ? 1e-12 : 1e-4), what);
  }
}

/// y = relu(a . b + bias) with a PTX kernel, then a copy; graph and no graph.
void kernelsAndGraphs(int sm) {
  const int M = 64, K = 96, Nn = 80; // M * Nn = 5120 = kernels.cu's N
  EntryBuilder e("main");
  int a = e.buffer("f32", {M, K});
  int b = e.buffer("f32", {K, Nn});
  int c = e.buffer("f32", {M, Nn});
  int bias = e.buffer("f32", {M, Nn});
  int y = e.buffer("f32", {M, Nn});
  int flat = e.buffer("f32", {M * Nn});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.input("bias", "input", bias);
  e.gemm(a, b, c, 1, M, Nn, K, false, false, 0, 0, 0);
  e.rawStep("{\"kind\": \"kernel\", \"name\": \"loom_add_relu\", \"buffers\": "
            "[" +
            std::to_string(c) + ", " + std::to_string(bias) + ", " +
            std::to_string(y) +
            "], \"grid\": [8, 1, 1], \"block\": [128, 1, "
            "1], \"shared_bytes\": 0}");
  e.copy(y, flat);
  e.output("y", "output", y);
  e.output("flat", "output", flat);
  std::string plan = toCuda(planJson({e}, "\"kernels.so\"", "null"), 90, "null",
                            "\"kernels.ptx\"");
  TempDir dir;
  writeBytes(dir.file("plan.json"), plan);
  copyPtx(dir.path());
  std::mt19937 rng(2);
  NpyArray av = random(DType::F32, {M, K}, rng),
           bv = random(DType::F32, {K, Nn}, rng),
           biasv = random(DType::F32, {M, Nn}, rng);
  NpyArray expected = makeArray(DType::F32, {M, Nn}, nullptr);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < Nn; ++j) {
      double acc = value(biasv, i * Nn + j);
      for (int k = 0; k < K; ++k)
        acc += value(av, i * K + k) * value(bv, k * Nn + j);
      float f = float(acc > 0 ? acc : 0);
      std::memcpy(expected.data.data() + 4 * (i * Nn + j), &f, 4);
    }
  std::vector<NpyArray> first;
  for (bool graphs : {true, false}) {
    std::unique_ptr<Artifact> gpu = load(dir.path(), graphs);
    check(bool(gpu), std::string("load a PTX-only artifact (JIT), graphs ") +
                         (graphs ? "on" : "off"));
    if (!gpu)
      return;
    for (int run = 0; run < 3; ++run) {
      std::vector<NpyArray> out;
      std::string error;
      bool ok = gpu->run("main", {{"a", &av}, {"b", &bv}, {"bias", &biasv}},
                         &out, &error);
      double err = ok ? maxError(out[0], expected) : INFINITY;
      check(ok && err < 1e-4 && out[1].data == out[0].data,
            "kernel + gemm + copy, graphs " +
                std::string(graphs ? "on" : "off") + ", run " +
                std::to_string(run) + ": max rel error " + std::to_string(err) +
                " " + error);
      if (ok && first.empty())
        first = out;
      else if (ok)
        check(out[0].data == first[0].data,
              "bitwise equal to the first run (graph replay = plain launches)");
    }
  }

  // A cubin for this GPU from the toolkit's ptxas: loads without the PTX.
  const char *ptxas = "/usr/local/cuda/bin/ptxas";
  if (sm == 0 || !std::filesystem::exists(ptxas)) {
    std::printf("SKIP cubin path: %s\n",
                sm == 0 ? "nvidia-smi did not report the compute capability"
                        : "no /usr/local/cuda/bin/ptxas");
  } else {
    TempDir cubinDir;
    std::string cmd = std::string(ptxas) + " -arch=sm_" + std::to_string(sm) +
                      " " + LOOMRT_GPU_PTX_PATH + " -o " +
                      cubinDir.file("kernels.cubin");
    check(std::system(cmd.c_str()) == 0, cmd);
    writeBytes(cubinDir.file("plan.json"),
               toCuda(planJson({e}, "\"kernels.so\"", "null"), sm,
                      "\"kernels.cubin\"", "null"));
    std::FILE *log = std::tmpfile();
    std::unique_ptr<Artifact> gpu = load(cubinDir.path(), true, log);
    std::vector<NpyArray> out;
    std::string error;
    bool ok =
        gpu && gpu->run("main", {{"a", &av}, {"b", &bv}, {"bias", &biasv}},
                        &out, &error);
    check(ok && maxError(out[0], expected) < 1e-4,
          "cubin for sm_" + std::to_string(sm) + " runs " + error);
    std::fclose(log);
  }

  // A cubin for an old architecture: the PTX instead, said once.
  TempDir fallback;
  writeBytes(fallback.file("plan.json"),
             toCuda(planJson({e}, "\"kernels.so\"", "null"), 52,
                    "\"kernels.cubin\"", "\"kernels.ptx\""));
  writeBytes(fallback.file("kernels.cubin"), "not a cubin");
  copyPtx(fallback.path());
  std::FILE *log = std::tmpfile();
  std::unique_ptr<Artifact> gpu = load(fallback.path(), true, log);
  std::rewind(log);
  char text[2048] = {0};
  std::fread(text, 1, sizeof text - 1, log);
  std::fclose(log);
  check(gpu && std::string(text).find("JIT-compiling kernels.ptx") !=
                   std::string::npos,
        std::string("sm_52 cubin falls back to the PTX with a note: ") + text);
}

void outOfMemory() {
  EntryBuilder e("huge");
  int x = e.buffer("f32", {1});
  e.output("x", "output", x);
  std::string plan = toCuda(planJson({e}, "null", "null"), 90, "null", "null");
  plan = replaceAll(plan, "\"arena_bytes\": 64",
                    "\"arena_bytes\": 4503599627370496");
  TempDir dir;
  writeBytes(dir.file("plan.json"), plan);
  std::unique_ptr<Artifact> gpu = load(dir.path());
  std::vector<NpyArray> out;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  bool ok =
      gpu && gpu->run("huge", std::vector<TensorRef>{}, &out, &error, &code);
  check(gpu && !ok && code == ErrorCode::OutOfMemory &&
            error.find("bytes free of") != std::string::npos,
        "a 4 PiB arena is refused: " + error);
}

TrainResult trainRun(const std::string &dir, const std::string &data,
                     int64_t steps, bool graphs, const std::string &resume = "",
                     const std::string &checkpoints = "",
                     int64_t accumulate = 1) {
  TrainResult result;
  std::unique_ptr<Artifact> artifact = load(dir, graphs);
  if (!artifact)
    return result;
  TrainOptions o;
  o.dataPath = data;
  o.steps = steps;
  o.progress = ProgressMode::None;
  o.resumePath = resume;
  o.checkpointDir = checkpoints;
  o.accumulate = accumulate;
  std::string error;
  if (!train(*artifact, o, &result, &error))
    std::printf("  train: %s\n", error.c_str());
  return result;
}

void training() {
  TempDir cpuDir, gpuDir, data;
  if (!writeRegressionArtifact(cpuDir.path(), true)) {
    check(false, "write the regression artifact");
    return;
  }
  writeBytes(gpuDir.file("plan.json"),
             toCuda(readBytes(cpuDir.file("plan.json")), 90, "null",
                    "\"kernels.ptx\""));
  copyPtx(gpuDir.path());
  writeBytes(gpuDir.file("params.safetensors"),
             readBytes(cpuDir.file("params.safetensors")));
  std::string dataPath = data.file("data.npz");
  writeRegressionData(dataPath, 200);
  for (int64_t accumulate : {1, 2}) {
    TrainResult cpu =
        trainRun(cpuDir.path(), dataPath, 100, true, "", "", accumulate);
    TrainResult gpu =
        trainRun(gpuDir.path(), dataPath, 100, true, "", "", accumulate);
    double worst = gpu.tensors.size() == 4 ? 0 : INFINITY;
    for (const auto &[name, array] : cpu.tensors)
      if (gpu.tensors.count(name))
        worst = std::max(worst, maxError(gpu.tensors.at(name), array));
    check(gpu.finalStep == 100 && worst < 1e-3,
          "100 training steps (accumulate " + std::to_string(accumulate) +
              ") match the CPU: max rel error " + std::to_string(worst) +
              ", loss " + std::to_string(gpu.lastLoss) + " vs " +
              std::to_string(cpu.lastLoss));
  }
  TrainResult graphs = trainRun(gpuDir.path(), dataPath, 40, true);
  TrainResult plain = trainRun(gpuDir.path(), dataPath, 40, false);
  TempDir ckpt;
  trainRun(gpuDir.path(), dataPath, 20, true, "", ckpt.path());
  TrainResult resumed =
      trainRun(gpuDir.path(), dataPath, 40, true, ckpt.path());
  bool same = !graphs.tensors.empty(), resumedSame = !graphs.tensors.empty();
  for (const auto &[name, array] : graphs.tensors) {
    same = same && plain.tensors.count(name) &&
           plain.tensors.at(name).data == array.data;
    resumedSame = resumedSame && resumed.tensors.count(name) &&
                  resumed.tensors.at(name).data == array.data;
  }
  check(same, "training with and without CUDA graphs: bitwise equal");
  check(resumedSame, "20 steps + resume to 40 = 40 steps, bitwise");
}

} // namespace

int main() {
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!createBackend("cuda", &error, &code)) {
    std::printf("SKIP: no usable CUDA GPU: %s\n", error.c_str());
    return 77;
  }
  int sm = deviceSm();
  std::printf("CUDA device (LOOMRT_CUDA_DEVICE=%s): sm_%d (nvidia-smi)\n",
              std::getenv("LOOMRT_CUDA_DEVICE")
                  ? std::getenv("LOOMRT_CUDA_DEVICE")
                  : "0",
              sm);
  gemms();
  kernelsAndGraphs(sm);
  outOfMemory();
  training();
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
