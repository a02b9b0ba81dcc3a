//===- CudaPlanTest.cpp - Validation of the cuda plan schema
//---------------===//

#include "Fixtures.h"

#include "loomrt/Plan.h"

#include <gtest/gtest.h>

namespace loomrt::test {
namespace {

std::string replaceOnce(std::string text, const std::string &from,
                        const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks " << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// A valid cuda plan: a kernel step, a gemm step with a bias epilogue.
std::string cudaPlan() {
  EntryBuilder e("main");
  int a = e.buffer("f32", {2, 3});
  int b = e.buffer("f32", {3, 4});
  int c = e.buffer("f32", {2, 4});
  int bias = e.buffer("f32", {4});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.input("bias", "input", bias);
  e.rawStep("{\"kind\": \"kernel\", \"name\": \"k0\", \"buffers\": [0, 2], "
            "\"grid\": [4, 1, 1], \"block\": [256, 1, 1], "
            "\"shared_bytes\": 0}");
  e.rawStep("{\"kind\": \"gemm\", \"a\": 0, \"b\": 1, \"c\": 2, \"batch\": 1, "
            "\"m\": 2, \"n\": 4, \"k\": 3, \"trans_a\": false, \"trans_b\": "
            "false, \"stride_a\": 0, \"stride_b\": 0, \"stride_c\": 0, "
            "\"epilogue\": \"bias_gelu\", \"bias\": 3}");
  e.output("c", "output", c);
  std::string text = planJson({e}, "\"kernels.cubin\"", "null");
  return replaceOnce(text, "\"target\": \"cpu\"",
                     "\"target\": \"cuda\", \"sm\": 90, \"ptx\": "
                     "\"kernels.ptx\"");
}

std::string parseError(const std::string &text, ErrorCode *code = nullptr) {
  std::string error;
  std::optional<Plan> plan = parsePlan(text, "plan.json", &error, code);
  EXPECT_FALSE(plan) << "accepted:\n" << text;
  return error;
}

#define EXPECT_ERROR(text, fragment)                                           \
  do {                                                                         \
    std::string message_ = parseError(text);                                   \
    EXPECT_NE(message_.find(fragment), std::string::npos) << message_;         \
  } while (0)

TEST(CudaPlan, AcceptsTheSchema) {
  std::string error;
  std::optional<Plan> plan = parsePlan(cudaPlan(), "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  EXPECT_EQ(plan->target, "cuda");
  EXPECT_EQ(plan->sm, 90);
  EXPECT_EQ(plan->kernels, "kernels.cubin");
  EXPECT_EQ(plan->ptx, "kernels.ptx");
  const PlanStep &k = plan->entries[0].steps[0];
  EXPECT_EQ(k.launch.grid[0], 4u);
  EXPECT_EQ(k.launch.block[0], 256u);
  EXPECT_EQ(k.launch.block[1], 1u);
  const PlanStep &g = plan->entries[0].steps[1];
  EXPECT_EQ(g.gemm.epilogue, GemmEpilogue::BiasGelu);
  EXPECT_EQ(g.gemm.bias, 3u);

  // Either image alone is enough.
  EXPECT_TRUE(parsePlan(replaceOnce(cudaPlan(), "\"kernels.cubin\"", "null"),
                        "plan.json", &error))
      << error;
  EXPECT_TRUE(parsePlan(replaceOnce(cudaPlan(), "\"kernels.ptx\"", "null"),
                        "plan.json", &error))
      << error;
}

TEST(CudaPlan, TopLevelFields) {
  std::string plan = cudaPlan();
  EXPECT_ERROR(replaceOnce(plan, "\"sm\": 90, ", ""), "missing field 'sm'");
  EXPECT_ERROR(replaceOnce(plan, "\"sm\": 90", "\"sm\": 9"),
               "field 'sm': 9 is not a CUDA architecture");
  EXPECT_ERROR(replaceOnce(plan, "\"sm\": 90", "\"sm\": \"sm_90\""),
               "field 'sm': expected an integer, got string");
  EXPECT_ERROR(replaceOnce(plan, ", \"ptx\": \"kernels.ptx\"", ""),
               "missing field 'ptx'");
  EXPECT_ERROR(replaceOnce(plan, "\"kernels.ptx\"", "\"../k.ptx\""),
               "field 'ptx': '../k.ptx' is not a plain file name");
  std::string none = replaceOnce(replaceOnce(plan, "\"kernels.ptx\"", "null"),
                                 "\"kernels.cubin\"", "null");
  EXPECT_ERROR(none, "field 'kernels': and 'ptx' are both null, but entries "
                     "have kernel steps (first: 'k0')");
}

TEST(CudaPlan, LaunchDimensions) {
  std::string plan = cudaPlan();
  const std::string grid = "\"grid\": [4, 1, 1]";
  const std::string block = "\"block\": [256, 1, 1]";
  EXPECT_ERROR(replaceOnce(plan, grid + ", ", ""), "missing field 'grid'");
  EXPECT_ERROR(replaceOnce(plan, grid, "\"grid\": [4, 1]"),
               "field 'grid': expected an array of 3 integers, got an array "
               "of 2");
  EXPECT_ERROR(replaceOnce(plan, grid, "\"grid\": [0, 1, 1]"),
               "field 'grid': x = 0 is outside [1, 2147483647]");
  EXPECT_ERROR(replaceOnce(plan, grid, "\"grid\": [1, 65536, 1]"),
               "field 'grid': y = 65536 is outside [1, 65535]");
  EXPECT_ERROR(replaceOnce(plan, grid, "\"grid\": [1, 1, -1]"),
               "field 'grid': z: expected a positive integer, got integer");
  EXPECT_ERROR(replaceOnce(plan, grid, "\"grid\": [1.5, 1, 1]"),
               "expected a positive integer, got non-integer number");
  EXPECT_ERROR(replaceOnce(plan, block, "\"block\": [1025, 1, 1]"),
               "field 'block': x = 1025 is outside [1, 1024]");
  EXPECT_ERROR(replaceOnce(plan, block, "\"block\": [1, 1, 65]"),
               "field 'block': z = 65 is outside [1, 64]");
  EXPECT_ERROR(replaceOnce(plan, block, "\"block\": [64, 32, 1]"),
               "64 x 32 x 1 = 2048 threads per block, more than the 1024 CUDA "
               "allows");
  EXPECT_ERROR(replaceOnce(plan, block, "\"block\": [0, 1, 1]"),
               "x = 0 is outside [1, 1024]");
  EXPECT_ERROR(
      replaceOnce(plan, "\"shared_bytes\": 0", "\"shared_bytes\": 300000"),
      "field 'shared_bytes'");
  EXPECT_ERROR(replaceOnce(plan, ", \"shared_bytes\": 0", ""),
               "missing field 'shared_bytes'");
  // 32 x 32 = 1024 is the limit, inclusive.
  std::string error;
  EXPECT_TRUE(parsePlan(replaceOnce(plan, block, "\"block\": [32, 32, 1]"),
                        "plan.json", &error))
      << error;
}

TEST(CudaPlan, GemmEpilogues) {
  std::string plan = cudaPlan();
  const std::string epi = "\"epilogue\": \"bias_gelu\", \"bias\": 3";
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": \"swish\""),
               "field 'epilogue': unknown epilogue 'swish' (expected none, "
               "bias, relu, gelu, bias_relu or bias_gelu)");
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": 3"),
               "field 'epilogue': expected a string, got integer");
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": \"bias\""),
               "missing field 'bias'");
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": \"bias\", \"bias\": 1"),
               "field 'bias': buffer 1 is f32 [3, 4]; epilogue 'bias' needs 4 "
               "f32 elements (n)");
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": \"relu\", \"bias\": 3"),
               "field 'bias': given, but epilogue 'relu' adds no bias");
  EXPECT_ERROR(replaceOnce(plan, epi, "\"epilogue\": \"bias\", \"bias\": 9"),
               "field 'bias': buffer id 9 is out of range");
  std::string error;
  for (const char *ok : {"\"epilogue\": \"none\"", "\"epilogue\": \"relu\"",
                         "\"epilogue\": \"gelu\"", "\"epilogue\": null",
                         "\"epilogue\": \"bias_relu\", \"bias\": 3"})
    EXPECT_TRUE(parsePlan(replaceOnce(plan, epi, ok), "plan.json", &error))
        << ok << ": " << error;
}

TEST(CudaPlan, CpuPlansIgnoreLaunchFieldsAndValidateEpilogues) {
  // A cpu plan may carry grid/block (ignored), and its gemm epilogues are
  // checked the same way.
  std::string plan = replaceOnce(
      replaceOnce(cudaPlan(),
                  "\"target\": \"cuda\", \"sm\": 90, \"ptx\": \"kernels.ptx\"",
                  "\"target\": \"cpu\""),
      "\"kernels.cubin\"", "\"kernels.so\"");
  std::string error;
  std::optional<Plan> parsed = parsePlan(
      replaceOnce(plan, "\"block\": [256, 1, 1]", "\"block\": [4096, 1, 1]"),
      "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->sm, 0);
  EXPECT_ERROR(replaceOnce(plan, "\"bias_gelu\"", "\"tanh\""),
               "unknown epilogue 'tanh'");
}

} // namespace
} // namespace loomrt::test
