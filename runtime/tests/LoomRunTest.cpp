//===- LoomRunTest.cpp - loom-run as a user runs it: exit codes, messages -===//
//
// These tests run the built loom-run binary in a child process, including
// one that is SIGKILLed while it writes checkpoints.
//
//===----------------------------------------------------------------------===//

#include "CudaFixtures.h"
#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/LoomRun.h"
#include "loomrt/Trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace loomrt::test {
namespace {

struct Outcome {
  int status = -1;    ///< exit status, or -signal
  std::string output; ///< stdout and stderr
};

/// Starts loom-run with `args`, its stdout and stderr into a pipe.
pid_t spawn(const std::vector<std::string> &args, int &readFd) {
  int fds[2];
  if (::pipe(fds) != 0)
    return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(LOOMRT_LOOM_RUN_PATH));
    for (const std::string &a : args)
      argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(LOOMRT_LOOM_RUN_PATH, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  readFd = fds[0];
  return pid;
}

/// Runs loom-run to completion (killing it after 60 s: a test never hangs).
Outcome loomRun(const std::vector<std::string> &args) {
  Outcome out;
  int fd;
  pid_t pid = spawn(args, fd);
  if (pid < 0)
    return out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buffer[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 100);
    if (ready > 0) {
      ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got <= 0)
        break;
      out.output.append(buffer, static_cast<size_t>(got));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      out.output += "\n[test: killed after 60 s]";
      break;
    }
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return out;
}

class LoomRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    model = dir.file("model.loom");
    std::filesystem::create_directories(model);
    ASSERT_TRUE(writeRegressionArtifact(model));
    data = dir.file("data.npz");
    ASSERT_TRUE(writeRegressionData(data, 24));
  }
  TempDir dir;
  std::string model, data;
};

#define EXPECT_OUTPUT(outcome, text)                                           \
  EXPECT_NE((outcome).output.find(text), std::string::npos)                    \
      << "output: " << (outcome).output

// loom-run's flags come from one table (loomRunFlags): --help and
// docs/loom-run.md describe every one of them, and --help names no other
// loom-run flag (the loomc flags it mentions are listed here).
TEST_F(LoomRunTest, FlagTableMatchesHelpAndDocs) {
  std::vector<std::string> flags = loomRunFlags();
  std::set<std::string> table(flags.begin(), flags.end());
  EXPECT_EQ(table.size(), flags.size()) << "a flag is in the table twice";
  Outcome help = loomRun({"--help"});
  ASSERT_EQ(help.status, 0);
  std::ifstream in(LOOMRT_LOOM_RUN_DOCS);
  ASSERT_TRUE(in) << LOOMRT_LOOM_RUN_DOCS;
  std::string docs((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  auto mentions = [](const std::string &text, const std::string &flag) {
    std::regex word("--" + flag + "([^a-z0-9-]|$)");
    return std::regex_search(text, word);
  };
  for (const std::string &flag : flags) {
    EXPECT_TRUE(mentions(help.output, flag)) << "--help lacks --" << flag;
    EXPECT_TRUE(mentions(docs, flag)) << "docs/loom-run.md lacks --" << flag;
  }
  const std::set<std::string> loomcFlags = {"target", "dp", "zero", "tp",
                                            "pp"};
  std::regex any("--([a-z][a-z0-9-]*)");
  for (auto it = std::sregex_iterator(help.output.begin(), help.output.end(),
                                      any);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    EXPECT_TRUE(table.count(name) || loomcFlags.count(name))
        << "--help names --" << name << ", which is not in the flag table";
  }
}

TEST_F(LoomRunTest, HelpAndUsageErrors) {
  Outcome o = loomRun({"--help"});
  EXPECT_EQ(o.status, 0);
  EXPECT_OUTPUT(o, "usage: loom-run ARTIFACT.loom MODE [options]");
  EXPECT_OUTPUT(o, "--resume CKPT|DIR");

  o = loomRun({model, "--train", "--frobnicate"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "loom-run: error: unknown option '--frobnicate'");
  o = loomRun({model});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "no mode");
  o = loomRun({model, "--train", "--data", data});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--train needs --steps N");
  o = loomRun({model, "--train", "--data", data, "--steps", "-3"});
  EXPECT_EQ(o.status, 2);
  o = loomRun({model, "--train", "--data", data, "--steps", "ten"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--steps expects a non-negative integer, got 'ten'");
  o = loomRun({model, "--entry=forward", "--data", data, "--output-dir", "x"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--data does not apply to --entry");
  o = loomRun({model, "--train", "--info"});
  EXPECT_EQ(o.status, 2);
  o = loomRun({model, "--train", "--data", data, "--steps"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--steps needs a value");
}

TEST_F(LoomRunTest, BadArtifactsFailCleanly) {
  Outcome o = loomRun({dir.file("nope.loom"), "--info"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "not an artifact directory");

  std::string plan = readBytes(model + "/plan.json");
  writeBytes(model + "/plan.json", plan.substr(0, plan.size() / 2));
  o = loomRun({model, "--info"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "plan.json: not valid JSON");

  std::string renamed = plan;
  renamed.replace(renamed.find("lr_mse"), 6, "lr_mse_v2");
  writeBytes(model + "/plan.json", renamed);
  o = loomRun({model, "--train", "--data", data, "--steps", "3"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "kernel symbol 'lr_mse_v2' not found");

  writeBytes(model + "/plan.json", plan);
  std::filesystem::remove(model + "/kernels.so");
  o = loomRun({model, "--train", "--data", data, "--steps", "3"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "kernels.so: cannot load kernels");
}

TEST_F(LoomRunTest, TrainsWithProgressLinesAndRefusesBadInput) {
  std::string metrics = dir.file("m.jsonl"), params = dir.file("p.safetensors");
  Outcome o = loomRun({model, "--train", "--data", data, "--steps", "20",
                       "--batch-size", "8", "--metrics", metrics,
                       "--save-params", params, "--eval-data", data,
                       "--checkpoint-dir", dir.file("ckpt")});
  ASSERT_EQ(o.status, 0) << o.output;
  // Not a terminal: plain lines every 10% of the steps, then a summary.
  EXPECT_OUTPUT(o, "step 2/20  loss ");
  EXPECT_OUTPUT(o, "step 20/20  loss ");
  EXPECT_OUTPUT(o, "eval at step 20: loss ");
  EXPECT_OUTPUT(o, "trained steps 0..20 in ");
  EXPECT_OUTPUT(o, ", eval loss ");
  std::string error;
  EXPECT_TRUE(SafetensorsFile::open(params, &error)) << error;
  EXPECT_TRUE(
      std::filesystem::exists(dir.file("ckpt") + "/" + checkpointFileName(20)));

  o = loomRun({model, "--train", "--data", data, "--steps", "2", "--quiet"});
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.output, "");

  o = loomRun(
      {model, "--train", "--data", data, "--steps", "2", "--batch-size", "32"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "does not match the compiled batch size 8");

  std::string bad = dir.file("bad.npz");
  ASSERT_TRUE(writeNpz(bad,
                       {{"x", f32Array({8, 3}, std::vector<float>(24))},
                        {"y", f32Array({8, 1}, std::vector<float>(8))}},
                       nullptr));
  o = loomRun({model, "--train", "--data", bad, "--steps", "2"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "array 'x' is f32 [8, 3], expected f32 [N, 4]");

  std::string ckpt = dir.file("ckpt") + "/" + checkpointFileName(20);
  std::string bytes = readBytes(ckpt);
  std::string truncated = dir.file("truncated.safetensors");
  writeBytes(truncated, bytes.substr(0, bytes.size() - 7));
  o = loomRun({model, "--train", "--data", data, "--steps", "30", "--resume",
               truncated});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "cannot read checkpoint: " + truncated);
}

// A plan compiled for a mesh: --info shows it, its shards and collectives;
// --profile counts the collectives apart; --accumulate is refused.
TEST_F(LoomRunTest, ShowsTrainsAndProfilesAMeshPlan) {
  std::string mesh = dir.file("zero3.loom");
  std::filesystem::create_directories(mesh);
  ASSERT_TRUE(writeMeshRegressionArtifact(mesh, 1, 3));
  Outcome o = loomRun({mesh, "--info"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_OUTPUT(o, "mesh: dp=1 (1 rank: mpirun -np 1)\n");
  EXPECT_OUTPUT(o, "  input  param  w f32 [4] (shard of [4, 1] over dp)\n");
  EXPECT_OUTPUT(o, "  collective all_reduce mean over dp: 2 step(s)\n");
  EXPECT_OUTPUT(o, "  collective reduce_scatter mean over dp: 1 step(s)\n");

  std::string profile = dir.file("profile.csv");
  o = loomRun({mesh, "--train", "--data", data, "--steps", "3", "--profile",
               profile, "--save-params", dir.file("p.safetensors")});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_OUTPUT(o, "profile train_step: ");
  EXPECT_OUTPUT(o, ", collectives ");
  EXPECT_NE(readBytes(profile).find(
                ",collective,reduce_scatter mean 4 f32 over dp=1,"),
            std::string::npos)
      << readBytes(profile);

  o = loomRun(
      {mesh, "--train", "--data", data, "--steps", "3", "--accumulate", "2"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "--accumulate 2 with an artifact compiled for a mesh "
                   "(mesh dp=1) needs its entry 'apply_gradients'");

  // --entry gives the sharded param from the whole one in params.safetensors.
  std::string x = dir.file("x.npy"), y = dir.file("y.npy");
  std::string error;
  ASSERT_TRUE(writeNpy(
      x,
      f32Array({kBatch, kFeatures}, std::vector<float>(kBatch * kFeatures, 1)),
      &error));
  ASSERT_TRUE(writeNpy(y, f32Array({kBatch, 1}, std::vector<float>(kBatch, 2)),
                       &error));
  o = loomRun({mesh, "--entry=forward", "--input", "x=" + x, "--input",
               "y=" + y, "--output-dir", dir.file("out")});
  ASSERT_EQ(o.status, 0) << o.output;
  std::optional<NpyArray> loss = readNpy(dir.file("out/loss.npy"), &error);
  ASSERT_TRUE(loss) << error;
  EXPECT_EQ(f32Values(*loss), std::vector<float>{4}); // (0 - 2)^2: w = b = 0
}

// --collectives=auto|mpi|nccl: what it accepts, and each refusal with
// what to do (the runs over NCCL themselves are MeshNcclTest's, under
// mpirun).
TEST_F(LoomRunTest, CollectivesFlag) {
  Outcome o = loomRun({"--help"});
  EXPECT_OUTPUT(o, "--collectives=MODE");
  o = loomRun(
      {model, "--train", "--data", data, "--steps", "1", "--collectives=gloo"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--collectives expects auto, mpi or nccl, got 'gloo'");
  o = loomRun({model, "--info", "--collectives=nccl"});
  EXPECT_EQ(o.status, 2);
  EXPECT_OUTPUT(o, "--collectives does not apply to --info");
  // A cpu artifact: mpi and auto train; nccl is refused.
  for (const char *mode : {"--collectives=auto", "--collectives=mpi"}) {
    o = loomRun({model, "--train", "--data", data, "--steps", "1", mode});
    EXPECT_EQ(o.status, 0) << mode << ": " << o.output;
  }
  o = loomRun(
      {model, "--train", "--data", data, "--steps", "1", "--collectives=nccl"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "loom-run: error: " + model +
                       "/plan.json: collective steps over device collectives "
                       "(NCCL) were asked for, but the cpu backend has none");
  o = loomRun({model, "--entry=forward", "--output-dir", dir.file("out"),
               "--collectives", "nccl"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "the cpu backend has none");

  // A cuda artifact compiled for 2 ranks (the fake driver): mpi refused at
  // load, naming the step; nccl refused where libnccl cannot be loaded.
  std::string cuda = dir.file("dp2-cuda.loom");
  std::filesystem::create_directories(cuda);
  ASSERT_TRUE(writeMeshRegressionArtifact(cuda, 2, 1));
  std::string error;
  ASSERT_TRUE(makeFakeCudaArtifact(cuda, &error)) << error;
  ScopedEnv driver("LOOMRT_CUDA_DRIVER", LOOMRT_FAKE_CUDA_PATH);
  ScopedEnv blasLt("LOOMRT_CUBLASLT_LIBRARY", LOOMRT_FAKE_CUDA_PATH);
  o = loomRun(
      {cuda, "--train", "--data", data, "--steps", "1", "--collectives=mpi"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "loom-run: error: " + cuda +
                       "/plan.json: entry 'train_step': step 5 "
                       "(collective): an all_reduce over 2 ranks cannot run "
                       "over host collectives (MPI) on the cuda backend");
  EXPECT_OUTPUT(o, "(loom-run --collectives=nccl or auto)");
  {
    ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", dir.file("missing/libnccl.so.2"));
    o = loomRun({cuda, "--train", "--data", data, "--steps", "1",
                 "--collectives=nccl"});
    EXPECT_EQ(o.status, 1);
    EXPECT_OUTPUT(o, "were asked for, but no NCCL (LOOMRT_NCCL_LIBRARY=" +
                         dir.file("missing/libnccl.so.2") +
                         " cannot be loaded");
  }
  // One process: auto takes NCCL, and the plan needs its 2 ranks.
  o = loomRun({cuda, "--train", "--data", data, "--steps", "1"});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "this run has 1 process: launch it with mpirun -np 2");
}

TEST_F(LoomRunTest, EvaluatesAnEntryIntoNpyFiles) {
  std::vector<float> x(kBatch * kFeatures), y(kBatch);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.1f * static_cast<float>(i);
  double expected = 0;
  for (int i = 0; i < kBatch; ++i) {
    y[i] = 1.0f + static_cast<float>(i);
    expected += double(y[i]) * y[i];
  }
  expected /= kBatch; // w = b = 0: the loss is mean(y^2)
  std::string error;
  ASSERT_TRUE(
      writeNpy(dir.file("x.npy"), f32Array({kBatch, kFeatures}, x), &error));
  ASSERT_TRUE(writeNpy(dir.file("y.npy"), f32Array({kBatch, 1}, y), &error));
  std::string out = dir.file("out");
  Outcome o =
      loomRun({model, "--entry=forward", "--input", "x=" + dir.file("x.npy"),
               "--input", "y=" + dir.file("y.npy"), "--output-dir", out});
  ASSERT_EQ(o.status, 0) << o.output;
  std::optional<NpyArray> loss = readNpy(out + "/loss.npy", &error);
  ASSERT_TRUE(loss) << error;
  EXPECT_TRUE(loss->shape.empty());
  EXPECT_NEAR(f32Values(*loss)[0], expected, 1e-4 * expected);

  // train_step: step defaults to 0 and comes back as 1.
  o = loomRun({model, "--entry", "train_step", "--input",
               "x=" + dir.file("x.npy"), "--input", "y=" + dir.file("y.npy"),
               "--output-dir", out});
  ASSERT_EQ(o.status, 0) << o.output;
  std::optional<NpyArray> step = readNpy(out + "/step.npy", &error);
  ASSERT_TRUE(step) << error;
  int64_t stepValue;
  std::memcpy(&stepValue, step->data.data(), 8);
  EXPECT_EQ(stepValue, 1);
  EXPECT_TRUE(std::filesystem::exists(out + "/w.momentum.npy"));

  o = loomRun({model, "--entry=forward", "--input", "x=" + dir.file("x.npy"),
               "--output-dir", out});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "missing input 'y' (f32 [8, 1]): pass --input y=FILE.npy");
  o = loomRun({model, "--entry=forward", "--input", "x=" + dir.file("y.npy"),
               "--input", "y=" + dir.file("y.npy"), "--output-dir", out});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "input 'x': expected f32 [8, 4], got f32 [8, 1]");
  o = loomRun({model, "--entry=forward", "--input", "z=" + dir.file("y.npy"),
               "--output-dir", out});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "entry 'forward' has no input of that name");
  o = loomRun({model, "--entry=backward", "--output-dir", out});
  EXPECT_EQ(o.status, 1);
  EXPECT_OUTPUT(o, "no entry 'backward'");
}

TEST_F(LoomRunTest, HostileOutputNamesStayInTheOutputDirectory) {
  std::string art = dir.file("hostile.loom");
  std::filesystem::create_directories(art);
  EntryBuilder e("main");
  int a = e.buffer("f32", {4});
  e.input("a", "input", a);
  e.output("../escape", "output", a);
  e.output("/etc/x", "output", a);
  e.output("..", "output", a);
  e.output("_.._escape", "output", a);
  writeBytes(art + "/plan.json", planJson({e}, "null", "null"));
  std::string error;
  ASSERT_TRUE(writeNpy(dir.file("a.npy"), f32Array({4}, {1, 2, 3, 4}), &error));
  std::string out = dir.file("deep/out");
  Outcome o = loomRun({art, "--entry=main", "--input", "a=" + dir.file("a.npy"),
                       "--output-dir", out});
  ASSERT_EQ(o.status, 0) << o.output;
  std::vector<std::string> names;
  for (const auto &f : std::filesystem::directory_iterator(out))
    names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = {"_.._escape.npy", "_etc_x.npy",
                                       "_...npy", "_.._escape-2.npy"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  EXPECT_FALSE(std::filesystem::exists(dir.file("deep/escape.npy")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("escape.npy")));
}

/// Loads the final params of a --save-params file as bytes per tensor.
std::string paramBytes(const std::string &path) { return readBytes(path); }

TEST_F(LoomRunTest, SurvivesSigkillDuringCheckpointWrites) {
  // Long enough that the kill lands mid-run: every step writes a checkpoint.
  constexpr int kSteps = 3000;
  // The reference: the same run, never interrupted.
  std::string reference = dir.file("reference.safetensors");
  Outcome o =
      loomRun({model, "--train", "--data", data, "--steps",
               std::to_string(kSteps), "--save-params", reference, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.output;

  std::random_device device;
  std::mt19937 rng(device());
  std::string ckpt = dir.file("ckpt"), metrics = dir.file("metrics.jsonl");
  int fd;
  pid_t pid =
      spawn({model, "--train", "--data", data, "--steps",
             std::to_string(kSteps), "--checkpoint-dir", ckpt, "--save-every",
             "1", "--keep-checkpoints", "3", "--metrics", metrics, "--quiet"},
            fd);
  ASSERT_GT(pid, 0);
  // Wait for the first checkpoint, then kill at a random moment.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(ckpt + "/latest") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150000));
  ::kill(pid, SIGKILL);
  int status;
  ::waitpid(pid, &status, 0);
  ::close(fd);
  bool killed = WIFSIGNALED(status);
  EXPECT_TRUE(killed) << "the run finished before the kill";

  // Every checkpoint file there is complete and loadable; only a temporary
  // of the write in flight may be left beside them.
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(model, &error);
  ASSERT_TRUE(artifact) << error;
  int64_t newest = -1;
  int checkpoints = 0;
  for (const auto &f : std::filesystem::directory_iterator(ckpt)) {
    std::string name = f.path().filename().string();
    if (name == "latest")
      continue;
    if (name.find(".tmp.") != std::string::npos) {
      EXPECT_TRUE(killed) << "temporary left by a finished run: " << name;
      continue;
    }
    ++checkpoints;
    CheckpointInfo info;
    EXPECT_TRUE(
        loadCheckpoint(f.path().string(), *artifact, nullptr, &info, &error))
        << name << ": " << error;
    newest = std::max(newest, info.step);
  }
  ASSERT_GE(checkpoints, 1);
  // keep 3, plus the newest one if the kill came before the old was pruned.
  ASSERT_LE(checkpoints, 4);
  std::string latest = readBytes(ckpt + "/latest");
  ASSERT_FALSE(latest.empty());
  EXPECT_TRUE(
      std::filesystem::exists(ckpt + "/" + latest.substr(0, latest.size() - 1)))
      << latest;
  // At most the step in flight is lost: metrics are written before the save.
  std::vector<std::string> lines;
  {
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);)
      if (line.size() > 2 && line.back() == '}')
        lines.push_back(line);
  }
  ASSERT_FALSE(lines.empty());
  int64_t logged = std::stoll(lines.back().substr(lines.back().find(": ") + 2));
  EXPECT_GE(newest, logged - 1)
      << "newest checkpoint " << newest << ", last logged step " << logged;
  std::printf("killed after step %lld; newest checkpoint: step %lld\n",
              static_cast<long long>(logged), static_cast<long long>(newest));

  // Resuming from the directory finishes the run exactly as the reference.
  std::string resumed = dir.file("resumed.safetensors");
  o = loomRun({model, "--train", "--data", data, "--steps",
               std::to_string(kSteps), "--resume", ckpt, "--checkpoint-dir",
               ckpt, "--save-params", resumed, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(paramBytes(resumed), paramBytes(reference))
      << "resumed from step " << newest << (killed ? " (killed)" : "");
  // The resumed run cleaned up the dead writer's temporaries.
  for (const auto &f : std::filesystem::directory_iterator(ckpt))
    EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos);
}

} // namespace
} // namespace loomrt::test
