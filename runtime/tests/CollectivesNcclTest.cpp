//===- CollectivesNcclTest.cpp - The NCCL collectives, run by mpirun ------===//
//
// Run as `mpirun -np N LoomRTCollectivesNcclTest`. CTest runs N = 2 and 4
// with the fake NCCL and the fake CUDA driver (LOOMRT_NCCL_LIBRARY,
// LOOMRT_CUDA_DRIVER: host memory, MPI underneath); scripts/gpu_nccl_check.sh
// runs it against the real libnccl and driver, one rank per GPU. The checks
// are those of CollectivesMpiTest.cpp on device buffers (rank r contributes
// r + 1 + i at element i), plus what only NCCL does (f16/bf16 reductions),
// ordering on the caller's stream, and, against the fake, the misuse it
// refuses. Exit status 0 only if every check on every rank passed; rank 0
// prints the total.
//
// With an argument, one of the waits that another rank never ends, each
// with a 1 s timeout; the rank that stays away sleeps, and rank 0 prints
// the verdict and ends the job (MPI_Abort: a non-zero exit either way):
// - `init-timeout` (3 ranks): the last rank takes part in startNccl's
//   bootstrap but never creates its NCCL communicator; the others'
//   startNccl fails after the timeout, naming the rank and the timeout.
// - `stream-timeout` (2 ranks): rank 1 never joins rank 0's all-reduces:
//   one waited for as a request, one on the CUDA backend's stream, waited
//   for by Backend::synchronize; both fail after the timeout (the second
//   aborting the communicator), and freeing everything then returns.
// - `mpi-start-timeout` (2 ranks): rank 1 starts MPI and makes startMpi's
//   communicators, but never joins its first collective; rank 0's startMpi
//   fails after the timeout.
//
//===----------------------------------------------------------------------===//

#include "../src/Half.h"
#include "RankChecks.h"
#include "cuda/CudaApi.h"
#include "cuda/NcclApi.h"
#include "cuda/NcclCollectives.h"
#include "tool/MpiCollectives.h"

#include "loomrt/Backend.h"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt;
using namespace loomrt::cuda;
using namespace loomrt::test;

namespace {

bool run(std::unique_ptr<Request> r, const char *what,
         const std::string &callError) {
  std::string error;
  bool ok = r && r->wait(&error);
  check(ok, std::string(what) +
                " completed: " + (r ? error : "call failed: " + callError));
  return ok;
}

/// Device memory through the driver, copied on `stream`.
struct Device {
  const DriverApi *cu = nullptr;
  CUstream stream = nullptr;
  std::vector<CUdeviceptr> owned;

  ~Device() {
    for (CUdeviceptr p : owned)
      cu->cuMemFree(p);
  }
  void *alloc(size_t bytes) {
    CUdeviceptr p = 0;
    if (cu->cuMemAlloc(&p, bytes) != CUDA_SUCCESS) {
      std::fprintf(stderr, "rank %d: cuMemAlloc failed\n", rankChecks.rank);
      std::exit(1);
    }
    owned.push_back(p);
    return reinterpret_cast<void *>(p);
  }
  bool sync() { return cu->cuStreamSynchronize(stream) == CUDA_SUCCESS; }
  /// A device copy of `host`, uploaded and synchronized (or only queued).
  template <typename T>
  void *upload(const std::vector<T> &host, bool wait = true) {
    void *d = alloc(host.size() * sizeof(T));
    cu->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(d), host.data(),
                          host.size() * sizeof(T), stream);
    if (wait)
      check(sync(), "upload");
    return d;
  }
  template <typename T>
  std::vector<T> download(const void *d, size_t count, bool wait = true) {
    std::vector<T> host(count);
    cu->cuMemcpyDtoHAsync(host.data(), reinterpret_cast<CUdeviceptr>(d),
                          count * sizeof(T), stream);
    if (wait)
      check(sync(), "download");
    return host;
  }
};

/// The fake NCCL's own entry points, when LOOMRT_NCCL_LIBRARY is the fake.
struct Fake {
  void *lib = nullptr;
  int64_t (*groups)() = nullptr;
  int (*getUniqueId)(void *) = nullptr;
  int (*initRank)(void **, int, nccl::ncclUniqueId, int) = nullptr;
  explicit operator bool() const { return groups; }
  Fake() {
    const char *path = std::getenv("LOOMRT_NCCL_LIBRARY");
    lib = path && *path ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!lib)
      return;
    groups = reinterpret_cast<int64_t (*)()>(::dlsym(lib, "fakenccl_groups"));
    getUniqueId =
        reinterpret_cast<int (*)(void *)>(::dlsym(lib, "ncclGetUniqueId"));
    initRank =
        reinterpret_cast<decltype(initRank)>(::dlsym(lib, "ncclCommInitRank"));
  }
};

void collectiveChecks(Collectives &comm, Device &dev, const Fake &fake) {
  const int r = comm.rank(), n = comm.size();
  const size_t count = 5;
  std::string error;

  // all-reduce: sum and avg of f32, f64; max of i64; all in flight together.
  {
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i)
      x[i] = float(r + 1 + i);
    void *dx = dev.upload(x);
    void *dy = dev.upload(std::vector<double>(x.begin(), x.end()));
    void *dz = dev.upload(std::vector<int64_t>(x.begin(), x.end()));
    void *davg = dev.upload(std::vector<double>(x.begin(), x.end()));
    auto a = comm.allReduce(dx, count, DType::F32, ReduceOp::Sum, &error);
    auto b = comm.allReduce(dy, count, DType::F64, ReduceOp::Sum, &error);
    auto c = comm.allReduce(dz, count, DType::I64, ReduceOp::Max, &error);
    auto d = comm.allReduce(davg, count, DType::F64, ReduceOp::Avg, &error);
    run(std::move(d), "allReduce avg", error);
    run(std::move(c), "allReduce max", error);
    run(std::move(a), "allReduce f32", error);
    run(std::move(b), "allReduce f64", error);
    auto fx = dev.download<float>(dx, count);
    auto fy = dev.download<double>(dy, count);
    auto fz = dev.download<int64_t>(dz, count);
    auto favg = dev.download<double>(davg, count);
    for (size_t i = 0; i < count; ++i) {
      double sum = n * (n + 1) / 2.0 + double(n) * i;
      check(fx[i] == float(sum), "f32 sum element " + std::to_string(i));
      check(fy[i] == sum, "f64 sum element " + std::to_string(i));
      check(fz[i] == int64_t(n + i), "i64 max element " + std::to_string(i));
      check(std::fabs(favg[i] - sum / n) < 1e-12,
            "f64 avg element " + std::to_string(i));
    }
  }
  // 16-bit floats reduce on NCCL: bf16 sum and avg, f16 max (values exact
  // in both).
  {
    std::vector<uint16_t> b(count), h(count);
    for (size_t i = 0; i < count; ++i) {
      b[i] = floatToBf16(float(r + 1 + i));
      h[i] = floatToHalf(float(r * 10 + i));
    }
    void *db = dev.upload(b), *dbavg = dev.upload(b), *dh = dev.upload(h);
    run(comm.allReduce(db, count, DType::BF16, ReduceOp::Sum, &error),
        "allReduce bf16 sum", error);
    run(comm.allReduce(dbavg, count, DType::BF16, ReduceOp::Avg, &error),
        "allReduce bf16 avg", error);
    run(comm.allReduce(dh, count, DType::F16, ReduceOp::Max, &error),
        "allReduce f16 max", error);
    auto fb = dev.download<uint16_t>(db, count);
    auto fbavg = dev.download<uint16_t>(dbavg, count);
    auto fh = dev.download<uint16_t>(dh, count);
    for (size_t i = 0; i < count; ++i) {
      double sum = n * (n + 1) / 2.0 + double(n) * i;
      check(bf16ToFloat(fb[i]) == float(sum),
            "bf16 sum element " + std::to_string(i) + ": " +
                std::to_string(bf16ToFloat(fb[i])));
      check(std::fabs(bf16ToFloat(fbavg[i]) - sum / n) <= sum / n / 128,
            "bf16 avg element " + std::to_string(i));
      check(halfToFloat(fh[i]) == float((n - 1) * 10 + i),
            "f16 max element " + std::to_string(i));
    }
  }
  // Odd counts, and fewer elements than ranks.
  for (size_t odd : {size_t(7), size_t(1)}) {
    std::vector<float> x(odd);
    for (size_t i = 0; i < odd; ++i)
      x[i] = float(r * 100 + i);
    void *dx = dev.upload(x);
    run(comm.allReduce(dx, odd, DType::F32, ReduceOp::Sum, &error),
        "allReduce odd count", error);
    auto fx = dev.download<float>(dx, odd);
    for (size_t i = 0; i < odd; ++i)
      check(fx[i] == float(100 * n * (n - 1) / 2 + n * i),
            "odd-count sum element " + std::to_string(i));
  }
  // reduce-scatter: block b of rank s holds s + b; rank r gets sum_s (s + r).
  {
    std::vector<float> send(count * n);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        send[b * count + i] = float(r + b);
    void *ds = dev.upload(send);
    void *dr = dev.upload(std::vector<float>(count, -1));
    run(comm.reduceScatter(ds, dr, count, DType::F32, ReduceOp::Sum, &error),
        "reduceScatter", error);
    auto got = dev.download<float>(dr, count);
    for (size_t i = 0; i < count; ++i)
      check(got[i] == float(n * (n - 1) / 2 + n * r), "reduceScatter");
  }
  // all-gather of bf16 bits: block s is rank s's.
  {
    void *ds = dev.upload(std::vector<uint16_t>(count, uint16_t(100 + r)));
    void *dr = dev.upload(std::vector<uint16_t>(count * n, 0));
    run(comm.allGather(ds, dr, count, DType::BF16, &error), "allGather", error);
    auto got = dev.download<uint16_t>(dr, count * n);
    for (int s = 0; s < n; ++s)
      check(got[s * count] == uint16_t(100 + s) &&
                got[s * count + count - 1] == uint16_t(100 + s),
            "allGather block " + std::to_string(s));
  }
  // broadcast from the last rank.
  {
    void *dx = dev.upload(std::vector<int32_t>(count, r == n - 1 ? 77 : r));
    run(comm.broadcast(dx, count, DType::I32, n - 1, &error), "broadcast",
        error);
    auto got = dev.download<int32_t>(dx, count);
    check(got[0] == 77 && got[count - 1] == 77, "broadcast values");
  }
  // all-to-all: block b of rank s is 10 s + b; rank r gets 10 s + r from s.
  {
    std::vector<double> send(count * n);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        send[b * count + i] = 10.0 * r + b;
    void *ds = dev.upload(send);
    void *dr = dev.upload(std::vector<double>(count * n, -1));
    run(comm.allToAll(ds, dr, count, DType::F64, &error), "allToAll", error);
    auto got = dev.download<double>(dr, count * n);
    for (int s = 0; s < n; ++s)
      check(got[s * count] == 10.0 * s + r &&
                got[s * count + count - 1] == 10.0 * s + r,
            "allToAll from " + std::to_string(s));
  }
  // send/recv around the ring, both posted before either is waited for:
  // one NCCL group (else the ring deadlocks on a GPU).
  {
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    void *dout = dev.upload(std::vector<int64_t>(count, 1000 + r));
    void *din = dev.upload(std::vector<int64_t>(count, -1));
    int64_t groupsBefore = fake ? fake.groups() : 0;
    auto rx = comm.recv(din, count, DType::I64, prev, 7, &error);
    auto tx = comm.send(dout, count, DType::I64, next, 7, &error);
    run(std::move(rx), "recv", error);
    run(std::move(tx), "send", error);
    auto got = dev.download<int64_t>(din, count);
    check(got[0] == 1000 + prev && got[count - 1] == 1000 + prev, "ring value");
    if (fake)
      check(fake.groups() == groupsBefore + 1,
            "the ring was one group: " +
                std::to_string(fake.groups() - groupsBefore));
  }
  // Refusals: i16 reductions, an average of i64, a rank out of range.
  {
    void *dk = dev.alloc(count * 8);
    std::string why;
    check(!comm.allReduce(dk, count, DType::I16, ReduceOp::Sum, &why) &&
              why.find("cannot reduce i16") != std::string::npos,
          "i16 reduction refused: " + why);
    check(!comm.allReduce(dk, count, DType::I64, ReduceOp::Avg, &why) &&
              why.find("avg") != std::string::npos,
          "i64 avg refused: " + why);
    check(!comm.send(dk, count, DType::I64, n, 0, &why) &&
              why.find("not in [0,") != std::string::npos,
          "send to rank n refused: " + why);
    check(!comm.broadcast(dk, count, DType::I64, -1, &why) &&
              why.find("not in [0,") != std::string::npos,
          "broadcast from rank -1 refused: " + why);
  }
  check(comm.barrier(&error), "barrier: " + error);
}

/// On the caller's stream, nothing is synchronized between the upload, the
/// all-reduce and the download: the stream orders them.
void streamOrderChecks(Collectives &mpi, Device &dev) {
  NcclOptions options;
  options.stream = dev.stream;
  options.device = -1;
  std::string error;
  std::unique_ptr<Collectives> comm = startNccl(mpi, options, &error);
  check(comm != nullptr, "startNccl on the caller's stream: " + error);
  if (!comm)
    return;
  const int r = comm->rank(), n = comm->size();
  std::vector<float> x(3, float(r + 1));
  void *dx = dev.upload(x, /*wait=*/false);
  auto req = comm->allReduce(dx, 3, DType::F32, ReduceOp::Sum, &error);
  std::vector<float> got = dev.download<float>(dx, 3, /*wait=*/false);
  run(std::move(req), "allReduce on the caller's stream", error);
  check(dev.sync(), "caller's stream");
  check(got[0] == float(n * (n + 1) / 2) && got[2] == float(n * (n + 1) / 2),
        "stream order: " + std::to_string(got[0]));
}

/// What the fake refuses as NCCL would (called on every rank alike).
void misuseChecks(Collectives &mpi, Device &dev, const Fake &fake) {
  const int r = mpi.rank(), n = mpi.size();
  nccl::ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  void *comm = nullptr;
  check(fake.initRank(&comm, n, id, r) == nccl::ncclInvalidArgument,
        "an id ncclGetUniqueId did not make is refused");
  fake.getUniqueId(&id);
  check(fake.initRank(&comm, n + 1, id, r) == nccl::ncclInvalidArgument,
        "nranks other than the world's is refused");
  check(fake.initRank(&comm, n, id, n) == nccl::ncclInvalidArgument,
        "rank n is refused");
  if (n > 1) {
    // Rank 0's id on every rank, but numbered off by one.
    nccl::ncclUniqueId shared = id;
    std::string e;
    check(waitFor(mpi.broadcast(&shared, sizeof shared, DType::U8, 0, &e), &e),
          "broadcast of the id: " + e);
    check(fake.initRank(&comm, n, shared, (r + 1) % n) ==
              nccl::ncclInvalidArgument,
          "another rank's number is refused");
  }
  // Each rank's own id: the ranks disagree.
  if (n > 1)
    check(fake.initRank(&comm, n, id, r) == nccl::ncclInvalidUsage,
          "different ids on different ranks are refused");

  // A receive shorter than the send: the fake reports the mismatch, the
  // request fails with it and the communicator is aborted.
  std::string error;
  std::unique_ptr<Collectives> nc = startNccl(mpi, NcclOptions(), &error);
  check(nc != nullptr, "startNccl: " + error);
  if (!nc || n < 2)
    return;
  void *d = dev.alloc(8 * 8);
  if (r == 0) {
    run(nc->send(d, 5, DType::I64, 1, 0, &error), "send of 5", error);
  } else if (r == 1) {
    std::string why;
    auto rx = nc->recv(d, 4, DType::I64, 0, 0, &why);
    check(rx && !rx->wait(&why) && why.find("ncclRecv") != std::string::npos &&
              why.find("failed") != std::string::npos &&
              why.find("ncclRecv of 32 bytes from rank 0, which sent 40") !=
                  std::string::npos,
          "a truncated receive fails: " + why);
    check(!nc->allReduce(d, 1, DType::F32, ReduceOp::Sum, &why) &&
              why.find("aborted") != std::string::npos,
          "the communicator is aborted after: " + why);
  }
  check(mpi.barrier(&error), "MPI barrier");
}
// --- Waits that another rank never ends -------------------------------------

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A rank that stays away: it sleeps until rank 0 ends the job.
[[noreturn]] void stayAway(int rank, const char *why) {
  std::fprintf(stderr, "rank %d: %s, then sleeps\n", rank, why);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(50));
  std::fprintf(stderr, "rank %d: was not ended by rank 0\n", rank);
  std::_Exit(1);
}

/// The end of a mode: the failed checks of the ranks that waited, summed
/// over `waiting` (the world split without the rank that stays away; null:
/// rank 0 alone waited), in rank 0's verdict; then rank 0 ends the job (the
/// others wait for that).
[[noreturn]] void verdict(Collectives *waiting, const char *mode) {
  int64_t failed = rankChecks.failures;
  std::string error;
  if (waiting && !waitFor(waiting->allReduce(&failed, 1, DType::I64,
                                             ReduceOp::Sum, &error),
                          &error))
    failed = 1;
  if (!waiting || waiting->rank() == 0) {
    std::printf("%s: %d rank(s) waited, %d checks per rank, %lld failed in "
                "all\n",
                mode, waiting ? waiting->size() : 1, rankChecks.checks,
                static_cast<long long>(failed));
    std::fflush(stdout);
    std::fflush(stderr);
    // mpirun forwards the ranks' output asynchronously: let it, before
    // MPI_Abort ends everything.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    abortMpi(1);
  }
  std::this_thread::sleep_for(std::chrono::seconds(50));
  std::_Exit(1);
}

/// The last rank does what startNccl does over MPI before it creates the
/// communicator (the status all-reduce, the broadcast of rank 0's unique
/// id) and stops there; the others' startNccl must give up after 1 s.
[[noreturn]] void initTimeout(Collectives &mpi) {
  const int r = mpi.rank(), n = mpi.size();
  const bool absent = r == n - 1;
  std::string error;
  std::unique_ptr<Collectives> waiting = mpi.split(absent ? 1 : 0, r, &error);
  check(bool(waiting), "split: " + error);
  if (absent) {
    int32_t failed = 0;
    std::vector<char> message(4 + nccl::kUniqueIdBytes, 0);
    check(waitFor(mpi.allReduce(&failed, 1, DType::I32, ReduceOp::Max, &error),
                  &error) &&
              waitFor(mpi.broadcast(message.data(), message.size(), DType::U8,
                                    0, &error),
                      &error),
          "the bootstrap: " + error);
    stayAway(r, "took part in startNccl's bootstrap, never creates its NCCL "
                "communicator");
  }
  NcclOptions options;
  options.timeoutSeconds = 1;
  Clock::time_point start = Clock::now();
  std::unique_ptr<Collectives> comm = startNccl(mpi, options, &error);
  double took = since(start);
  check(!comm, "startNccl without the last rank fails");
  std::string call = "ncclCommInitRankConfig (rank " + std::to_string(r) +
                     " of " + std::to_string(n) + ", ";
  check(error.rfind(call, 0) == 0 &&
            error.find("): the communicator was not created within 1 s: one "
                       "of its ranks did not join") != std::string::npos,
        "the message names the call, the rank and the timeout: " + error);
  check(took >= 1 && took < 10,
        "it fails after the timeout: " + std::to_string(took) + " s");
  std::printf("rank %d: startNccl failed after %.1f s: %s\n", r, took,
              error.c_str());
  std::fflush(stdout);
  verdict(waiting.get(), "init-timeout");
}

/// Rank 1 never joins rank 0's all-reduces: one waited for as a request,
/// one on the CUDA backend's stream, waited for by Backend::synchronize.
[[noreturn]] void streamTimeout(Collectives &mpi) {
  const int r = mpi.rank();
  std::string error;
  NcclOptions options;
  options.timeoutSeconds = 1;
  std::unique_ptr<Collectives> own = startNccl(mpi, options, &error);
  check(bool(own), "startNccl: " + error);
  std::unique_ptr<Backend> backend = createBackend("cuda", &error);
  check(bool(backend), "the cuda backend: " + error);
  if (!own || !backend)
    verdict(nullptr, "stream-timeout");
  std::unique_ptr<Arena> arena = backend->allocateArena(64, &error, nullptr);
  check(bool(arena), "an arena: " + error);
  std::unique_ptr<Collectives> onStream =
      backend->startDeviceCollectives(mpi, 1, &error);
  check(bool(onStream), "startDeviceCollectives: " + error);
  if (!arena || !onStream)
    verdict(nullptr, "stream-timeout");
  if (r == 1)
    stayAway(r, "started both communicators, joins no collective");

  // A request: the watchdog polls its event.
  CUdeviceptr p = 0;
  const DriverApi *cu = loadDriver(&error);
  check(cu && cu->cuMemAlloc(&p, 16) == CUDA_SUCCESS, "cuMemAlloc");
  void *data = reinterpret_cast<void *>(p);
  std::string why;
  std::unique_ptr<Request> request =
      own->allReduce(data, 4, DType::F32, ReduceOp::Sum, &why);
  check(bool(request), "allReduce issued: " + why);
  Clock::time_point start = Clock::now();
  bool ok = request && request->wait(&why);
  double took = since(start);
  check(!ok && why.find("ncclAllReduce of 4 f32 elements (this rank's "
                        "collective 1) did not complete within 1 s (another "
                        "rank died or hangs)") != std::string::npos,
        "the request fails naming the collective: " + why);
  check(took >= 1 && took < 10,
        "after the timeout: " + std::to_string(took) + " s");
  std::printf("rank 0: the request failed after %.1f s: %s\n", took,
              why.c_str());
  std::fflush(stdout);

  // The backend's stream, stuck behind a collective: synchronize() gives up
  // after the timeout and aborts the communicator, whose requests then fail.
  std::unique_ptr<Request> queued = onStream->allReduce(
      backend->deviceAddress(*arena, 0), 4, DType::F32, ReduceOp::Sum, &why);
  check(bool(queued), "allReduce on the backend's stream issued: " + why);
  start = Clock::now();
  ok = backend->synchronize(&why);
  took = since(start);
  check(!ok && why.find("synchronizing the CUDA stream: its work (kernels, "
                        "copies and NCCL collectives) did not complete "
                        "within 1 s: a collective waits for a rank that "
                        "died or hangs; the NCCL communicators on the "
                        "stream were aborted") != std::string::npos,
        "synchronize fails: " + why);
  check(took >= 1 && took < 10,
        "after the timeout: " + std::to_string(took) + " s");
  std::printf("rank 0: synchronize failed after %.1f s: %s\n", took,
              why.c_str());
  std::fflush(stdout);
  check(queued && !queued->wait(&why) &&
            why.find("the NCCL communicator was aborted: the CUDA stream "
                     "they are queued on did not drain within 1 s") !=
                std::string::npos,
        "its request fails after the abort: " + why);
  check(!onStream->allReduce(backend->deviceAddress(*arena, 0), 4, DType::F32,
                             ReduceOp::Sum, &why) &&
            why.find("aborted") != std::string::npos,
        "and so does a new collective: " + why);

  // Nothing is left waiting: every destructor returns at once.
  start = Clock::now();
  queued.reset();
  request.reset();
  onStream.reset();
  arena.reset();
  backend.reset();
  own.reset();
  cu->cuMemFree(p);
  took = since(start);
  check(took < 5, "freeing everything returns: " + std::to_string(took) + " s");
  verdict(nullptr, "stream-timeout");
}

/// Rank 1 makes startMpi's communicators (MPI_Comm_split_type,
/// MPI_Comm_split: they have no nonblocking form) but never joins its first
/// collective; rank 0's startMpi must give up after 1 s. Before any
/// Collectives exist: raw MPI for rank 1.
[[noreturn]] void mpiStartTimeout() {
  const int r = launcherWorldRank();
  rankChecks.rank = r;
  if (r == 1) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm node, cross;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL,
                        &node);
    int localRank = 0;
    MPI_Comm_rank(node, &localRank);
    MPI_Comm_split(MPI_COMM_WORLD, localRank, r, &cross);
    stayAway(r, "made startMpi's communicators, never joins its first "
                "collective");
  }
  MpiOptions options;
  options.timeoutSeconds = 1;
  std::string error;
  Clock::time_point start = Clock::now();
  std::unique_ptr<Collectives> mpi = startMpi(options, &error);
  double took = since(start);
  check(!mpi, "startMpi without rank 1 fails");
  check(error.find("starting MPI: the first collective of the 2 ranks "
                   "(MPI_Iallreduce of the ranks per machine) did not "
                   "complete within 1 s (another rank died or hangs; "
                   "--collective-timeout)") != std::string::npos,
        "the message: " + error);
  // The splits waited for rank 1's start (up to a few seconds of mpirun
  // starting it); the timeout counts from the collective.
  check(took >= 1 && took < 20,
        "after the timeout: " + std::to_string(took) + " s");
  std::printf("rank 0: startMpi failed after %.1f s: %s\n", took,
              error.c_str());
  std::fflush(stdout);
  verdict(nullptr, "mpi-start-timeout");
}

} // namespace

int main(int argc, char **argv) {
  if (!launchedByMpi()) {
    std::fprintf(stderr, "run me with mpirun -np N [init-timeout | "
                         "stream-timeout | mpi-start-timeout]\n");
    return 2;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "mpi-start-timeout")
    mpiStartTimeout();
  std::string error;
  std::unique_ptr<Collectives> mpi = startMpi(MpiOptions(), &error);
  if (!mpi) {
    std::fprintf(stderr, "startMpi: %s\n", error.c_str());
    return 1;
  }
  rankChecks.rank = mpi->rank();
  const int rank = rankChecks.rank;
  if (mode == "init-timeout")
    initTimeout(*mpi);
  if (mode == "stream-timeout")
    streamTimeout(*mpi);
  if (!mode.empty()) {
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    abortMpi(2);
  }
  Device dev;
  dev.cu = loadDriver(&error);
  int devices = 0;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  if (!dev.cu || dev.cu->cuDeviceGetCount(&devices) != CUDA_SUCCESS ||
      devices == 0 ||
      dev.cu->cuDeviceGet(&device, mpi->localRank() % devices) !=
          CUDA_SUCCESS ||
      dev.cu->cuDevicePrimaryCtxRetain(&ctx, device) != CUDA_SUCCESS ||
      dev.cu->cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
      dev.cu->cuStreamCreate(&dev.stream, CU_STREAM_NON_BLOCKING) !=
          CUDA_SUCCESS) {
    std::fprintf(stderr, "rank %d: no CUDA device: %s\n", rank, error.c_str());
    abortMpi(1);
  }
  Fake fake;
  {
    NcclOptions options; // the device of the local rank, its own stream
    std::unique_ptr<Collectives> comm = startNccl(*mpi, options, &error);
    if (!comm) {
      std::fprintf(stderr, "rank %d: startNccl: %s\n", rank, error.c_str());
      abortMpi(1);
    }
    check(std::string(comm->name()) == "nccl" && comm->rank() == rank &&
              comm->size() == mpi->size(),
          "rank and size");
    collectiveChecks(*comm, dev, fake);
  }
  streamOrderChecks(*mpi, dev);
  if (fake)
    misuseChecks(*mpi, dev, fake);

  int64_t failed = rankChecks.failures;
  if (!waitFor(mpi->allReduce(&failed, 1, DType::I64, ReduceOp::Sum, &error),
               &error))
    failed = 1;
  // How the communicators were created: nonblocking, or (an NCCL older than
  // 2.14) with the blocking ncclCommInitRank.
  const nccl::NcclApi *api = nccl::loadNccl(&error);
  if (rank == 0 && api)
    std::printf("nccl communicators created by %s (NCCL %s)\n",
                api->ncclCommInitRankConfig
                    ? "ncclCommInitRankConfig, nonblocking"
                    : "ncclCommInitRank, blocking: no ncclCommInitRankConfig",
                api->versionString().c_str());
  if (rank == 0)
    std::printf("%d ranks (nccl, %s): %d checks per rank, %lld failed in "
                "all\n",
                mpi->size(), fake ? "fake NCCL" : "real NCCL",
                rankChecks.checks, static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
