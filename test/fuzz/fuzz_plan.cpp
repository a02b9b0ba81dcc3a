//===- fuzz_plan.cpp - libFuzzer harness of plan.json loading -------------===//
//
// The input is a plan.json (docs/plan-format.md). It is written into the
// harness's private directory, which then is an artifact directory holding
// nothing else, and loaded with loomrt::Artifact::load: readPlan and
// parsePlan's validation, the backend for the plan's target, kernels and
// params files named by the plan (only plan.json exists, so these fail
// cleanly; CUDA is pointed at a driver that does not exist, so every machine
// behaves alike).
//
// Plan.h promises that a plan that loads is safe to execute. So a plan that
// loads (necessarily one without kernel steps: there is no kernels file) is
// run: every entry whose arena and GEMM work are small, with zero-filled
// inputs of the declared types. ASan checks every copy and upload against the
// arena (the GEMMs run in OpenBLAS, which is not instrumented).
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "loomrt/Artifact.h"

#include <cstdlib>

using namespace loomrt;

namespace {

/// Bounds on the entries the harness runs, to keep runs fast.
constexpr uint64_t kMaxArenaBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxGemmWork = uint64_t(1) << 22; // sum of batch*m*n*k

bool smallEnough(const PlanEntry &entry) {
  if (entry.arenaBytes > kMaxArenaBytes)
    return false;
  uint64_t work = 0;
  for (const PlanStep &step : entry.steps) {
    if (step.kind != PlanStep::Kind::Gemm)
      continue;
    const GemmStep &g = step.gemm;
    // Each factor is at most 2^31 - 1 after validation: multiply with care.
    long double w = static_cast<long double>(g.batch) * g.m * g.n * g.k;
    if (w > static_cast<long double>(kMaxGemmWork - work))
      return false;
    work += static_cast<uint64_t>(w);
  }
  return true;
}

void runEntry(Artifact &artifact, const PlanEntry &entry) {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<TensorRef> inputs;
  storage.reserve(entry.inputs.size());
  for (const Binding &in : entry.inputs) {
    storage.emplace_back(in.bytes, 0);
    TensorRef ref;
    ref.name = in.name;
    ref.dtype = in.dtype;
    ref.shape = in.shape.data();
    ref.rank = in.shape.size();
    ref.data = storage.back().data();
    ref.nbytes = in.bytes;
    inputs.push_back(ref);
  }
  std::vector<NpyArray> outputs;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!artifact.run(entry.name, inputs, &outputs, &error, &code)) {
    std::fprintf(stderr, "loom-fuzz: entry '%s': %s\n", entry.name.c_str(),
                 error.c_str());
    loomfuzz::fail("a plan that loaded failed to run with valid inputs");
  }
  if (outputs.size() != entry.outputs.size())
    loomfuzz::fail("run() returned the wrong number of outputs");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].dtype != entry.outputs[i].dtype ||
        outputs[i].shape != entry.outputs[i].shape ||
        outputs[i].data.size() != entry.outputs[i].bytes)
      loomfuzz::fail("an output differs from the plan's declaration");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  // No CUDA driver: the same behaviour on machines with and without a GPU.
  std::string driver = dir.path() + "/no-such-libcuda.so.1";
  ::setenv("LOOMRT_CUDA_DRIVER", driver.c_str(), 1);
  ::setenv("LOOMRT_CUBLASLT_LIBRARY", driver.c_str(), 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loomfuzz::TempDir &dir = loomfuzz::TempDir::get();
  int fdBefore = loomfuzz::lowestFreeFd();
  dir.write("plan.json", data, size);
  {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    LoadOptions options;
    std::unique_ptr<Artifact> artifact =
        Artifact::load(dir.path(), options, &error, &code);
    if (!artifact) {
      if (error.empty() || code == ErrorCode::Ok)
        loomfuzz::fail("a failure came back without a message or code");
    } else {
      for (const PlanEntry &entry : artifact->plan().entries)
        if (smallEnough(entry))
          runEntry(*artifact, entry);
    }
  }
  dir.removeInput("plan.json");
  loomfuzz::checkNoFdLeak(fdBefore);
  return 0;
}
