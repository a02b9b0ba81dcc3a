//===- CudaBackendTest.cpp - The CUDA backend without a GPU
//----------------===//
//
// Two kinds of test. Without a driver: a cuda artifact is refused with the
// reason, loom-run exits 1 with it, and the CPU backend is unaffected. With
// the fake driver (fakecuda/FakeCuda.cpp: host memory, deferred stream
// execution, stream capture, a cuBLASLt that computes in plain loops) loaded
// through LOOMRT_CUDA_DRIVER / LOOMRT_CUBLASLT_LIBRARY: the backend's own
// logic end to end (buffer offsets, kernel parameters, GEMM layouts and
// epilogues, pinned staging, graph capture and replay, resident params and
// state, resume), compared with the CPU backend on the same plans.
//
//===----------------------------------------------------------------------===//

#include "CudaFixtures.h"
#include "Fixtures.h"
#include "cuda/CudaApi.h"
#include "fakecuda/FakeCuda.h"

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Plan.h"
#include "loomrt/Trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <dlfcn.h>
#include <sys/wait.h>

namespace loomrt::test {
namespace {

/// The fake driver and cuBLASLt for the scope, counters reset.
class FakeCuda {
public:
  FakeCuda()
      : driver("LOOMRT_CUDA_DRIVER", LOOMRT_FAKE_CUDA_PATH),
        blasLt("LOOMRT_CUBLASLT_LIBRARY", LOOMRT_FAKE_CUDA_PATH) {
    handle = ::dlopen(LOOMRT_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      auto reset =
          reinterpret_cast<void (*)()>(::dlsym(handle, "fakecuda_reset"));
      auto get = reinterpret_cast<FakeCudaStats *(*)()>(
          ::dlsym(handle, "fakecuda_stats"));
      if (reset && get) {
        reset();
        counters = get();
      }
    }
  }
  ~FakeCuda() {
    if (handle)
      ::dlclose(handle);
  }
  bool ok() const { return counters != nullptr; }
  FakeCudaStats &stats() { return *counters; }

private:
  ScopedEnv driver, blasLt;
  void *handle = nullptr;
  FakeCudaStats *counters = nullptr;
};

/// writeFakeImages (CudaFixtures.h), failing the test on a bad plan.
bool writeFakeImages(const std::string &dir, const std::string &planText,
                     int cubinSm = 90) {
  std::string error;
  if (loomrt::test::writeFakeImages(dir, planText, cubinSm, &error))
    return true;
  ADD_FAILURE() << error;
  return false;
}

std::unique_ptr<Artifact> load(const std::string &dir, std::string *error,
                               bool graphs = true, std::FILE *log = nullptr) {
  LoadOptions options;
  options.graphs = graphs;
  options.log = log;
  return Artifact::load(dir, options, error);
}

// --- no driver -------------------------------------------------------------

TEST(CudaNoDriver, LoadingACudaArtifactSaysWhy) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string plan =
      toCudaPlan(planJson({mainEntry()}, "\"kernels.so\"", "null"));
  writeBytes(dir.file("plan.json"), plan);
  ASSERT_TRUE(writeFakeImages(dir.path(), plan));
  {
    ScopedEnv env("LOOMRT_CUDA_DRIVER", dir.file("no-such-libcuda.so.1"));
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    EXPECT_FALSE(Artifact::load(dir.path(), &error, &code));
    EXPECT_EQ(code, ErrorCode::Unsupported);
    EXPECT_NE(error.find("target 'cuda': no CUDA driver"), std::string::npos)
        << error;
  }
  // The machine's own driver: absent here (and on CI), present on a GPU box.
  ::unsetenv("LOOMRT_CUDA_DRIVER");
  if (void *real = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(real);
  } else {
    std::string error;
    EXPECT_FALSE(Artifact::load(dir.path(), &error));
    EXPECT_NE(error.find("no CUDA driver (libcuda.so.1 not found): this "
                         "machine has no NVIDIA GPU driver"),
              std::string::npos)
        << error;
  }
  // The CPU backend does not care.
  TempDir cpu;
  writeBytes(cpu.file("plan.json"),
             planJson({mainEntry()}, "\"kernels.so\"", "null"));
  ASSERT_TRUE(installKernels(cpu.path()));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(cpu.path(), &error);
  ASSERT_TRUE(artifact) << error;
  NpyArray a = f32Array({2, 3}, {1, 2, 3, 4, 5, 6}),
           b = f32Array({3, 2}, {1, 0, 0, 1, 1, 1}),
           bias = f32Array({2, 2}, {0, 0, 0, 0});
  std::vector<NpyArray> out;
  EXPECT_TRUE(artifact->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}},
                            &out, &error))
      << error;
}

TEST(CudaNoDriver, LoomRunExitsOneWithTheReason) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string plan =
      toCudaPlan(planJson({mainEntry()}, "\"kernels.so\"", "null"));
  writeBytes(dir.file("plan.json"), plan);
  ASSERT_TRUE(writeFakeImages(dir.path(), plan));
  std::string command = "LOOMRT_CUDA_DRIVER=" + dir.file("none.so") + " " +
                        LOOMRT_LOOM_RUN_PATH + " " + dir.path() +
                        " --entry=main --output-dir " + dir.file("out") +
                        " 2>&1";
  std::FILE *pipe = ::popen(command.c_str(), "r");
  ASSERT_TRUE(pipe);
  std::string output;
  char buffer[512];
  while (size_t got = std::fread(buffer, 1, sizeof buffer, pipe))
    output.append(buffer, got);
  int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_NE(output.find("loom-run: error: "), std::string::npos) << output;
  EXPECT_NE(output.find("no CUDA driver"), std::string::npos) << output;
}

TEST(CudaFakeDevice, NoDeviceSaysSo) {
  FakeCuda fake;
  ASSERT_TRUE(fake.ok());
  ScopedEnv none("FAKECUDA_DEVICES", "0");
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(createBackend("cuda", &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(error.find("no CUDA device"), std::string::npos) << error;
}

// --- waits for the stream ----------------------------------------------------

/// Stream work for fakecuda_enqueue: not ready (600) while `*left` counts
/// down to 0.
int countdown(void *arg) {
  int &left = *static_cast<int *>(arg);
  return left-- > 0 ? 600 : 0;
}
/// Stream work that is not ready until `*released`.
int untilReleased(void *arg) { return *static_cast<bool *>(arg) ? 0 : 600; }
void keep(void *) {}

// cuda::waitForStream, the wait of a stream that may be stuck behind an
// NCCL collective: it polls cuStreamQuery until the work is done, or gives
// up after its limit with CUDA_ERROR_NOT_READY (the work still queued);
// without a limit it is cuStreamSynchronize. And a backend without device
// collectives, whose stream waits for no other rank, still synchronizes.
TEST(CudaFakeDevice, StreamWaitsPollWithinTheirLimit) {
  FakeCuda fake;
  ASSERT_TRUE(fake.ok());
  std::string error;
  const cuda::DriverApi *cu = cuda::loadDriver(&error);
  ASSERT_NE(cu, nullptr) << error;
  void *lib = ::dlopen(LOOMRT_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  auto enqueue = reinterpret_cast<int (*)(void *, int (*)(void *), void *,
                                          void (*)(void *))>(
      ::dlsym(lib, "fakecuda_enqueue"));
  ASSERT_NE(enqueue, nullptr);
  cuda::CUstream stream = nullptr;
  ASSERT_EQ(cu->cuStreamCreate(&stream, cuda::CU_STREAM_NON_BLOCKING),
            cuda::CUDA_SUCCESS);

  // Ready after 3 queries that find it busy: one wait, one synchronization.
  int left = 3;
  ASSERT_EQ(enqueue(stream, countdown, &left, keep), 0);
  EXPECT_EQ(cuda::waitForStream(*cu, stream, 5), cuda::CUDA_SUCCESS);
  EXPECT_EQ(left, -1);
  EXPECT_EQ(fake.stats().streamQueries, 4);
  EXPECT_EQ(fake.stats().synchronizations, 1);

  // Never ready: the limit ends the wait, the work stays queued.
  bool released = false;
  ASSERT_EQ(enqueue(stream, untilReleased, &released, keep), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cuda::waitForStream(*cu, stream, 0.05), cuda::CUDA_ERROR_NOT_READY);
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_GE(took, 0.05);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(fake.stats().synchronizations, 1);
  released = true;
  EXPECT_EQ(cuda::waitForStream(*cu, stream, 5), cuda::CUDA_SUCCESS);
  EXPECT_EQ(fake.stats().synchronizations, 2);

  // No limit: cuStreamSynchronize, no query.
  int64_t queries = fake.stats().streamQueries;
  left = 2;
  ASSERT_EQ(enqueue(stream, countdown, &left, keep), 0);
  EXPECT_EQ(cuda::waitForStream(*cu, stream, 0), cuda::CUDA_SUCCESS);
  EXPECT_EQ(left, -1);
  EXPECT_EQ(fake.stats().streamQueries, queries);
  cu->cuStreamDestroy(stream);
  ::dlclose(lib);

  // The backend's stream carries no collective: synchronize() and freeing
  // the arena block in cuStreamSynchronize, as before.
  ErrorCode code = ErrorCode::Ok;
  std::unique_ptr<Backend> backend = createBackend("cuda", &error, &code);
  ASSERT_TRUE(backend) << error;
  std::unique_ptr<Arena> arena = backend->allocateArena(64, &error, &code);
  ASSERT_TRUE(arena) << error;
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  ASSERT_TRUE(backend->upload(*arena, 0, x, sizeof x, &error)) << error;
  ASSERT_TRUE(backend->download(*arena, 0, y, sizeof y, &error)) << error;
  int64_t syncs = fake.stats().synchronizations;
  ASSERT_TRUE(backend->synchronize(&error)) << error;
  EXPECT_EQ(y[3], 4.0f);
  arena.reset();
  backend.reset();
  EXPECT_EQ(fake.stats().streamQueries, queries);
  EXPECT_EQ(fake.stats().synchronizations, syncs + 3);
}

// --- the fake driver --------------------------------------------------------

class CudaFake : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(fake.ok()) << "cannot open " << LOOMRT_FAKE_CUDA_PATH;
    ASSERT_TRUE(dir.ok() && cpuDir.ok());
  }

  /// Writes `cpuPlan` as a cpu artifact in cpuDir and as a cuda artifact in
  /// dir (params, if given, in both).
  void writeBoth(const std::string &cpuPlan, int sm = 90, int cubinSm = 90,
                 const std::string &ptx = "\"kernels.ptx\"") {
    writeBytes(cpuDir.file("plan.json"), cpuPlan);
    ASSERT_TRUE(installKernels(cpuDir.path()));
    std::string cuda = toCudaPlan(cpuPlan, sm, "\"kernels.cubin\"", ptx);
    writeBytes(dir.file("plan.json"), cuda);
    ASSERT_TRUE(writeFakeImages(dir.path(), cuda, cubinSm));
  }

  FakeCuda fake;
  TempDir dir, cpuDir;
};

TEST_F(CudaFake, RunsGemmKernelAndCopyLikeTheCpu) {
  writeBoth(planJson({mainEntry()}, "\"kernels.so\"", "null"));
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error);
  ASSERT_TRUE(cuda) << error;
  EXPECT_EQ(cuda->backendName(), "cuda");
  std::unique_ptr<Artifact> cpu = Artifact::load(cpuDir.path(), &error);
  ASSERT_TRUE(cpu) << error;
  EXPECT_EQ(fake.stats().cubinLoads, 1);
  EXPECT_EQ(fake.stats().ptxLoads, 0);

  NpyArray a = f32Array({2, 3}, {1, -2, 3, 0.5f, 4, -1}),
           b = f32Array({3, 2}, {2, 1, 0, -1, 1, 3}),
           bias = f32Array({2, 2}, {0.5f, -20, 1, 2});
  for (int run = 0; run < 3; ++run) {
    // New inputs every run: the graph must read what was uploaded this time.
    std::vector<float> av = f32Values(a);
    av[0] = float(run);
    a = f32Array({2, 3}, av);
    std::vector<NpyArray> got, want;
    ASSERT_TRUE(cuda->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}}, &got,
                          &error))
        << error;
    ASSERT_TRUE(cpu->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}}, &want,
                         &error))
        << error;
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      std::vector<float> g = f32Values(got[i]), w = f32Values(want[i]);
      ASSERT_EQ(g.size(), w.size());
      for (size_t j = 0; j < g.size(); ++j)
        EXPECT_NEAR(g[j], w[j], 1e-5f) << "run " << run << " output " << i;
    }
  }
  FakeCudaStats &s = fake.stats();
  // Eager, then recorded and replayed, then replayed.
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.graphsInstantiated, 1);
  EXPECT_EQ(s.graphLaunches, 2);
  EXPECT_EQ(s.launchesIssued, 2); // the eager run and the capture
  EXPECT_EQ(s.kernelsRun, 3);
  EXPECT_EQ(s.matmulsRun, 3);
  EXPECT_EQ(s.lastComputeType, 68); // CUBLAS_COMPUTE_32F: no TF32
  EXPECT_EQ(s.lastBlock[0], 32u);
  EXPECT_EQ(s.pageableCopies, 0);
  EXPECT_EQ(s.hostCopiesCaptured, 0);
  EXPECT_EQ(s.invalidAccesses, 0);
  EXPECT_EQ(s.captureViolations, 0);
}

TEST_F(CudaFake, NoGraphLaunchesEveryTime) {
  writeBoth(planJson({mainEntry()}, "\"kernels.so\"", "null"));
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error, /*graphs=*/false);
  ASSERT_TRUE(cuda) << error;
  NpyArray a = f32Array({2, 3}, {1, -2, 3, 0.5f, 4, -1}),
           b = f32Array({3, 2}, {2, 1, 0, -1, 1, 3}),
           bias = f32Array({2, 2}, {0.5f, -20, 1, 2});
  for (int run = 0; run < 3; ++run) {
    std::vector<NpyArray> got;
    ASSERT_TRUE(cuda->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}}, &got,
                          &error))
        << error;
  }
  EXPECT_EQ(fake.stats().captures, 0);
  EXPECT_EQ(fake.stats().graphLaunches, 0);
  EXPECT_EQ(fake.stats().launchesIssued, 3);
  EXPECT_EQ(fake.stats().kernelsRun, 3);
}

/// GEMM shapes, transposes, batches and every epilogue against the CPU
/// backend (OpenBLAS, row-major): checks the backend's column-major
/// translation (swapped operands, leading dimensions, batch strides, bias per
/// column).
TEST_F(CudaFake, GemmLayoutsAndEpiloguesMatchTheCpu) {
  struct Case {
    bool ta, tb;
    int64_t batch;
    const char *epilogue;
    const char *dtype;
  };
  const Case cases[] = {
      {false, false, 1, "none", "f32"},
      {true, false, 1, "none", "f32"},
      {false, true, 1, "none", "f32"},
      {true, true, 3, "none", "f32"},
      {false, false, 2, "bias", "f32"},
      {false, true, 1, "relu", "f32"},
      {true, false, 1, "gelu", "f32"},
      {false, false, 2, "bias_relu", "f32"},
      {true, true, 2, "bias_gelu", "f32"},
      {true, false, 2, "bias", "f64"},
  };
  const int64_t m = 3, n = 5, k = 4;
  std::vector<EntryBuilder> entries;
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case &c = cases[i];
    EntryBuilder e("g" + std::to_string(i));
    int a = e.buffer(c.dtype, {c.batch, c.ta ? k : m, c.ta ? m : k});
    int b = e.buffer(c.dtype, {c.batch, c.tb ? n : k, c.tb ? k : n});
    int out = e.buffer(c.dtype, {c.batch, m, n});
    int bias = e.buffer(c.dtype, {n});
    e.input("a", "input", a);
    e.input("b", "input", b);
    e.input("bias", "input", bias);
    std::string step =
        "{\"kind\": \"gemm\", \"a\": " + std::to_string(a) +
        ", \"b\": " + std::to_string(b) + ", \"c\": " + std::to_string(out) +
        ", \"batch\": " + std::to_string(c.batch) +
        ", \"m\": 3, \"n\": 5, "
        "\"k\": 4, \"trans_a\": " +
        (c.ta ? "true" : "false") +
        ", \"trans_b\": " + (c.tb ? "true" : "false") +
        ", \"stride_a\": 12, \"stride_b\": 20, \"stride_c\": 15, "
        "\"epilogue\": \"" +
        c.epilogue + "\"" +
        (std::string(c.epilogue).find("bias") != std::string::npos
             ? ", \"bias\": " + std::to_string(bias)
             : std::string()) +
        "}";
    e.rawStep(step);
    e.output("c", "output", out);
    entries.push_back(e);
  }
  writeBoth(planJson(entries, "null", "null"));
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error);
  ASSERT_TRUE(cuda) << error;
  std::unique_ptr<Artifact> cpu = Artifact::load(cpuDir.path(), &error);
  ASSERT_TRUE(cpu) << error;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case &c = cases[i];
    DType dtype = std::string(c.dtype) == "f64" ? DType::F64 : DType::F32;
    auto random = [&](std::vector<int64_t> shape) {
      NpyArray arr = makeArray(dtype, shape, nullptr);
      size_t count = arr.data.size() / dtypeSize(dtype);
      for (size_t j = 0; j < count; ++j) {
        double v = u(rng);
        if (dtype == DType::F64)
          std::memcpy(arr.data.data() + 8 * j, &v, 8);
        else {
          float f = float(v);
          std::memcpy(arr.data.data() + 4 * j, &f, 4);
        }
      }
      return arr;
    };
    NpyArray a = random({c.batch, c.ta ? k : m, c.ta ? m : k});
    NpyArray b = random({c.batch, c.tb ? n : k, c.tb ? k : n});
    NpyArray bias = random({n});
    std::string name = "g" + std::to_string(i);
    std::vector<NpyArray> got, want;
    for (int run = 0; run < 2; ++run) // eager, then recorded
      ASSERT_TRUE(cuda->run(name, {{"a", &a}, {"b", &b}, {"bias", &bias}}, &got,
                            &error))
          << error;
    ASSERT_TRUE(
        cpu->run(name, {{"a", &a}, {"b", &b}, {"bias", &bias}}, &want, &error))
        << error;
    size_t count = want[0].data.size() / dtypeSize(dtype);
    for (size_t j = 0; j < count; ++j) {
      double g, w;
      if (dtype == DType::F64) {
        std::memcpy(&g, got[0].data.data() + 8 * j, 8);
        std::memcpy(&w, want[0].data.data() + 8 * j, 8);
      } else {
        float gf, wf;
        std::memcpy(&gf, got[0].data.data() + 4 * j, 4);
        std::memcpy(&wf, want[0].data.data() + 4 * j, 4);
        g = gf;
        w = wf;
      }
      ASSERT_NEAR(g, w, 1e-5)
          << "case " << i << " (" << c.epilogue << ", trans_a " << c.ta
          << ", trans_b " << c.tb << ", batch " << c.batch << ") element " << j;
    }
  }
  EXPECT_EQ(fake.stats().badGemmShapes, 0);
  EXPECT_EQ(fake.stats().invalidAccesses, 0);
}

TEST_F(CudaFake, CubinForAnotherArchitectureFallsBackToPtx) {
  // A cubin for sm_80 on an sm_90 GPU: the PTX is JIT-compiled, said once.
  writeBoth(planJson({mainEntry()}, "\"kernels.so\"", "null"), /*sm=*/80,
            /*cubinSm=*/80);
  std::FILE *log = std::tmpfile();
  ASSERT_TRUE(log);
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error, true, log);
  ASSERT_TRUE(cuda) << error;
  EXPECT_EQ(fake.stats().cubinLoads, 0);
  EXPECT_EQ(fake.stats().ptxLoads, 1);
  EXPECT_EQ(fake.stats().ptxWithoutEx, 0);
  std::rewind(log);
  char text[1024] = {0};
  size_t got = std::fread(text, 1, sizeof text - 1, log);
  std::fclose(log);
  std::string note(text, got);
  // Once per process: an earlier test of this binary may have said it.
  if (!note.empty())
    EXPECT_NE(note.find("kernels.cubin is for sm_80, GPU 'Fake GPU (host "
                        "memory)' (sm_90) cannot run it: JIT-compiling "
                        "kernels.ptx instead"),
              std::string::npos)
        << note;
  NpyArray a = f32Array({2, 3}, {1, 2, 3, 4, 5, 6}),
           b = f32Array({3, 2}, {1, 0, 0, 1, 1, 1}),
           bias = f32Array({2, 2}, {0, 0, 0, 0});
  std::vector<NpyArray> out;
  ASSERT_TRUE(
      cuda->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}}, &out, &error))
      << error;
  EXPECT_EQ(f32Values(out[0]), (std::vector<float>{4, 5, 10, 11}));
}

TEST_F(CudaFake, CubinTheDriverRefusesFallsBackToPtx) {
  // The plan says sm_90 but the image is not loadable: also the PTX.
  writeBoth(planJson({mainEntry()}, "\"kernels.so\"", "null"), 90,
            /*cubinSm=*/91);
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error, true, nullptr);
  ASSERT_TRUE(cuda) << error;
  EXPECT_EQ(fake.stats().ptxLoads, 1);
}

TEST_F(CudaFake, CubinForAnotherArchitectureWithoutPtxIsRefused) {
  writeBoth(planJson({mainEntry()}, "\"kernels.so\"", "null"), 86, 86, "null");
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  LoadOptions options;
  EXPECT_FALSE(Artifact::load(dir.path(), options, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(error.find("kernels.cubin is for sm_86, GPU 'Fake GPU (host "
                       "memory)' (sm_90) cannot run it, and the plan has no "
                       "ptx to JIT-compile (recompile with loomc "
                       "--target=cuda:sm_90)"),
            std::string::npos)
      << error;
}

TEST_F(CudaFake, MissingKernelIsNamed) {
  std::string cpuPlan = planJson({mainEntry()}, "\"kernels.so\"", "null");
  writeBoth(cpuPlan);
  // An image without add_relu4.
  writeBytes(dir.file("kernels.cubin"), std::string("FAKECUBIN sm=90 lib=") +
                                            LOOMRT_TEST_KERNELS_PATH +
                                            "\nkernel fill_seven 1\n");
  std::string error;
  EXPECT_FALSE(load(dir.path(), &error));
  EXPECT_NE(error.find("kernels.cubin: kernel symbol 'add_relu4' not found"),
            std::string::npos)
      << error;
}

TEST_F(CudaFake, OutOfDeviceMemoryGivesTheNumbers) {
  EntryBuilder e("big");
  int x = e.buffer("f32", {4096});
  e.input("x", "input", x);
  e.output("x", "output", x);
  writeBoth(planJson({e}, "null", "null"));
  ScopedEnv small("FAKECUDA_MEM_BYTES", "10000");
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error);
  ASSERT_TRUE(cuda) << error;
  NpyArray xs = makeArray(DType::F32, {4096}, nullptr);
  std::vector<NpyArray> out;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(cuda->run("big", {{"x", &xs}}, &out, &error, &code));
  EXPECT_EQ(code, ErrorCode::OutOfMemory);
  EXPECT_NE(error.find("asked for 16384 bytes, 10000 bytes free of 10000"),
            std::string::npos)
      << error;
}

TEST_F(CudaFake, ArenaIsZeroFilled) {
  EntryBuilder e("z");
  int x = e.buffer("f32", {8});
  e.output("x", "output", x);
  writeBoth(planJson({e}, "null", "null"));
  std::string error;
  std::unique_ptr<Artifact> cuda = load(dir.path(), &error);
  ASSERT_TRUE(cuda) << error;
  std::vector<NpyArray> out;
  ASSERT_TRUE(cuda->run("z", std::vector<TensorRef>{}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), std::vector<float>(8, 0.0f));
}

// --- training ----------------------------------------------------------------

class CudaFakeTraining : public CudaFake {
protected:
  void SetUp() override {
    CudaFake::SetUp();
    ASSERT_TRUE(writeRegressionArtifact(cpuDir.path(), /*withSeed=*/true));
    std::string cuda = toCudaPlan(readBytes(cpuDir.file("plan.json")));
    writeBytes(dir.file("plan.json"), cuda);
    ASSERT_TRUE(writeFakeImages(dir.path(), cuda));
    std::filesystem::copy_file(cpuDir.file("params.safetensors"),
                               dir.file("params.safetensors"));
    dataPath = dir.file("data.npz");
    ASSERT_TRUE(writeRegressionData(dataPath, 20));
  }

  TrainResult train(const std::string &artifactDir, int64_t steps,
                    bool graphs = true, const std::string &resume = "",
                    const std::string &checkpoints = "",
                    int64_t accumulate = 1) {
    std::string error;
    std::unique_ptr<Artifact> artifact = load(artifactDir, &error, graphs);
    EXPECT_TRUE(artifact) << error;
    TrainResult result;
    if (!artifact)
      return result;
    TrainOptions o;
    o.dataPath = dataPath;
    o.steps = steps;
    o.progress = ProgressMode::None;
    o.resumePath = resume;
    o.checkpointDir = checkpoints;
    o.accumulate = accumulate;
    EXPECT_TRUE(loomrt::train(*artifact, o, &result, &error)) << error;
    return result;
  }

  std::string dataPath;
};

TEST_F(CudaFakeTraining, RefusesGradientCompression) {
  // Compression runs on host memory: a cuda artifact is refused before the
  // first step, naming what to do.
  std::string error;
  std::unique_ptr<Artifact> artifact = load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  TrainOptions o;
  o.dataPath = dataPath;
  o.steps = 1;
  o.progress = ProgressMode::None;
  o.gradCompression = "int8";
  TrainResult result;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(loomrt::train(*artifact, o, &result, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_EQ(error, "gradient compression 'int8' runs on cpu artifacts only; "
                   "this artifact's target is 'cuda' (compressing on the "
                   "GPU, between NCCL calls, is not implemented): train "
                   "without it (--grad-compression=none)");
  o.gradCompression = "none";
  EXPECT_TRUE(loomrt::train(*artifact, o, &result, &error)) << error;
}

TEST_F(CudaFakeTraining, KeepsParamsOnTheDeviceBetweenSteps) {
  TrainResult r = train(dir.path(), 20);
  FakeCudaStats &s = fake.stats();
  // Per step: x [8, 4] + y [8, 1] + step + seed go up (176 bytes); loss,
  // step and lr come down (16 bytes). The params and momenta (40 bytes) go
  // up once and come down once, at the end.
  EXPECT_EQ(s.h2dBytes, 20 * 176 + 40);
  EXPECT_EQ(s.d2hBytes, 20 * 16 + 40);
  EXPECT_EQ(s.graphLaunches, 19);
  EXPECT_EQ(s.pageableCopies, 0);
  EXPECT_EQ(s.invalidAccesses, 0);
  EXPECT_EQ(s.captureViolations, 0);
  EXPECT_EQ(r.finalStep, 20);
  EXPECT_LT(r.lastLoss, 1.0);
}

TEST_F(CudaFakeTraining, MatchesTheCpuBackend) {
  for (int64_t accumulate : {1, 2}) {
    TrainResult cuda = train(dir.path(), 20, true, "", "", accumulate);
    TrainResult cpu = train(cpuDir.path(), 20, true, "", "", accumulate);
    ASSERT_EQ(cuda.tensors.size(), 4u);
    for (const auto &[name, array] : cpu.tensors) {
      std::vector<float> g = f32Values(cuda.tensors.at(name)),
                         w = f32Values(array);
      ASSERT_EQ(g.size(), w.size());
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], w[i], 1e-4f * (1 + std::fabs(w[i])))
            << name << "[" << i << "] accumulate " << accumulate;
    }
    EXPECT_NEAR(cuda.lastLoss, cpu.lastLoss, 1e-4 * (1 + cpu.lastLoss));
  }
}

TEST_F(CudaFakeTraining, GraphsChangeNothingAndResumeIsBitwise) {
  TrainResult straight = train(dir.path(), 20, /*graphs=*/true);
  TrainResult plain = train(dir.path(), 20, /*graphs=*/false);
  TempDir ckpt;
  train(dir.path(), 10, true, "", ckpt.path());
  TrainResult resumed = train(dir.path(), 20, true, ckpt.path());
  EXPECT_EQ(resumed.startStep, 10);
  for (const auto &[name, array] : straight.tensors) {
    EXPECT_EQ(plain.tensors.at(name).data, array.data) << name;
    EXPECT_EQ(resumed.tensors.at(name).data, array.data) << name;
  }
}

/// Runs `command` through the shell; returns its exit status (or -1) and
/// output.
int shell(const std::string &command, std::string *output) {
  std::FILE *pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe)
    return -1;
  char buffer[512];
  while (size_t got = std::fread(buffer, 1, sizeof buffer, pipe))
    output->append(buffer, got);
  int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(CudaFakeTraining, LoomRunTrainsACudaArtifact) {
  std::string env = std::string("LOOMRT_CUDA_DRIVER=") + LOOMRT_FAKE_CUDA_PATH +
                    " LOOMRT_CUBLASLT_LIBRARY=" + LOOMRT_FAKE_CUDA_PATH + " ";
  std::string base = env + LOOMRT_LOOM_RUN_PATH + " " + dir.path() +
                     " --train --data " + dataPath + " --steps 12 --quiet";
  std::string out1, out2, out3;
  ASSERT_EQ(
      shell(base + " --save-params " + dir.file("graph.safetensors"), &out1), 0)
      << out1;
  ASSERT_EQ(shell(base + " --no-cuda-graph --save-params " +
                      dir.file("plain.safetensors"),
                  &out2),
            0)
      << out2;
  EXPECT_EQ(readBytes(dir.file("graph.safetensors")),
            readBytes(dir.file("plain.safetensors")));
  ASSERT_EQ(
      shell(env + LOOMRT_LOOM_RUN_PATH + " " + dir.path() + " --info", &out3),
      0)
      << out3;
  EXPECT_NE(out3.find("target cuda"), std::string::npos) << out3;
  EXPECT_NE(out3.find("cuda: kernels kernels.cubin (sm_90), ptx kernels.ptx"),
            std::string::npos)
      << out3;
}

// Collective steps on CUDA: over one rank they are device copies (they
// run, and are recorded into the graph); those that communicate run over
// NCCL (MeshNcclTest.cpp runs them under mpirun), and are refused at load
// over host collectives (MPI cannot reach device memory).
TEST(CudaFakeDevice, CollectivesOfOneRankAreCopiesAndOthersNeedNccl) {
  FakeCuda fake;
  ASSERT_TRUE(fake.ok());
  EntryBuilder e("main");
  int x = e.buffer("f32", {4});
  int a = e.buffer("f32", {4});
  int g = e.buffer("f32", {4});
  int t = e.buffer("f32", {4});
  e.input("x", "input", x);
  e.collective("all_reduce", "mean", "dp", x, a);
  e.collective("all_gather", "", "dp", a, g);
  e.collective("rank_slice", "", "dp", g, t);
  e.output("t", "output", t);
  TempDir dir;
  std::string plan = toCudaPlan(
      planJson({e}, "null", "null", meshJson({"dp"}, {1})), 90, "null", "null");
  writeBytes(dir.file("plan.json"), plan);
  std::string error;
  std::unique_ptr<Artifact> artifact = load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  EXPECT_EQ(artifact->stepCollectives(), StepCollectives::Device);
  NpyArray in = f32Array({4}, {1, -2, 3, 4});
  for (int run = 0; run < 3; ++run) { // eager, recorded, replayed
    std::vector<NpyArray> out;
    ASSERT_TRUE(artifact->run("main", {{"x", &in}}, &out, &error)) << error;
    EXPECT_EQ(f32Values(out[0]), f32Values(in));
  }
  EXPECT_EQ(fake.stats().captures, 1);
  EXPECT_EQ(fake.stats().graphLaunches, 2);
  // Over host collectives too: nothing communicates.
  LoadOptions host;
  host.collectives = StepCollectives::Host;
  EXPECT_TRUE(Artifact::load(dir.path(), host, &error)) << error;

  EntryBuilder two("main");
  int y = two.buffer("f32", {4}), z = two.buffer("f32", {2});
  two.input("y", "input", y);
  two.collective("rank_slice", "", "dp", y, z); // fine: no communication
  two.collective("reduce_scatter", "sum", "dp", y, z);
  two.output("z", "output", z);
  writeBytes(dir.file("plan.json"),
             toCudaPlan(planJson({two}, "null", "null", meshJson({"dp"}, {2})),
                        90, "null", "null"));
  // Auto: NCCL, started when the entry first runs, which needs 2 ranks.
  artifact = load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  NpyArray four = f32Array({4}, {1, 2, 3, 4});
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(artifact->run("main", {{"y", &four}}, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_NE(error.find("entry 'main' was compiled for 2 ranks (mesh dp=2); "
                       "this run has 1 process: launch it with mpirun -np 2"),
            std::string::npos)
      << error;
  // Host collectives cannot reach the arena: refused at load, naming the
  // step and what to do.
  EXPECT_FALSE(Artifact::load(dir.path(), host, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(error.find("plan.json: entry 'main': step 1 (collective): a "
                       "reduce_scatter over 2 ranks cannot run over host "
                       "collectives (MPI) on the cuda backend, whose arenas "
                       "are device memory: run the collective steps over "
                       "NCCL (loom-run --collectives=nccl or auto)"),
            std::string::npos)
      << error;
  // NCCL asked for where it cannot load: refused at load, naming the
  // library.
  LoadOptions device;
  device.collectives = StepCollectives::Device;
  {
    ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", dir.file("no-libnccl.so.2"));
    EXPECT_FALSE(Artifact::load(dir.path(), device, &error, &code));
    EXPECT_EQ(code, ErrorCode::Unsupported);
    EXPECT_NE(error.find("plan.json: collective steps over device collectives "
                         "(NCCL) were asked for, but no NCCL "
                         "(LOOMRT_NCCL_LIBRARY=" +
                         dir.file("no-libnccl.so.2") + " cannot be loaded"),
              std::string::npos)
        << error;
  }
#ifdef LOOMRT_FAKE_NCCL_PATH
  {
    ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", LOOMRT_FAKE_NCCL_PATH);
    EXPECT_TRUE(Artifact::load(dir.path(), device, &error)) << error;
  }
#endif
}

// NCCL on the CPU backend: refused at load, whatever the plan.
TEST(CudaFakeDevice, NcclOnTheCpuBackendIsRefused) {
  TempDir dir;
  writeBytes(dir.file("plan.json"),
             planJson({mainEntry()}, "\"kernels.so\"", "null"));
  ASSERT_TRUE(installKernels(dir.path()));
  LoadOptions device;
  device.collectives = StepCollectives::Device;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(Artifact::load(dir.path(), device, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(error.find("plan.json: collective steps over device collectives "
                       "(NCCL) were asked for, but the cpu backend has none: "
                       "NCCL runs the collective steps of cuda artifacts; on "
                       "the cpu they run over host collectives (MPI: "
                       "loom-run --collectives=mpi or auto)"),
            std::string::npos)
      << error;
  LoadOptions host;
  host.collectives = StepCollectives::Host;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), host, &error);
  ASSERT_TRUE(artifact) << error;
  EXPECT_EQ(artifact->stepCollectives(), StepCollectives::Host);
}

} // namespace
} // namespace loomrt::test
