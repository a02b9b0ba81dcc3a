//===- CudaFixtures.h - cuda artifacts for the fake CUDA driver -----------===//
//
// A cpu plan (Fixtures.h) turned into a cuda one, and the kernel images the
// fake driver (fakecuda/FakeCuda.cpp) loads in place of a cubin and PTX:
// text naming the kernels.so of tests/kernels.c and each kernel with its
// parameter count. Shared by the GoogleTest CUDA tests and the programs run
// under mpirun.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_CUDAFIXTURES_H
#define LOOMRT_TESTS_CUDAFIXTURES_H

#include "TestUtil.h"

#include "loomrt/Plan.h"

#include <map>
#include <optional>
#include <string>

namespace loomrt::test {

inline std::string replaceAll(std::string text, const std::string &from,
                              const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// A cpu plan (planJson) turned into a cuda one: kernels.cubin for sm_`sm`
/// and kernels.ptx.
inline std::string toCudaPlan(const std::string &cpuPlan, int sm = 90,
                              const std::string &kernels = "\"kernels.cubin\"",
                              const std::string &ptx = "\"kernels.ptx\"") {
  std::string text =
      replaceAll(cpuPlan, "\"target\": \"cpu\"",
                 "\"target\": \"cuda\", \"sm\": " + std::to_string(sm) +
                     ", \"ptx\": " + ptx);
  return replaceAll(text, "\"kernels\": \"kernels.so\"",
                    "\"kernels\": " + kernels);
}

/// Writes the fake driver's images of the test kernels: kernels.cubin for
/// `cubinSm` and kernels.ptx, listing every kernel the plan calls with its
/// parameter count. False with `*error` when the plan does not parse.
inline bool writeFakeImages(const std::string &dir, const std::string &planText,
                            int cubinSm, std::string *error) {
  std::optional<Plan> plan = parsePlan(planText, "plan.json", error);
  if (!plan)
    return false;
  std::map<std::string, size_t> params;
  for (const PlanEntry &e : plan->entries)
    for (const PlanStep &s : e.steps)
      if (s.kind == PlanStep::Kind::Kernel)
        params[s.kernel] = s.buffers.size();
  std::string list;
  for (const auto &[name, n] : params)
    list += "kernel " + name + " " + std::to_string(n) + "\n";
  std::string lib = std::string(" lib=") + LOOMRT_TEST_KERNELS_PATH + "\n";
  writeBytes(dir + "/kernels.cubin",
             "FAKECUBIN sm=" + std::to_string(cubinSm) + lib + list);
  writeBytes(dir + "/kernels.ptx", "FAKEPTX" + lib + list);
  return true;
}

/// The cpu artifact in `dir` (plan.json and kernels.so, as Fixtures.h's
/// writers leave it) made a cuda one in place for the fake driver:
/// plan.json rewritten, kernels.cubin and kernels.ptx written.
inline bool makeFakeCudaArtifact(const std::string &dir, std::string *error) {
  std::string plan = toCudaPlan(readBytes(dir + "/plan.json"));
  writeBytes(dir + "/plan.json", plan);
  return writeFakeImages(dir, plan, 90, error);
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_CUDAFIXTURES_H
