//===- CApiTest.cpp - The C API and the loomrt-inspect tool ---------------===//

#include "loomrt/loomrt.h"

#include "loomrt/Safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>

using namespace loomrt;
using namespace loomrt::test;

namespace {

class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    SafetensorsWriter writer;
    float w[4] = {};
    writer.add("fc1.weight", DType::F32, {2, 2}, w, sizeof(w));
    writer.add("fc1.bias", DType::BF16, {2}, w, 4);
    writer.setMetadata("format", "pt");
    good = dir.file("good.safetensors");
    std::string error;
    ASSERT_TRUE(writer.write(good, &error)) << error;
    bad = dir.file("bad.safetensors");
    writeBytes(bad, rawFile(R"({"w":{"dtype":"F32","shape":[25],)"
                            R"("data_offsets":[0,100]}})",
                            std::string(64, '\0')));
  }

  TempDir dir;
  std::string good, bad;
};

const char kGoodSummary[] = "fc1.weight f32 [2, 2] 16\n"
                            "fc1.bias bf16 [2] 4\n"
                            "__metadata__ format=pt\n";

} // namespace

TEST_F(CApiTest, VersionAndStatusStrings) {
  EXPECT_STREQ(loomrt_version(), "0.1.0");
  EXPECT_STREQ(loomrt_status_string(LOOMRT_OK), "LOOMRT_OK");
  EXPECT_STREQ(loomrt_status_string(LOOMRT_ERROR_FORMAT),
               "LOOMRT_ERROR_FORMAT");
  EXPECT_STREQ(loomrt_status_string(LOOMRT_ERROR_OUT_OF_MEMORY),
               "LOOMRT_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(loomrt_status_string(static_cast<loomrt_status>(77)),
               "LOOMRT_UNKNOWN_STATUS");
}

TEST_F(CApiTest, InspectGoodFile) {
  char buf[256];
  ASSERT_EQ(loomrt_safetensors_inspect(good.c_str(), buf, sizeof(buf)),
            LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_STREQ(buf, kGoodSummary);
  EXPECT_STREQ(loomrt_last_error(), "");
}

TEST_F(CApiTest, InspectReportsFormatAndIOErrors) {
  char buf[256];
  EXPECT_EQ(loomrt_safetensors_inspect(bad.c_str(), buf, sizeof(buf)),
            LOOMRT_ERROR_FORMAT);
  EXPECT_EQ(std::string(loomrt_last_error()),
            bad + ": tensor 'w': data_offsets [0, 100) exceed buffer of 64 "
                  "bytes");
  EXPECT_STREQ(buf, "");

  std::string missing = dir.file("missing.safetensors");
  EXPECT_EQ(loomrt_safetensors_inspect(missing.c_str(), buf, sizeof(buf)),
            LOOMRT_ERROR_IO);
  EXPECT_NE(std::strstr(loomrt_last_error(), "missing.safetensors"), nullptr);

  // A success clears the previous message.
  EXPECT_EQ(loomrt_safetensors_inspect(good.c_str(), buf, sizeof(buf)),
            LOOMRT_OK);
  EXPECT_STREQ(loomrt_last_error(), "");
}

TEST_F(CApiTest, InspectRejectsBadArgumentsAndSmallBuffers) {
  char buf[16];
  EXPECT_EQ(loomrt_safetensors_inspect(nullptr, buf, sizeof(buf)),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loomrt_safetensors_inspect(good.c_str(), nullptr, 10),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loomrt_safetensors_inspect(good.c_str(), buf, 0),
            LOOMRT_ERROR_INVALID_ARGUMENT);

  EXPECT_EQ(loomrt_safetensors_inspect(good.c_str(), buf, sizeof(buf)),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(buf),
            std::string(kGoodSummary).substr(0, sizeof(buf) - 1));
  std::string needed = "summary needs " + std::to_string(sizeof(kGoodSummary)) +
                       " bytes, buffer has 16";
  EXPECT_NE(std::string(loomrt_last_error()).find(needed), std::string::npos)
      << loomrt_last_error();
}

TEST_F(CApiTest, LastErrorIsPerThread) {
  char buf[64];
  EXPECT_EQ(loomrt_safetensors_inspect(bad.c_str(), buf, sizeof(buf)),
            LOOMRT_ERROR_FORMAT);
  std::string other;
  std::thread([&] { other = loomrt_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_STRNE(loomrt_last_error(), "");
}

namespace {
/// Runs loomrt-inspect with `args`; returns its exit code, stdout+stderr.
int runInspect(const std::string &args, std::string &output) {
  std::string command = std::string(LOOMRT_INSPECT_PATH) + " " + args + " 2>&1";
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return -1;
  char chunk[256];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0)
    output.append(chunk, got);
  int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
} // namespace

TEST_F(CApiTest, InspectTool) {
  std::string output;
  EXPECT_EQ(runInspect("'" + good + "'", output), 0);
  EXPECT_EQ(output, kGoodSummary);

  output.clear();
  EXPECT_EQ(runInspect("'" + bad + "'", output), 1);
  EXPECT_EQ(output, "loomrt-inspect: error: " + bad +
                        ": tensor 'w': data_offsets [0, 100) exceed buffer "
                        "of 64 bytes\n");

  output.clear();
  EXPECT_EQ(runInspect("", output), 2);
  EXPECT_NE(output.find("usage: loomrt-inspect"), std::string::npos);

  output.clear();
  EXPECT_EQ(runInspect("--help", output), 0);
  EXPECT_NE(output.find("usage: loomrt-inspect"), std::string::npos);
}
