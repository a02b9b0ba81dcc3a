//===- NcclCollectivesTest.cpp - Starting NCCL where it cannot start ------===//
//
// The single-process half of the NCCL backend's tests (the collectives
// themselves run under mpirun: CollectivesNcclTest.cpp): a missing libnccl,
// a library that is not NCCL, and a missing CUDA driver each give a clear
// message and no crash; the real libnccl, where installed, has every entry
// point NcclApi.h declares under the names we resolve.
//
//===----------------------------------------------------------------------===//

#include "cuda/NcclCollectives.h"
#include "cuda/NcclApi.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace loomrt;
using loomrt::test::ScopedEnv;

namespace {

class DoneRequest final : public Request {
public:
  bool wait(std::string *) noexcept override { return true; }
};

/// A world of one rank on host memory: what startNccl needs from MPI.
class OneRank final : public Collectives {
public:
  int calls = 0;
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  int localRank() const noexcept override { return 0; }
  const char *name() const noexcept override { return "one-rank"; }
  std::unique_ptr<Request> done() noexcept {
    ++calls;
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> allReduce(void *, size_t, DType, ReduceOp,
                                     std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> reduceScatter(const void *, void *, size_t, DType,
                                         ReduceOp,
                                         std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> allGather(const void *, void *, size_t, DType,
                                     std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> broadcast(void *, size_t, DType, int,
                                     std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> allToAll(const void *, void *, size_t, DType,
                                    std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> send(const void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return done();
  }
  std::unique_ptr<Request> recv(void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return done();
  }
  bool barrier(std::string *) noexcept override { return true; }
};

TEST(NcclCollectives, MissingLibraryIsAClearError) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  OneRank world;
  std::string error;
  std::unique_ptr<Collectives> comm = startNccl(world, NcclOptions(), &error);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(error.find("no NCCL (LOOMRT_NCCL_LIBRARY=/nonexistent/"
                       "libnccl.so.2 cannot be loaded"),
            std::string::npos)
      << error;
  // The ranks still agreed on the failure (no rank is left waiting for an
  // id), and no id was broadcast.
  EXPECT_EQ(world.calls, 1);
}

TEST(NcclCollectives, LibraryThatIsNotNcclIsRefused) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", LOOMRT_FAKE_CUDA_PATH);
  std::string error;
  EXPECT_EQ(nccl::loadNccl(&error), nullptr);
  EXPECT_NE(error.find("has no ncclGetVersion: it is not NCCL"),
            std::string::npos)
      << error;
}

#ifdef LOOMRT_FAKE_NCCL_PATH
TEST(NcclCollectives, MissingDriverIsAClearError) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", LOOMRT_FAKE_NCCL_PATH);
  ScopedEnv driver("LOOMRT_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  OneRank world;
  std::string error;
  EXPECT_EQ(startNccl(world, NcclOptions(), &error), nullptr);
  EXPECT_NE(error.find("no CUDA driver (LOOMRT_CUDA_DRIVER=/nonexistent/"
                       "libcuda.so.1 cannot be loaded"),
            std::string::npos)
      << error;
}

TEST(NcclCollectives, FakeNcclResolves) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", LOOMRT_FAKE_NCCL_PATH);
  std::string error;
  const nccl::NcclApi *api = nccl::loadNccl(&error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_EQ(api->versionString(), "2.28.0");
  // What makes communicators nonblocking (2.14 and newer): resolved.
  EXPECT_NE(api->ncclCommInitRankConfig, nullptr);
  EXPECT_NE(api->ncclCommFinalize, nullptr);
  EXPECT_EQ(api->describe(nccl::ncclInvalidUsage, nullptr)
                .rfind("ncclInvalidUsage (invalid usage)", 0),
            0u);
}

TEST(NcclCollectives, DeviceOutOfRangeIsAClearError) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", LOOMRT_FAKE_NCCL_PATH);
  ScopedEnv driver("LOOMRT_CUDA_DRIVER", LOOMRT_FAKE_CUDA_PATH);
  OneRank world;
  NcclOptions options;
  options.device = 3;
  std::string error;
  EXPECT_EQ(startNccl(world, options, &error), nullptr);
  EXPECT_NE(error.find("CUDA device 3 (NcclOptions::device) does not exist: "
                       "this machine has 1 CUDA device(s)"),
            std::string::npos)
      << error;
}
#endif

// The real library, where one is installed (no GPU needed to resolve
// symbols and ask the version).
TEST(NcclCollectives, RealNcclHasEveryEntryPoint) {
  ScopedEnv nccl("LOOMRT_NCCL_LIBRARY", nullptr);
  std::string error;
  const nccl::NcclApi *api = nccl::loadNccl(&error);
  if (!api && error.find("not found") != std::string::npos)
    GTEST_SKIP() << error;
  ASSERT_NE(api, nullptr) << error;
  EXPECT_GE(api->version, 21000);
  EXPECT_EQ(api->versionString().rfind("2.", 0), 0u) << api->versionString();
  if (api->version >= 21400) {
    EXPECT_NE(api->ncclCommInitRankConfig, nullptr) << api->versionString();
    EXPECT_NE(api->ncclCommFinalize, nullptr) << api->versionString();
  }
  EXPECT_NE(api->describe(nccl::ncclInvalidArgument, nullptr)
                .find("ncclInvalidArgument"),
            std::string::npos);
}

} // namespace
