//===- MpiCollectives.cpp - Collectives over MPI --------------------------===//
//
// Each collective is MPI's nonblocking one (MPI_Iallreduce, ...) on
// MPI_COMM_WORLD, or on a communicator split from it (split: MPI_Comm_split,
// one per mesh axis of a plan with several); Avg is MPI_SUM, then a division
// when the request is waited for. A hierarchical all-reduce chains three
// nonblocking steps over a machine's communicator and a cross-machine one
// (MpiOptions). Element types map to MPI's (f32, f64, i64, i32); bf16 and f16,
// which MPI has no type for, reduce through user ops over 16-bit words that add
// (or take the maximum of) each pair in f32 and round the result back, as NCCL
// reduces them. Waiting polls the request (MPI_Test) against a deadline, the
// watchdog: a collective that another rank never joins (it died or hangs)
// fails after MpiOptions::timeoutSeconds with a message that names this
// rank and the collective (on a split communicator also the world ranks it
// spans and this one's world rank), and loom-run then ends the job.
//
//===----------------------------------------------------------------------===//

#include "MpiCollectives.h"

#include "../Half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <initializer_list>
#include <vector>

#if LOOMRT_HAVE_MPI
#include <mpi.h>
#endif

namespace loomrt {

bool launchedByMpi() noexcept {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v))
      return true;
  return false;
}

namespace {
/// The first of the environment variables `names` that holds a number in
/// [0, 2^20), or -1.
int launcherNumber(std::initializer_list<const char *> names) noexcept {
  for (const char *v : names) {
    const char *text = std::getenv(v);
    if (!text || !*text)
      continue;
    char *end = nullptr;
    long n = std::strtol(text, &end, 10);
    if (*end == '\0' && n >= 0 && n < (1 << 20))
      return int(n);
  }
  return -1;
}
} // namespace

int launcherLocalRank() noexcept {
  return launcherNumber(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
}

int launcherWorldRank() noexcept {
  return launcherNumber(
      {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
}

int launcherWorldSize() noexcept {
  return launcherNumber({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
}

#if LOOMRT_HAVE_MPI
namespace {

std::string mpiError(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(what) + ": " + std::string(text, length);
}

float widen16(bool bf16, uint16_t v) {
  return bf16 ? bf16ToFloat(v) : halfToFloat(v);
}
uint16_t narrow16(bool bf16, float v) {
  return bf16 ? floatToBf16(v) : floatToHalf(v);
}

/// Divides `count` floating-point elements by `n` (ReduceOp::Avg).
void divide(void *data, size_t count, DType dtype, int n) {
  if (dtype == DType::F32) {
    for (size_t i = 0; i < count; ++i)
      static_cast<float *>(data)[i] /= float(n);
  } else if (dtype == DType::F64) {
    for (size_t i = 0; i < count; ++i)
      static_cast<double *>(data)[i] /= double(n);
  } else {
    bool bf16 = dtype == DType::BF16;
    auto *v = static_cast<uint16_t *>(data);
    for (size_t i = 0; i < count; ++i)
      v[i] = narrow16(bf16, widen16(bf16, v[i]) / float(n));
  }
}

/// MPI_User_function for bf16 or f16 words: inout = in + inout (or the
/// maximum), each pair widened to f32 and the result rounded back.
template <bool Bf16, bool Max>
void reduce16(void *in, void *inout, int *length, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = widen16(Bf16, a[i]), y = widen16(Bf16, b[i]);
    b[i] = narrow16(Bf16, Max ? std::max(x, y) : x + y);
  }
}

/// What a request says about itself when it times out.
struct Watch {
  std::string what; ///< "MPI_Iallreduce of 1024 f32 elements (collective 7)"
  double timeoutSeconds = 0; ///< 0: none
};

/// One outstanding MPI request, then (a hierarchical all-reduce) the next
/// steps, each started when the one before it is done.
class MpiRequest final : public Request {
public:
  using Next = std::function<int(MPI_Request *)>;
  MpiRequest(MPI_Request request, std::vector<Next> next, void *avgData,
             size_t avgCount, DType dtype, int worldSize, Watch watch)
      : request(request), next(std::move(next)), avgData(avgData),
        avgCount(avgCount), dtype(dtype), worldSize(worldSize),
        watch(std::move(watch)) {}
  ~MpiRequest() override {
    // Never waited for: complete it anyway (not after a timeout, which
    // ends the job).
    if (request != MPI_REQUEST_NULL && !timedOut)
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    unregister();
  }

  /// A chained request (a hierarchical all-reduce) registers itself in
  /// `*slot`, the one chain its Collectives lets run at a time: a chain
  /// starts each step when the one before is done, so two in flight could
  /// start their steps in different orders on different ranks, and MPI
  /// collectives on one communicator must come in the same order on all.
  void registerIn(MpiRequest **slot) {
    registration = slot;
    *slot = this;
  }
  bool isFinished() const { return finished; }
  void detach() { registration = nullptr; }
  bool wait(std::string *error) noexcept override {
    std::chrono::steady_clock::time_point start =
        std::chrono::steady_clock::now();
    while (!finished) {
      int rc = poll(start);
      if (rc == kTimedOut) {
        if (error)
          *error = watch.what + " did not complete within " + seconds() +
                   " s (another rank died or hangs; --collective-timeout)";
        return false;
      }
      if (rc != MPI_SUCCESS || !advance(&rc)) {
        if (error)
          *error = mpiError("MPI_Wait", rc);
        return false;
      }
    }
    return true;
  }
  bool test(bool *complete, std::string *error) noexcept override {
    while (!finished) {
      int done = 0;
      int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS && !done) {
        *complete = false;
        return true;
      }
      if (rc != MPI_SUCCESS || !advance(&rc)) {
        if (error)
          *error = mpiError("MPI_Test", rc);
        return false;
      }
    }
    *complete = true;
    return true;
  }

private:
  static constexpr int kTimedOut = -1;
  MPI_Request request;
  std::vector<Next> next;
  void *avgData;
  size_t avgCount;
  DType dtype;
  int worldSize;
  Watch watch;
  bool timedOut = false;
  size_t stage = 0; ///< the next of `next` to start
  bool finished = false;
  MpiRequest **registration = nullptr;

  void unregister() {
    if (registration && *registration == this)
      *registration = nullptr;
    registration = nullptr;
  }

  /// The current MPI request is done: starts the next step, or finishes
  /// (Avg's division).
  bool advance(int *rc) {
    if (stage < next.size()) {
      *rc = next[stage++](&request);
      return *rc == MPI_SUCCESS;
    }
    if (avgData)
      divide(avgData, avgCount, dtype, worldSize);
    finished = true;
    unregister();
    return true;
  }

  /// Waits for `request` (MPI_Test drives MPI's progress), sleeping a
  /// little more each time up to 1 ms, until the watch's deadline from
  /// `start`.
  int poll(std::chrono::steady_clock::time_point start) {
    auto limit = std::chrono::duration<double>(watch.timeoutSeconds);
    std::chrono::microseconds nap(0);
    for (;;) {
      int done = 0;
      int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || done)
        return rc;
      if (watch.timeoutSeconds > 0 &&
          std::chrono::steady_clock::now() - start > limit) {
        timedOut = true;
        return kTimedOut;
      }
      nap = std::min(std::chrono::microseconds(1000),
                     nap + std::chrono::microseconds(10));
      std::this_thread::sleep_for(nap);
    }
  }
  std::string seconds() const {
    char text[32];
    std::snprintf(text, sizeof text, "%g", watch.timeoutSeconds);
    return text;
  }
};

/// What the world's Collectives and those split from it share: bf16 and
/// f16's reduction ops, the watchdog's timeout, and the count of
/// collectives this process has issued (to name one that times out).
struct MpiShared {
  MPI_Op bf16Sum, bf16Max, f16Sum, f16Max; ///< reduce16's
  double timeoutSeconds = 0;
  int64_t issued = 0;
  int worldRank = 0;
};

class MpiCollectives final : public Collectives {
public:
  /// The world. `node`: this machine's ranks; `cross`: the ranks of every
  /// machine with this one's local rank.
  MpiCollectives(MPI_Comm node, MPI_Comm cross, bool hierarchical,
                 double timeoutSeconds)
      : comm(MPI_COMM_WORLD), node(node), cross(cross),
        hierarchical(hierarchical), shared(std::make_shared<MpiShared>()) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(node, &localRank_);
    MPI_Comm_size(node, &localSize_);
    MPI_Comm_size(cross, &nodes_);
    shared->timeoutSeconds = timeoutSeconds;
    shared->worldRank = rank_;
    MPI_Op_create(&reduce16<true, false>, /*commute=*/1, &shared->bf16Sum);
    MPI_Op_create(&reduce16<true, true>, 1, &shared->bf16Max);
    MPI_Op_create(&reduce16<false, false>, 1, &shared->f16Sum);
    MPI_Op_create(&reduce16<false, true>, 1, &shared->f16Max);
  }
  /// A communicator split from `parent` (its `comm`, owned from now on):
  /// `worldRanks` are the world ranks it spans, in its rank order.
  MpiCollectives(MPI_Comm comm, const MpiCollectives &parent,
                 std::string worldRanks)
      : comm(comm), hierarchical(false), shared(parent.shared),
        worldRanks(std::move(worldRanks)) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    localRank_ = parent.localRank_;
  }
  ~MpiCollectives() override {
    if (chainInFlight) // outlives us: it must not write to us any more
      chainInFlight->detach();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return; // a split one that outlived the world: nothing to free
    if (comm != MPI_COMM_WORLD) {
      MPI_Comm_free(&comm);
      return;
    }
    for (MPI_Op *op :
         {&shared->bf16Sum, &shared->bf16Max, &shared->f16Sum, &shared->f16Max})
      MPI_Op_free(op);
    MPI_Comm_free(&node);
    MPI_Comm_free(&cross);
    MPI_Finalize();
  }
  int machines() const { return nodes_; }
  int ranksPerMachine() const { return localSize_; }
  bool isHierarchical() const { return hierarchical; }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int localRank() const noexcept override { return localRank_; }
  const char *name() const noexcept override { return "mpi"; }

  std::unique_ptr<Request> allReduce(void *data, size_t count, DType dtype,
                                     ReduceOp op,
                                     std::string *error) noexcept override {
    MPI_Datatype type;
    MPI_Op mop;
    if (!reducible(dtype, op, &type, &mop, error) || !fits(count, error))
      return nullptr;
    MPI_Request r;
    void *avg = op == ReduceOp::Avg ? data : nullptr;
    if (hierarchical && count >= size_t(localSize_))
      return hierarchicalAllReduce(data, count, dtype, type, mop, avg, error);
    return finish(
        MPI_Iallreduce(MPI_IN_PLACE, data, int(count), type, mop, comm, &r),
        "MPI_Iallreduce", r, avg, count, dtype, count, error);
  }
  std::unique_ptr<Request> reduceScatter(const void *send, void *recv,
                                         size_t count, DType dtype,
                                         ReduceOp op,
                                         std::string *error) noexcept override {
    MPI_Datatype type;
    MPI_Op mop;
    if (!reducible(dtype, op, &type, &mop, error) ||
        !fits(count * size_t(size_), error))
      return nullptr;
    MPI_Request r;
    return finish(
        MPI_Ireduce_scatter_block(send, recv, int(count), type, mop, comm, &r),
        "MPI_Ireduce_scatter_block", r, op == ReduceOp::Avg ? recv : nullptr,
        count, dtype, count * size_t(size_), error);
  }
  std::unique_ptr<Request> allGather(const void *send, void *recv,
                                     size_t count, DType dtype,
                                     std::string *error) noexcept override {
    return move("MPI_Iallgather", dtype, count * size_t(size_), 0, error,
                [&](MPI_Datatype type, MPI_Request *r) {
                  return MPI_Iallgather(send, int(count), type, recv,
                                        int(count), type, comm, r);
                });
  }
  std::unique_ptr<Request> broadcast(void *data, size_t count, DType dtype,
                                     int root,
                                     std::string *error) noexcept override {
    return move("MPI_Ibcast", dtype, count, root, error,
                [&](MPI_Datatype type, MPI_Request *r) {
                  return MPI_Ibcast(data, int(count), type, root, comm, r);
                });
  }
  std::unique_ptr<Request> allToAll(const void *send, void *recv,
                                    size_t count, DType dtype,
                                    std::string *error) noexcept override {
    return move("MPI_Ialltoall", dtype, count * size_t(size_), 0, error,
                [&](MPI_Datatype type, MPI_Request *r) {
                  return MPI_Ialltoall(send, int(count), type, recv, int(count),
                                       type, comm, r);
                });
  }
  std::unique_ptr<Request> send(const void *data, size_t count, DType dtype,
                                int to, int tag,
                                std::string *error) noexcept override {
    return move("MPI_Isend", dtype, count, to, error,
                [&](MPI_Datatype type, MPI_Request *r) {
                  return MPI_Isend(data, int(count), type, to, tag, comm, r);
                });
  }
  std::unique_ptr<Request> recv(void *data, size_t count, DType dtype,
                                int from, int tag,
                                std::string *error) noexcept override {
    return move("MPI_Irecv", dtype, count, from, error,
                [&](MPI_Datatype type, MPI_Request *r) {
                  return MPI_Irecv(data, int(count), type, from, tag, comm, r);
                });
  }
  bool barrier(std::string *error) noexcept override {
    MPI_Request r;
    return waitFor(finish(MPI_Ibarrier(comm, &r), "MPI_Ibarrier", r, nullptr, 0,
                          DType::U8, 0, error),
                   error);
  }

  std::unique_ptr<Collectives> split(int color, int key,
                                     std::string *error) noexcept override {
    try {
      if (color < 0)
        return failNull(error, "MPI_Comm_split: color " +
                                   std::to_string(color) + " is negative");
      MPI_Comm part;
      int rc = MPI_Comm_split(comm, color, key, &part);
      if (rc != MPI_SUCCESS)
        return failNull(error, mpiError("MPI_Comm_split", rc));
      MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN);
      // The world ranks it spans, for the messages of its collectives.
      int size = 1;
      MPI_Comm_size(part, &size);
      std::vector<int> ranks(static_cast<size_t>(size));
      int me = shared->worldRank;
      rc = MPI_Allgather(&me, 1, MPI_INT, ranks.data(), 1, MPI_INT, part);
      if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&part);
        return failNull(error, mpiError("MPI_Allgather", rc));
      }
      std::string text;
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (i == 8 && ranks.size() > 9) {
          text += ", ... " + std::to_string(ranks.back());
          break;
        }
        text += (i ? ", " : "") + std::to_string(ranks[i]);
      }
      return std::make_unique<MpiCollectives>(part, *this, std::move(text));
    } catch (...) {
      return failNull(error, "out of memory splitting the MPI communicator");
    }
  }

private:
  MPI_Comm comm; ///< MPI_COMM_WORLD, or a split of it (owned)
  MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL; ///< the world's
  bool hierarchical;
  /// The hierarchical all-reduce in flight (see MpiRequest::registerIn).
  mutable MpiRequest *chainInFlight = nullptr;
  std::shared_ptr<MpiShared> shared;
  /// A split one's world ranks, "1, 3"; empty for the world.
  std::string worldRanks;
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1, nodes_ = 1;

  static std::unique_ptr<Collectives> failNull(std::string *error,
                                               std::string message) {
    fail(error, std::move(message));
    return nullptr;
  }

  /// Reduce-scatter inside the machine (shard i to local rank i, the
  /// shards as even as the count allows), all-reduce of this rank's shard
  /// across machines, all-gather of the shards inside the machine.
  std::unique_ptr<Request> hierarchicalAllReduce(void *data, size_t count,
                                                 DType dtype,
                                                 MPI_Datatype type, MPI_Op op,
                                                 void *avg,
                                                 std::string *error) const {
    // The chain in flight, if any, finishes first (in issue order, the
    // same on every rank).
    if (chainInFlight && !chainInFlight->isFinished() &&
        !chainInFlight->wait(error))
      return nullptr;
    auto counts = std::make_shared<std::vector<int>>(localSize_);
    auto displs = std::make_shared<std::vector<int>>(localSize_);
    for (int i = 0, at = 0; i < localSize_; ++i) {
      (*counts)[i] = int(count / localSize_ + (size_t(i) < count % localSize_));
      (*displs)[i] = at;
      at += (*counts)[i];
    }
    // This rank's shard in a buffer of its own (MPI forbids the send and
    // receive buffers of a reduce-scatter to overlap), kept alive by the
    // steps that use it.
    int myCount = (*counts)[localRank_];
    auto shard = std::make_shared<std::vector<char>>(
        std::max<size_t>(1, size_t(myCount) * dtypeSize(dtype)));
    MPI_Comm nodeComm = node, crossComm = cross;
    std::vector<MpiRequest::Next> next = {
        [=](MPI_Request *r) {
          return MPI_Iallreduce(MPI_IN_PLACE, shard->data(), myCount, type, op,
                                crossComm, r);
        },
        [=](MPI_Request *r) {
          return MPI_Iallgatherv(shard->data(), myCount, type, data,
                                 counts->data(), displs->data(), type,
                                 nodeComm, r);
        }};
    MPI_Request r;
    int rc = MPI_Ireduce_scatter(data, shard->data(), counts->data(), type, op,
                                 node, &r);
    if (rc != MPI_SUCCESS) {
      fail(error, mpiError("MPI_Ireduce_scatter", rc));
      return nullptr;
    }
    auto request = std::make_unique<MpiRequest>(
        r, std::move(next), avg, count, dtype, size_,
        watchFor("hierarchical all-reduce", count, dtype));
    request->registerIn(&chainInFlight);
    return request;
  }

  Watch watchFor(const std::string &what, size_t elements,
                 DType dtype) const {
    std::string text = what;
    if (elements)
      text += " of " + std::to_string(elements) + " " +
              std::string(dtypeToShortName(dtype)) + " elements";
    if (!worldRanks.empty())
      text += " among world ranks " + worldRanks + " (world rank " +
              std::to_string(shared->worldRank) + ", this rank's collective " +
              std::to_string(++shared->issued) + ")";
    else
      text +=
          " (this rank's collective " + std::to_string(++shared->issued) + ")";
    return {text, shared->timeoutSeconds};
  }
  static bool fail(std::string *error, std::string message) {
    if (error)
      *error = std::move(message);
    return false;
  }
  static bool fits(size_t count, std::string *error) {
    return count <= size_t(INT32_MAX) ||
           fail(error, "a collective of " + std::to_string(count) +
                           " elements: MPI counts stop at 2^31 - 1");
  }
  bool validRank(int r, std::string *error) const {
    return (r >= 0 && r < size_) ||
           fail(error, "rank " + std::to_string(r) + " is not in [0, " +
                           std::to_string(size_) + ")");
  }
  static bool movable(DType dtype, MPI_Datatype *type, std::string *error) {
    switch (dtype) {
    case DType::F64:
    case DType::I64:
      *type = MPI_UINT64_T;
      return true;
    case DType::F32:
    case DType::I32:
      *type = MPI_UINT32_T;
      return true;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      *type = MPI_UINT16_T;
      return true;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      *type = MPI_UINT8_T;
      return true;
    }
    return fail(error, "cannot move elements of this dtype");
  }
  bool reducible(DType dtype, ReduceOp op, MPI_Datatype *type, MPI_Op *mop,
                 std::string *error) const {
    *mop = op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
    const MpiShared &ops = *shared;
    switch (dtype) {
    case DType::F32:
      *type = MPI_FLOAT;
      return true;
    case DType::F64:
      *type = MPI_DOUBLE;
      return true;
    case DType::BF16:
    case DType::F16:
      *type = MPI_UINT16_T;
      *mop = dtype == DType::BF16
                 ? (op == ReduceOp::Max ? ops.bf16Max : ops.bf16Sum)
                 : (op == ReduceOp::Max ? ops.f16Max : ops.f16Sum);
      return true;
    case DType::I64:
      *type = MPI_INT64_T;
      break;
    case DType::I32:
      *type = MPI_INT32_T;
      break;
    default:
      return fail(error, "cannot reduce " +
                             std::string(dtypeToShortName(dtype)) +
                             " elements (f32, f64, bf16, f16, i64 and i32 "
                             "reduce)");
    }
    if (op == ReduceOp::Avg)
      return fail(error, "avg reduces floating-point elements only");
    return true;
  }
  /// A transfer that moves elements without reducing them: `total`
  /// elements must fit MPI's counts, `peer` (a root or partner) must be a
  /// rank, and `start` issues the MPI call with the element type.
  template <typename Start>
  std::unique_ptr<Request> move(const char *what, DType dtype, size_t total,
                                int peer, std::string *error,
                                Start start) const {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(total, error) ||
        !validRank(peer, error))
      return nullptr;
    MPI_Request r;
    return finish(start(type, &r), what, r, nullptr, 0, dtype, total, error);
  }
  /// The request of MPI call `what` (its return code `rc`), which moves
  /// `elements` elements in all.
  std::unique_ptr<Request> finish(int rc, const char *what, MPI_Request r,
                                  void *avgData, size_t count, DType dtype,
                                  size_t elements, std::string *error) const {
    if (rc != MPI_SUCCESS) {
      fail(error, mpiError(what, rc));
      return nullptr;
    }
    return std::make_unique<MpiRequest>(r, std::vector<MpiRequest::Next>{},
                                        avgData, count, dtype, size_,
                                        watchFor(what, elements, dtype));
  }
};

} // namespace

std::unique_ptr<Collectives> startMpi(const MpiOptions &options,
                                      std::string *error) noexcept {
  if (options.allReduce != "auto" && options.allReduce != "flat" &&
      options.allReduce != "hierarchical") {
    if (error)
      *error = "--allreduce expects auto, flat or hierarchical, got '" +
               options.allReduce + "'";
    return nullptr;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS) {
      if (error)
        *error = "MPI_Init failed";
      return nullptr;
    }
  }
  // Errors come back as codes, not as an abort of the whole job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (options.ranksPerNode < 0 ||
      (options.ranksPerNode > 0 && size % options.ranksPerNode != 0)) {
    if (error)
      *error = "--ranks-per-node " + std::to_string(options.ranksPerNode) +
               " does not divide the " + std::to_string(size) + " ranks";
    MPI_Finalize();
    return nullptr;
  }
  // MPI_Comm_split and MPI_Comm_split_type have no nonblocking form (not
  // in MPI 4 either): a rank that never gets here leaves the others
  // waiting in them, without a limit, until the launcher ends the job (it
  // does when a rank exits; a rank that hangs before starting MPI is not
  // caught). Everything after them is polled against the watchdog.
  MPI_Comm node, cross;
  if (options.ranksPerNode > 0)
    MPI_Comm_split(MPI_COMM_WORLD, rank / options.ranksPerNode, rank, &node);
  else
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                        MPI_INFO_NULL, &node);
  int localRank = 0, localSize = 1;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localSize);
  MPI_Comm_split(MPI_COMM_WORLD, localRank, rank, &cross);
  int nodes = 1;
  MPI_Comm_size(cross, &nodes);
  // Every machine must have as many ranks for the cross communicators to
  // pair the shards up: the fewest and the most ranks of a machine, as the
  // maximum of (-ranks, ranks), in one MPI_Iallreduce polled (MPI_Test)
  // against options.timeoutSeconds, like every collective of the run.
  int extremes[2] = {-localSize, localSize};
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX,
                          MPI_COMM_WORLD, &request);
  const auto started = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(options.timeoutSeconds);
  std::chrono::microseconds nap(0);
  for (int done = 0; rc == MPI_SUCCESS && !done;) {
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done)
      break;
    if (options.timeoutSeconds > 0 &&
        std::chrono::steady_clock::now() - started > limit) {
      // The request stays pending and MPI is not finalized (which would
      // wait for the missing rank): the caller ends the job (abortMpi).
      if (error) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", options.timeoutSeconds);
        *error = "starting MPI: the first collective of the " +
                 std::to_string(size) +
                 " ranks (MPI_Iallreduce of the ranks per machine) did not "
                 "complete within " +
                 text + " s (another rank died or hangs; --collective-timeout)";
      }
      return nullptr;
    }
    nap = std::min(std::chrono::microseconds(1000),
                   nap + std::chrono::microseconds(10));
    std::this_thread::sleep_for(nap);
  }
  if (rc != MPI_SUCCESS) {
    if (error)
      *error = "starting MPI: " + mpiError("MPI_Iallreduce", rc);
    return nullptr;
  }
  int minLocal = -extremes[0], maxLocal = extremes[1];
  bool even = minLocal == maxLocal;
  bool hierarchical =
      options.allReduce == "hierarchical" ||
      (options.allReduce == "auto" && even && nodes > 1 && localSize > 1);
  if (hierarchical && !even) {
    if (error)
      *error = "a hierarchical all-reduce needs as many ranks on every "
               "machine";
    MPI_Comm_free(&node);
    MPI_Comm_free(&cross);
    MPI_Finalize();
    return nullptr;
  }
  try {
    return std::make_unique<MpiCollectives>(node, cross, hierarchical,
                                            options.timeoutSeconds);
  } catch (...) {
    if (error)
      *error = "out of memory starting MPI";
    return nullptr;
  }
}

std::string describeWorld(const Collectives &comm) {
  auto *mpi = dynamic_cast<const MpiCollectives *>(&comm);
  std::string s = std::to_string(comm.size()) + " ranks (" + comm.name() + ")";
  if (mpi)
    s += ": " + std::to_string(mpi->machines()) + " machine(s) of " +
         std::to_string(mpi->ranksPerMachine()) + ", " +
         (mpi->isHierarchical() ? "hierarchical" : "flat") + " all-reduce";
  return s;
}

void abortMpi(int code) noexcept {
  // MPI_Abort only between MPI_Init and MPI_Finalize; before (a rank that
  // failed while starting) the launcher ends the job when this process
  // exits non-zero.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
#else
void abortMpi(int code) noexcept { std::_Exit(code); }

std::unique_ptr<Collectives> startMpi(const MpiOptions &,
                                      std::string *error) noexcept {
  if (error)
    *error = "this loom-run was built without MPI (install libopenmpi-dev "
             "and rebuild, see README.md)";
  return nullptr;
}

std::string describeWorld(const Collectives &comm) {
  return std::to_string(comm.size()) + " ranks (" + comm.name() + ")";
}
#endif

} // namespace loomrt
