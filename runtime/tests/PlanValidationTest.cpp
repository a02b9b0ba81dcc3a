//===- PlanValidationTest.cpp - Every way a plan or artifact is refused ---===//

#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"

#include <gtest/gtest.h>

#include <random>

namespace loomrt::test {
namespace {

/// A small valid entry: y = relu(a . b + bias) via gemm + kernel.
EntryBuilder validEntry() {
  EntryBuilder e("main");
  int a = e.buffer("f32", {2, 3});
  int b = e.buffer("f32", {3, 2});
  int c = e.buffer("f32", {2, 2});
  int bias = e.buffer("f32", {2, 2});
  int y = e.buffer("f32", {2, 2});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.input("bias", "input", bias);
  e.gemm(a, b, c, 1, 2, 2, 3, false, false, 0, 0, 0);
  e.kernel("add_relu4", {c, bias, y});
  e.output("y", "output", y);
  return e;
}

std::string validPlan() {
  return planJson({validEntry()}, "\"kernels.so\"", "null");
}

/// Replaces the first `from` in `text` (which must be there).
std::string replace(std::string text, const std::string &from,
                    const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks: " << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

struct Refusal {
  std::string message;
  ErrorCode code = ErrorCode::Ok;
};

Refusal parseError(const std::string &text) {
  Refusal r;
  std::optional<Plan> plan = parsePlan(text, "plan.json", &r.message, &r.code);
  EXPECT_FALSE(plan.has_value()) << "accepted:\n" << text;
  return r;
}

/// Loads an artifact made of `plan` and the test kernels; the load must fail.
Refusal loadError(const std::string &plan, bool kernels = true) {
  TempDir dir;
  writeBytes(dir.file("plan.json"), plan);
  if (kernels)
    EXPECT_TRUE(installKernels(dir.path()));
  Refusal r;
  std::unique_ptr<Artifact> artifact =
      Artifact::load(dir.path(), &r.message, &r.code);
  EXPECT_FALSE(artifact) << "accepted:\n" << plan;
  return r;
}

#define EXPECT_MESSAGE(refusal, text)                                          \
  EXPECT_NE((refusal).message.find(text), std::string::npos)                   \
      << "message: " << (refusal).message

TEST(PlanValidation, AcceptsTheFixture) {
  std::string error;
  std::optional<Plan> plan = parsePlan(validPlan(), "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  ASSERT_EQ(plan->entries.size(), 1u);
  EXPECT_EQ(plan->kernelSymbols, std::vector<std::string>{"add_relu4"});
  EXPECT_EQ(plan->entries[0].buffers[1].offset, 64u);
}

TEST(PlanValidation, NewerVersionIsRefusedClearly) {
  Refusal r =
      parseError(replace(validPlan(), "\"version\": 1", "\"version\": 2"));
  EXPECT_EQ(r.code, ErrorCode::Unsupported);
  EXPECT_MESSAGE(r, "plan version 2 is newer than this runtime supports (1)");
  r = parseError(replace(validPlan(), "\"version\": 1", "\"version\": 0"));
  EXPECT_MESSAGE(r, "invalid version 0");
  r = parseError(replace(validPlan(), "\"version\": 1", "\"version\": \"1\""));
  EXPECT_MESSAGE(r, "field 'version': expected an integer, got string");
  r = parseError(
      replace(validPlan(), "\"kernel_abi\": 1", "\"kernel_abi\": 7"));
  EXPECT_MESSAGE(r, "kernel ABI 7 is not supported");
  r = parseError(replace(validPlan(), "loom-plan", "loom-plan2"));
  EXPECT_MESSAGE(r, "field 'format'");
  r = parseError(replace(validPlan(), "\"cpu\"", "\"tpu\""));
  EXPECT_EQ(r.code, ErrorCode::Unsupported);
  EXPECT_MESSAGE(r, "target 'tpu' is not supported");
}

TEST(PlanValidation, BuffersMustFitTheArena) {
  std::string plan = validPlan();
  Refusal r = parseError(replace(plan, "\"offset\": 256", "\"offset\": 4096"));
  EXPECT_MESSAGE(r, "plan.json: entry 'main': buffer 4: bytes [4096, 4112) "
                    "exceed arena_bytes 320");
  r = parseError(replace(plan, "\"offset\": 256", "\"offset\": 288"));
  EXPECT_MESSAGE(r, "buffer 4: field 'offset': 288 is not a multiple of 64");
  r = parseError(
      replace(plan, "\"offset\": 256", "\"offset\": 18446744073709551552"));
  EXPECT_MESSAGE(r,
                 "bytes [18446744073709551552, 18446744073709551568) exceed");
  r = parseError(replace(plan, "\"arena_bytes\": 320", "\"arena_bytes\": 270"));
  EXPECT_MESSAGE(r, "buffer 4: bytes [256, 272) exceed arena_bytes 270");
  r = parseError(replace(plan, "\"offset\": 256", "\"offset\": -64"));
  EXPECT_MESSAGE(r, "field 'offset': expected a non-negative integer, got -64");
  r = parseError(replace(plan, "\"offset\": 256", "\"offset\": 256.0"));
  EXPECT_MESSAGE(r, "got non-integer number");
  r = parseError(replace(plan, "\"offset\": 256", "\"offset\": 1e400"));
  EXPECT_MESSAGE(r, "not valid JSON");
  r = parseError(
      replace(plan, "\"offset\": 256", "\"offset\": 99999999999999999999999"));
  EXPECT_MESSAGE(r, "field 'offset'");
  r = parseError(replace(plan, "\"shape\": [2, 2]}",
                         "\"shape\": [4611686018427387904, 4]}"));
  EXPECT_MESSAGE(r, "overflows a 64-bit byte size");
  r = parseError(replace(plan, "\"shape\": [2, 2]}", "\"shape\": [-2, 2]}"));
  EXPECT_MESSAGE(r, "dimension 0 is not a non-negative integer");
  r = parseError(replace(plan, "\"dtype\": \"f32\"", "\"dtype\": \"f128\""));
  EXPECT_MESSAGE(r, "buffer 0: field 'dtype': unknown dtype 'f128'");
  r = parseError(replace(plan, "\"dtype\": \"f32\"", "\"dtype\": 4"));
  EXPECT_MESSAGE(r, "field 'dtype': expected a string, got integer");
  r = parseError(replace(plan, "\"buffers\": [{", "\"buffers\": [7, {"));
  EXPECT_MESSAGE(r, "buffer 0: expected an object, got integer");
}

TEST(PlanValidation, StepBufferIdsAreChecked) {
  std::string plan = validPlan();
  Refusal r = parseError(
      replace(plan, "\"buffers\": [2, 3, 4]", "\"buffers\": [2, 99, 4]"));
  EXPECT_MESSAGE(r,
                 "plan.json: entry 'main': step 1 (kernel): field 'buffers': "
                 "element 1: buffer id 99 is out of range (the entry has 5 "
                 "buffers)");
  r = parseError(
      replace(plan, "\"buffers\": [2, 3, 4]", "\"buffers\": [2, -1, 4]"));
  EXPECT_MESSAGE(r, "element 1: expected a buffer id, got integer");
  r = parseError(replace(plan, "\"buffers\": [2, 3, 4]", "\"buffers\": 2"));
  EXPECT_MESSAGE(r, "field 'buffers': expected an array of buffer ids");
  r = parseError(replace(plan, "\"name\": \"add_relu4\"", "\"name\": \"a b\""));
  EXPECT_MESSAGE(r, "is not a C identifier");
  r = parseError(replace(plan, "\"kind\": \"gemm\"", "\"kind\": \"conv2d\""));
  EXPECT_MESSAGE(r, "step 0: field 'kind': unknown step kind 'conv2d' "
                    "(expected kernel, gemm, copy, conv, attention, "
                    "linear_cross_entropy or collective)");
  r = parseError(replace(plan, "\"buffer\": 4}", "\"buffer\": 5}"));
  EXPECT_MESSAGE(r, "output 0: field 'buffer': buffer id 5 is out of range");
}

TEST(PlanValidation, WrittenBuffersAndTheirNodes) {
  // Optional: what a step writes and whose values they are (loom-run
  // --check-numerics names the node).
  std::string plan = validPlan();
  std::string withWrites =
      replace(plan, "\"buffers\": [2, 3, 4]",
              "\"buffers\": [2, 3, 4], \"writes\": [4], \"nodes\": [\"relu\"]");
  std::string error;
  std::optional<Plan> parsed = parsePlan(withWrites, "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  const PlanStep &kernel = parsed->entries[0].steps[1];
  EXPECT_EQ(kernel.writes, std::vector<uint32_t>{4});
  EXPECT_EQ(kernel.nodes, std::vector<std::string>{"relu"});
  // A gemm writes c; its node is optional.
  EXPECT_EQ(parsed->entries[0].steps[0].writes, std::vector<uint32_t>{2});
  EXPECT_EQ(parsed->entries[0].steps[0].nodes, std::vector<std::string>{""});
  Refusal r = parseError(replace(plan, "\"buffers\": [2, 3, 4]",
                                 "\"buffers\": [2, 3, 4], \"writes\": [1]"));
  EXPECT_MESSAGE(r, "step 1 (kernel): field 'writes': element 0: expected "
                    "one of the step's buffers, got 1");
  r = parseError(replace(plan, "\"buffers\": [2, 3, 4]",
                         "\"buffers\": [2, 3, 4], \"writes\": [4], "
                         "\"nodes\": [\"a\", \"b\"]"));
  EXPECT_MESSAGE(r, "field 'nodes': expected an array of 1 node names (one "
                    "per written buffer)");
}

TEST(PlanValidation, GemmDimensionsAndStridesFitTheBuffers) {
  std::string plan = validPlan();
  Refusal r = parseError(replace(plan, "\"k\": 3", "\"k\": 4"));
  EXPECT_MESSAGE(r, "plan.json: entry 'main': step 0 (gemm): field 'a': "
                    "operand a needs 8 elements");
  EXPECT_MESSAGE(r, "but buffer 0 holds 6");
  r = parseError(replace(plan, "\"k\": 3", "\"k\": 0"));
  EXPECT_MESSAGE(r, "step 0 (gemm): field 'k': must be at least 1");
  r = parseError(replace(plan, "\"k\": 3", "\"k\": 4294967296"));
  EXPECT_MESSAGE(r, "field 'k': 4294967296 exceeds the limit 2147483647");
  r = parseError(replace(plan, "\"k\": 3", "\"k\": \"3\""));
  EXPECT_MESSAGE(r, "field 'k': expected a non-negative integer, got string");
  r = parseError(replace(replace(plan, "\"batch\": 1", "\"batch\": 4"),
                         "\"stride_a\": 0",
                         "\"stride_a\": 6148914691236517206"));
  EXPECT_MESSAGE(r, "step 0 (gemm): field 'stride_a': operand a needs more "
                    "than 2^64 elements");
  r = parseError(replace(replace(plan, "\"batch\": 1", "\"batch\": 2"),
                         "\"stride_c\": 0", "\"stride_c\": 4"));
  EXPECT_MESSAGE(r, "field 'stride_c': operand c needs 8 elements");
  r = parseError(replace(plan, "\"trans_a\": false", "\"trans_a\": 0"));
  EXPECT_MESSAGE(r, "field 'trans_a': expected true or false");
  r = parseError(replace(plan, "\"c\": 2", "\"c\": 0"));
  EXPECT_MESSAGE(r, "field 'c'");
  // Operands of different dtypes.
  r = parseError(replace(plan, "\"offset\": 64, \"dtype\": \"f32\"",
                         "\"offset\": 64, \"dtype\": \"f64\""));
  EXPECT_MESSAGE(r, "step 0 (gemm): field 'b': buffer 1 has dtype f64, "
                    "operand a has f32");
  // Integer GEMMs are not supported.
  EntryBuilder e("ints");
  int a = e.buffer("i32", {2, 2}), b = e.buffer("i32", {2, 2}),
      c = e.buffer("i32", {2, 2});
  e.gemm(a, b, c, 1, 2, 2, 2, false, false, 0, 0, 0);
  r = parseError(planJson({e}, "null", "null"));
  EXPECT_MESSAGE(r,
                 "buffer 0 has dtype i32; gemm supports f32, f64, bf16 and f16");
  // 16-bit GEMMs (mixed precision) are, without an epilogue.
  for (const char *dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    EntryBuilder h("halves");
    int ha = h.buffer(dtype, {2, 2}), hb = h.buffer(dtype, {2, 2}),
        hc = h.buffer(dtype, {2, 2});
    h.gemm(ha, hb, hc, 1, 2, 2, 2, false, false, 0, 0, 0);
    std::string halfPlan = planJson({h}, "null", "null");
    std::string error;
    EXPECT_TRUE(parsePlan(halfPlan, "plan.json", &error)) << error;
    r = parseError(replace(halfPlan, "\"kind\": \"gemm\"",
                           "\"kind\": \"gemm\", \"epilogue\": \"relu\""));
    EXPECT_MESSAGE(r, std::string("field 'epilogue': ") + dtype +
                          " gemm steps take no epilogue");
  }
}

TEST(PlanValidation, CopySizesMustAgree) {
  EntryBuilder e("main");
  int a = e.buffer("f32", {4}), b = e.buffer("f32", {5});
  e.input("a", "input", a);
  e.copy(a, b);
  e.output("b", "output", b);
  Refusal r = parseError(planJson({e}, "null", "null"));
  EXPECT_MESSAGE(r, "step 0 (copy): field 'dst': buffer 1 has 20 bytes, src "
                    "buffer 0 has 16");
}

TEST(PlanValidation, NamesAndConventions) {
  // Two inputs in the same bytes.
  std::string plan = validPlan();
  Refusal r = parseError(replace(plan, "\"offset\": 64,", "\"offset\": 0,"));
  EXPECT_MESSAGE(r, "input 1: 'b' (buffer 1) overlaps input 'a' (buffer 0)");
  r = parseError(replace(plan, "\"name\": \"bias\"", "\"name\": \"a\""));
  EXPECT_MESSAGE(r, "duplicate input name 'a'");
  r = parseError(replace(plan, "\"kind\": \"input\"", "\"kind\": \"weights\""));
  EXPECT_MESSAGE(r, "unknown input kind 'weights'");
  r = parseError(replace(plan, "\"name\": \"bias\"", "\"name\": \"step\""));
  EXPECT_MESSAGE(r, "'step' must be a 0-D i64 (training convention), got f32 "
                    "[2, 2]");
  r = parseError(replace(plan, "\"name\": \"y\"", "\"name\": \"\""));
  EXPECT_MESSAGE(r, "is not a valid name");
  r = parseError(replace(plan, "\"kind\": \"output\"", "\"kind\": \"grad\""));
  EXPECT_MESSAGE(r, "grad output 'y' names no param input of this entry");
  r = parseError(
      planJson({validEntry(), validEntry()}, "\"kernels.so\"", "null"));
  EXPECT_MESSAGE(r, "duplicate entry name 'main'");
  r = parseError(
      replace(plan, "\"kernels\": \"kernels.so\"", "\"kernels\": null"));
  EXPECT_MESSAGE(r, "field 'kernels': is null, but entries have kernel steps");
  r = parseError("[1, 2]");
  EXPECT_MESSAGE(r, "plan.json: expected an object, got array");
  r = parseError("{\"format\": ");
  EXPECT_MESSAGE(r, "plan.json: not valid JSON");
  r = parseError(replace(plan, "\"entries\": [", "\"entries\": [], \"x\": ["));
  EXPECT_MESSAGE(r, "the plan has no entry points");
}

TEST(PlanValidation, FileNamesStayInsideTheArtifact) {
  for (const char *name : {"../kernels.so", "/etc/passwd", "sub/kernels.so",
                           "..", ".", "", "a\\nb"}) {
    std::string quoted = std::string("\"") + name + "\"";
    Refusal r = parseError(replace(validPlan(), "\"kernels\": \"kernels.so\"",
                                   std::string("\"kernels\": ") + quoted));
    EXPECT_MESSAGE(r, "field 'kernels'");
    EXPECT_MESSAGE(r, "not a plain file name");
    r = parseError(replace(validPlan(), "\"params\": null",
                           std::string("\"params\": ") + quoted));
    EXPECT_MESSAGE(r, "field 'params'");
  }
  Refusal r = parseError(
      replace(validPlan(), "\"kernels\": \"kernels.so\"", "\"kernels\": 5"));
  EXPECT_MESSAGE(r, "expected a file name or null, got integer");
}

TEST(PlanValidation, MissingSymbolAndMissingKernels) {
  Refusal r = loadError(
      replace(validPlan(), "\"name\": \"add_relu4\"", "\"name\": \"nope_k\""));
  EXPECT_MESSAGE(r, "kernels.so: kernel symbol 'nope_k' not found");
  r = loadError(validPlan(), /*kernels=*/false);
  EXPECT_EQ(r.code, ErrorCode::IO);
  EXPECT_MESSAGE(r, "kernels.so: cannot load kernels");
  // A file that is not a shared object.
  TempDir dir;
  writeBytes(dir.file("plan.json"), validPlan());
  writeBytes(dir.file("kernels.so"), "not an ELF file");
  std::string error;
  EXPECT_FALSE(Artifact::load(dir.path(), &error));
  EXPECT_NE(error.find("cannot load kernels"), std::string::npos) << error;
  // No plan at all.
  TempDir empty;
  EXPECT_FALSE(Artifact::load(empty.path(), &error));
  EXPECT_NE(error.find("plan.json: cannot open"), std::string::npos) << error;
}

TEST(PlanValidation, ParamsMustMatchTheInputs) {
  TempDir dir;
  ASSERT_TRUE(writeRegressionArtifact(dir.path()));
  std::string error;
  ASSERT_TRUE(Artifact::load(dir.path(), &error)) << error;

  // w of the wrong shape.
  SafetensorsWriter bad;
  float zeros[4] = {};
  bad.add("w", DType::F32, {1, 4}, zeros, 16);
  bad.add("b", DType::F32, {1}, zeros, 4);
  bad.add("w.momentum", DType::F32, {4, 1}, zeros, 16);
  bad.add("b.momentum", DType::F32, {1}, zeros, 4);
  ASSERT_TRUE(bad.write(dir.file("params.safetensors"), &error));
  ErrorCode code;
  EXPECT_FALSE(Artifact::load(dir.path(), &error, &code));
  EXPECT_EQ(code, ErrorCode::Format);
  EXPECT_NE(error.find("params.safetensors: tensor 'w' is f32 [1, 4], the plan "
                       "expects f32 [4, 1] (param input of entry "
                       "'train_step')"),
            std::string::npos)
      << error;

  // b.momentum missing.
  SafetensorsWriter missing;
  missing.add("w", DType::F32, {4, 1}, zeros, 16);
  missing.add("b", DType::F32, {1}, zeros, 4);
  missing.add("w.momentum", DType::F32, {4, 1}, zeros, 16);
  ASSERT_TRUE(missing.write(dir.file("params.safetensors"), &error));
  EXPECT_FALSE(Artifact::load(dir.path(), &error));
  EXPECT_NE(error.find("no tensor 'b.momentum' (state input of entry "
                       "'train_step')"),
            std::string::npos)
      << error;

  // A truncated params file.
  writeBytes(dir.file("params.safetensors"), lengthPrefix(100) + "{\"w\"");
  EXPECT_FALSE(Artifact::load(dir.path(), &error));
  EXPECT_NE(error.find("params.safetensors"), std::string::npos) << error;
}

TEST(PlanValidation, ParamTypesAgreeAcrossEntries) {
  EntryBuilder a("one"), b("two");
  a.input("w", "param", a.buffer("f32", {4}));
  b.input("w", "param", b.buffer("f32", {5}));
  Refusal r = parseError(planJson({a, b}, "null", "null"));
  EXPECT_MESSAGE(r, "entry 'two': param 'w' is f32 [5] but another entry has "
                    "it as param f32 [4]");
}

// Random damage to a valid plan must give an error or a plan, never a crash.
TEST(PlanValidation, SurvivesRandomMutations) {
  std::string base = validPlan();
  std::mt19937 rng(12345);
  const char alphabet[] = "{}[]\":,-0123456789e.tfnul \\x";
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
      case 0:
        text[at] = alphabet[rng() % (sizeof(alphabet) - 1)];
        break;
      case 1:
        text.erase(at, 1 + rng() % 8);
        break;
      default:
        text.resize(at);
        break;
      }
      if (text.empty())
        text = "{";
    }
    std::string error;
    if (parsePlan(text, "plan.json", &error))
      ++accepted;
    else
      EXPECT_FALSE(error.empty());
  }
  EXPECT_LT(accepted, 3000);
}

} // namespace
} // namespace loomrt::test
