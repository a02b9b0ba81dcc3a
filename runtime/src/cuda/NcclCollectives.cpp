//===- NcclCollectives.cpp - Collectives over NCCL ------------------------===//
//
// One NCCL communicator, one stream. Each collective is NCCL's (ncclAvg for
// Avg), followed by an event on the stream; a Request polls its event
// (cuEventQuery) and the communicator's asynchronous error against a
// deadline, and on a timeout or an error aborts the communicator
// (ncclCommAbort), after which every call fails with the first reason.
// Operations that only move data (all-gather, broadcast, send/recv,
// all-to-all) move bytes (ncclUint8), so every dtype moves. All-to-all is a
// group of a send and a receive per rank. Send/recv calls accumulate in a
// pending group that is issued, between ncclGroupStart and ncclGroupEnd, by
// the next collective, a barrier, or a wait on one of them: NCCL's send and
// receive block the GPU until the peer's matching call runs, so a ring
// (send to the next rank, receive from the previous) must be one group.
// A barrier is a one-element all-reduce, waited for.
//
// No wait is without the watchdog's limit (NcclOptions::timeoutSeconds):
// the communicator is created nonblocking (ncclCommInitRankConfig with
// blocking = 0, NCCL 2.14 and newer) and its creation polled with
// ncclCommGetAsyncError, so a rank that never joins fails the others; on
// such a communicator any call may return ncclInProgress (NCCL still
// queueing it: connecting to peers, say), which is polled out the same way
// before the event after it is recorded; and the communicator is finished
// by polling the stream (cuStreamQuery) and ncclCommFinalize, aborted when
// either times out. Only an NCCL older than 2.14 still creates with the
// blocking ncclCommInitRank (a note on stderr says so).
//
//===----------------------------------------------------------------------===//

#include "NcclCollectives.h"

#include "CudaApi.h"
#include "NcclApi.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace loomrt {

namespace {

using namespace cuda;
using namespace nccl;

bool fail(std::string *error, const std::string &message) noexcept {
  if (error) {
    try {
      *error = message;
    } catch (...) {
    }
  }
  return false;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

/// Polls ncclCommGetAsyncError(comm) while it says ncclInProgress, for at
/// most `timeoutSeconds` (0: no limit), with naps of up to 1 ms: the state
/// it settled on, ncclInProgress when the time ran out, or the poll's own
/// failure.
ncclResult_t pollWhileInProgress(const NcclApi &nc, ncclComm_t comm,
                                 double timeoutSeconds) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(timeoutSeconds);
  std::chrono::microseconds nap(0);
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = nc.ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess)
      return r;
    if (state != ncclInProgress)
      return state;
    if (timeoutSeconds > 0 && Clock::now() - start > limit)
      return ncclInProgress;
    nap = std::min(std::chrono::microseconds(1000),
                   nap + std::chrono::microseconds(10));
    std::this_thread::sleep_for(nap);
  }
}

/// Send/recv calls not yet issued, and the event that will follow them.
struct Batch {
  struct Transfer {
    bool send;
    void *data;
    size_t bytes;
    int peer;
  };
  std::vector<Transfer> transfers;
  CUevent event = nullptr;
  bool issued = false;
  std::string error; ///< why issuing failed
};

/// The communicator and its stream, shared by the Collectives and its
/// Requests (a Request that outlives the Collectives stays safe).
struct Shared {
  Shared(const DriverApi &cu, const NcclApi &nc) : cu(cu), nc(nc) {}
  ~Shared() {
    if (ctx)
      cu.cuCtxSetCurrent(ctx);
    if (batch)
      flush(nullptr);
    if (comm) {
      // The stream may hold a collective whose peer died or hangs (one
      // whose request was never waited for, or another communicator's on
      // a shared stream): waited for within the watchdog's limit, not with
      // cuStreamSynchronize; past it, the communicator is aborted, which
      // ends its kernels, rather than destroyed.
      bool drained =
          waitForStream(cu, stream, timeoutSeconds) != CUDA_ERROR_NOT_READY;
      // ncclCommDestroy alone waits for the machine's other ranks: on a
      // nonblocking communicator, ncclCommFinalize says ncclInProgress
      // instead, polled within the limit too.
      if (drained && nonblocking && nc.ncclCommFinalize) {
        ncclResult_t r = nc.ncclCommFinalize(comm);
        if (r == ncclInProgress)
          r = pollWhileInProgress(nc, comm, timeoutSeconds);
        drained = r == ncclSuccess;
      }
      if (drained)
        nc.ncclCommDestroy(comm);
      else
        nc.ncclCommAbort(comm);
    }
    if (scratch)
      cu.cuMemFree(scratch);
    if (ownStream && stream)
      cu.cuStreamDestroy(stream);
    if (retained)
      cu.cuDevicePrimaryCtxRelease(device);
  }

  const DriverApi &cu;
  const NcclApi &nc;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  bool retained = false;
  CUstream stream = nullptr;
  bool ownStream = false;
  ncclComm_t comm = nullptr;
  /// Made by ncclCommInitRankConfig with blocking = 0: calls on it may
  /// return ncclInProgress.
  bool nonblocking = false;
  CUdeviceptr scratch = 0; ///< 4 bytes for the barrier's all-reduce
  int rank = 0, size = 1, localRank = 0;
  double timeoutSeconds = 60;
  std::string broken; ///< why the communicator was aborted
  int64_t issuedCount = 0;
  std::shared_ptr<Batch> batch; ///< pending send/recv calls

  bool bind(std::string *error) {
    CUresult r = cu.cuCtxSetCurrent(ctx);
    return r == CUDA_SUCCESS ||
           fail(error, "cuCtxSetCurrent: " + cu.describe(r));
  }
  bool usable(std::string *error) {
    return broken.empty() ||
           fail(error, "the NCCL communicator was aborted: " + broken);
  }
  void abort(const std::string &why) {
    if (broken.empty())
      broken = why;
    if (comm)
      nc.ncclCommAbort(comm);
    comm = nullptr;
  }
  /// "ncclAllReduce of 5 f32 elements (this rank's collective 3)".
  std::string name(const char *what, size_t elements, DType dtype) {
    std::string text = what;
    if (elements)
      text += " of " + std::to_string(elements) + " " +
              std::string(dtypeToShortName(dtype)) + " elements";
    return text + " (this rank's collective " + std::to_string(++issuedCount) +
           ")";
  }
  /// The result of NCCL call `what`, `r`, once NCCL finished queueing it:
  /// on a nonblocking communicator a call may return ncclInProgress, and
  /// nothing (not even an event after it) may be queued before
  /// ncclCommGetAsyncError says otherwise, which is polled within the
  /// watchdog's limit. True on ncclSuccess; otherwise false with `*error`
  /// ("what: ..."), the communicator aborted when it failed or timed out
  /// after saying ncclInProgress (a call that failed outright, its
  /// arguments refused, leaves it as it was).
  bool settled(ncclResult_t r, const std::string &what, std::string *error) {
    if (r == ncclSuccess)
      return true;
    if (r != ncclInProgress)
      return fail(error, what + ": " + nc.describe(r, comm));
    r = pollWhileInProgress(nc, comm, timeoutSeconds);
    if (r == ncclSuccess)
      return true;
    std::string why =
        r == ncclInProgress
            ? what + ": NCCL had not finished queueing it after " +
                  seconds(timeoutSeconds) + " s (another rank died or hangs)"
            : what + " failed: " + nc.describe(r, comm);
    abort(why);
    return fail(error, why);
  }

  /// An event recorded now on the stream, after what was queued.
  CUevent record(const std::string &what, std::string *error) {
    CUevent event = nullptr;
    CUresult r = cu.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
      fail(error, what + ": cuEventCreate: " + cu.describe(r));
      return nullptr;
    }
    r = cu.cuEventRecord(event, stream);
    if (r != CUDA_SUCCESS) {
      cu.cuEventDestroy(event);
      fail(error, what + ": cuEventRecord: " + cu.describe(r));
      return nullptr;
    }
    return event;
  }

  /// Issues the pending send/recv calls as one group.
  bool flush(std::string *error) {
    if (!batch)
      return true;
    std::shared_ptr<Batch> b = std::move(batch);
    batch.reset();
    b->issued = true;
    std::string what = "a group of " + std::to_string(b->transfers.size()) +
                       " send/recv calls";
    if (!usable(&b->error) || !bind(&b->error))
      return fail(error, b->error);
    ncclResult_t r = nc.ncclGroupStart();
    if (r != ncclSuccess) {
      b->error = what + ": ncclGroupStart: " + nc.describe(r, comm);
      return fail(error, b->error);
    }
    for (const Batch::Transfer &t : b->transfers) {
      r = t.send
              ? nc.ncclSend(t.data, t.bytes, ncclUint8, t.peer, comm, stream)
              : nc.ncclRecv(t.data, t.bytes, ncclUint8, t.peer, comm, stream);
      if (r != ncclSuccess && b->error.empty())
        b->error = what + ": " + (t.send ? "ncclSend" : "ncclRecv") + " of " +
                   std::to_string(t.bytes) + " bytes " +
                   (t.send ? "to" : "from") + " rank " +
                   std::to_string(t.peer) + ": " + nc.describe(r, comm);
    }
    r = nc.ncclGroupEnd();
    if (b->error.empty())
      settled(r, what + ": ncclGroupEnd", &b->error);
    if (!b->error.empty()) {
      // The group may be half queued: the communicator cannot be trusted.
      abort(b->error);
      return fail(error, b->error);
    }
    b->event = record(what, &b->error);
    return b->event || fail(error, b->error);
  }

  /// Waits for `event` (see the file comment).
  bool wait(CUevent event, const std::string &what, std::string *error) {
    if (!usable(error) || !bind(error))
      return false;
    using Clock = std::chrono::steady_clock;
    Clock::time_point start = Clock::now();
    auto limit = std::chrono::duration<double>(timeoutSeconds);
    std::chrono::microseconds nap(0);
    for (;;) {
      CUresult r = cu.cuEventQuery(event);
      ncclResult_t async = ncclSuccess;
      if (comm)
        nc.ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        std::string why = what + " failed: " + nc.describe(async, comm);
        abort(why);
        return fail(error, why);
      }
      if (r == CUDA_SUCCESS)
        return true;
      if (r != CUDA_ERROR_NOT_READY)
        return fail(error, what + ": cuEventQuery: " + cu.describe(r));
      if (timeoutSeconds > 0 && Clock::now() - start > limit) {
        std::string why = what + " did not complete within " +
                          seconds(timeoutSeconds) +
                          " s (another rank died or hangs)";
        abort(why);
        return fail(error, why);
      }
      nap = std::min(std::chrono::microseconds(1000),
                     nap + std::chrono::microseconds(10));
      std::this_thread::sleep_for(nap);
    }
  }
};

class NcclRequest final : public Request {
public:
  /// One collective, ended by `event`.
  NcclRequest(std::shared_ptr<Shared> s, CUevent event, std::string what)
      : s(std::move(s)), event(event), what(std::move(what)) {}
  /// One send or receive of a pending group.
  NcclRequest(std::shared_ptr<Shared> s, std::shared_ptr<Batch> batch,
              std::string what)
      : s(std::move(s)), batch(std::move(batch)), what(std::move(what)) {}
  ~NcclRequest() override {
    // Never waited for: complete it anyway, its buffers may go next.
    if (!done)
      wait(nullptr);
    if (event)
      s->cu.cuEventDestroy(event);
    if (batch && batch.use_count() == 1 && batch->event)
      s->cu.cuEventDestroy(batch->event);
  }
  bool wait(std::string *error) noexcept override {
    if (done)
      return ok || fail(error, what + " failed before");
    done = true;
    try {
      if (batch) {
        if (!batch->issued && !s->flush(error))
          return false;
        if (!batch->error.empty())
          return fail(error, batch->error);
        ok = s->wait(batch->event, what, error);
      } else {
        ok = s->wait(event, what, error);
      }
    } catch (...) {
      return fail(error, what + ": out of memory");
    }
    return ok;
  }

  bool test(bool *complete, std::string *error) noexcept override {
    *complete = false;
    if (done)
      return *complete = true, ok || fail(error, what + " failed before");
    try {
      if (batch && !batch->issued && !s->flush(error))
        return false;
      if (batch && !batch->error.empty())
        return fail(error, batch->error);
      if (!s->usable(error) || !s->bind(error))
        return false;
      CUresult r = s->cu.cuEventQuery(batch ? batch->event : event);
      if (r == CUDA_SUCCESS)
        *complete = true; // wait() still checks the asynchronous error
      else if (r != CUDA_ERROR_NOT_READY)
        return fail(error, what + ": cuEventQuery: " + s->cu.describe(r));
      return true;
    } catch (...) {
      return fail(error, what + ": out of memory");
    }
  }

private:
  std::shared_ptr<Shared> s;
  CUevent event = nullptr;
  std::shared_ptr<Batch> batch;
  std::string what;
  bool done = false, ok = false;
};

class NcclCollectives final : public Collectives {
public:
  explicit NcclCollectives(std::shared_ptr<Shared> s) : s(std::move(s)) {}
  ~NcclCollectives() override = default;

  int rank() const noexcept override { return s->rank; }
  int size() const noexcept override { return s->size; }
  int localRank() const noexcept override { return s->localRank; }
  const char *name() const noexcept override { return "nccl"; }

  std::unique_ptr<Request> allReduce(void *data, size_t count, DType dtype,
                                     ReduceOp op,
                                     std::string *error) noexcept override {
    ncclDataType_t type;
    ncclRedOp_t nop;
    if (!reducible(dtype, op, &type, &nop, error))
      return nullptr;
    return issue("ncclAllReduce", count, dtype, error, [&] {
      return s->nc.ncclAllReduce(data, data, count, type, nop, s->comm,
                                 s->stream);
    });
  }
  std::unique_ptr<Request> reduceScatter(const void *send, void *recv,
                                         size_t count, DType dtype, ReduceOp op,
                                         std::string *error) noexcept override {
    ncclDataType_t type;
    ncclRedOp_t nop;
    size_t total;
    if (!reducible(dtype, op, &type, &nop, error) ||
        !bytesOf(count, DType::U8, s->size, &total, error))
      return nullptr;
    return issue("ncclReduceScatter", total, dtype, error, [&] {
      return s->nc.ncclReduceScatter(send, recv, count, type, nop, s->comm,
                                     s->stream);
    });
  }
  std::unique_ptr<Request> allGather(const void *send, void *recv, size_t count,
                                     DType dtype,
                                     std::string *error) noexcept override {
    size_t bytes, total;
    if (!bytesOf(count, dtype, 1, &bytes, error) ||
        !bytesOf(count, DType::U8, s->size, &total, error))
      return nullptr;
    return issue("ncclAllGather", total, dtype, error, [&] {
      return s->nc.ncclAllGather(send, recv, bytes, ncclUint8, s->comm,
                                 s->stream);
    });
  }
  std::unique_ptr<Request> broadcast(void *data, size_t count, DType dtype,
                                     int root,
                                     std::string *error) noexcept override {
    size_t bytes;
    if (!bytesOf(count, dtype, 1, &bytes, error) || !validRank(root, error))
      return nullptr;
    return issue("ncclBroadcast", count, dtype, error, [&] {
      return s->nc.ncclBroadcast(data, data, bytes, ncclUint8, root, s->comm,
                                 s->stream);
    });
  }
  std::unique_ptr<Request> allToAll(const void *send, void *recv, size_t count,
                                    DType dtype,
                                    std::string *error) noexcept override {
    size_t bytes, total;
    if (!bytesOf(count, dtype, 1, &bytes, error) ||
        !bytesOf(count, dtype, s->size, &total, error))
      return nullptr;
    return issue(
        "all-to-all (grouped ncclSend/ncclRecv)", total / dtypeSize(dtype),
        dtype, error, [&] {
          const NcclApi &nc = s->nc;
          ncclResult_t r = nc.ncclGroupStart(), first = ncclSuccess;
          if (r != ncclSuccess)
            return r;
          for (int peer = 0; peer < s->size && first == ncclSuccess; ++peer) {
            const char *out = static_cast<const char *>(send) + bytes * peer;
            char *in = static_cast<char *>(recv) + bytes * peer;
            first =
                nc.ncclSend(out, bytes, ncclUint8, peer, s->comm, s->stream);
            if (first == ncclSuccess)
              first =
                  nc.ncclRecv(in, bytes, ncclUint8, peer, s->comm, s->stream);
          }
          r = nc.ncclGroupEnd();
          return first != ncclSuccess ? first : r;
        });
  }
  std::unique_ptr<Request> send(const void *data, size_t count, DType dtype,
                                int to, int /*tag*/,
                                std::string *error) noexcept override {
    return pointToPoint(true, const_cast<void *>(data), count, dtype, to,
                        error);
  }
  std::unique_ptr<Request> recv(void *data, size_t count, DType dtype, int from,
                                int /*tag*/,
                                std::string *error) noexcept override {
    return pointToPoint(false, data, count, dtype, from, error);
  }
  bool barrier(std::string *error) noexcept override {
    return waitFor(
        issue("barrier (ncclAllReduce of 1 i32)", 0, DType::I32, error,
              [&] {
                void *p = reinterpret_cast<void *>(s->scratch);
                return s->nc.ncclAllReduce(p, p, 1, ncclInt32, ncclSum, s->comm,
                                           s->stream);
              }),
        error);
  }

private:
  std::shared_ptr<Shared> s;

  bool validRank(int r, std::string *error) const {
    return (r >= 0 && r < s->size) ||
           fail(error, "rank " + std::to_string(r) + " is not in [0, " +
                           std::to_string(s->size) + ")");
  }
  /// `count` elements of `dtype`, `times` times, in bytes, unless that
  /// overflows.
  static bool bytesOf(size_t count, DType dtype, int times, size_t *bytes,
                      std::string *error) {
    size_t unit = dtypeSize(dtype);
    if (unit == 0)
      return fail(error, "not an element type");
    if (count > SIZE_MAX / unit / size_t(times))
      return fail(error, "a collective of " + std::to_string(count) +
                             " elements overflows a byte count");
    *bytes = count * unit * size_t(times);
    return true;
  }
  static bool reducible(DType dtype, ReduceOp op, ncclDataType_t *type,
                        ncclRedOp_t *nop, std::string *error) {
    bool isFloat = false;
    switch (dtype) {
    case DType::F32:
      *type = ncclFloat32, isFloat = true;
      break;
    case DType::F64:
      *type = ncclFloat64, isFloat = true;
      break;
    case DType::F16:
      *type = ncclFloat16, isFloat = true;
      break;
    case DType::BF16:
      *type = ncclBfloat16, isFloat = true;
      break;
    case DType::I64:
      *type = ncclInt64;
      break;
    case DType::I32:
      *type = ncclInt32;
      break;
    case DType::I8:
      *type = ncclInt8;
      break;
    case DType::U8:
      *type = ncclUint8;
      break;
    default:
      return fail(error, "cannot reduce " +
                             std::string(dtypeToShortName(dtype)) +
                             " elements on NCCL (f32, f64, f16, bf16, i64, "
                             "i32, i8 and u8 reduce)");
    }
    if (op == ReduceOp::Avg && !isFloat)
      return fail(error, "avg reduces floating-point elements only (f32, "
                         "f64, f16, bf16), not " +
                             std::string(dtypeToShortName(dtype)));
    *nop = op == ReduceOp::Sum   ? ncclSum
           : op == ReduceOp::Max ? ncclMax
                                 : ncclAvg;
    return true;
  }

  /// Issues the pending send/recv group, then `call` (an NCCL call on the
  /// communicator's stream), then an event after it.
  template <typename Call>
  std::unique_ptr<Request> issue(const char *what, size_t elements, DType dtype,
                                 std::string *error, Call call) noexcept {
    try {
      std::string text = s->name(what, elements, dtype);
      if (!s->usable(error) || !s->flush(error) || !s->bind(error))
        return nullptr;
      if (!s->settled(call(), text, error))
        return nullptr;
      CUevent event = s->record(text, error);
      if (!event)
        return nullptr;
      return std::make_unique<NcclRequest>(s, event, std::move(text));
    } catch (...) {
      fail(error, std::string(what) + ": out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<Request> pointToPoint(bool isSend, void *data, size_t count,
                                        DType dtype, int peer,
                                        std::string *error) noexcept {
    try {
      size_t bytes;
      if (!bytesOf(count, dtype, 1, &bytes, error) || !validRank(peer, error) ||
          !s->usable(error))
        return nullptr;
      if (!s->batch)
        s->batch = std::make_shared<Batch>();
      s->batch->transfers.push_back({isSend, data, bytes, peer});
      std::string text =
          s->name(isSend ? "ncclSend" : "ncclRecv", count, dtype) +
          (isSend ? " to rank " : " from rank ") + std::to_string(peer);
      return std::make_unique<NcclRequest>(s, s->batch, std::move(text));
    } catch (...) {
      fail(error, "send/recv: out of memory");
      return nullptr;
    }
  }
};

/// Picks the device, retains its primary context, makes or adopts the
/// stream.
bool openDevice(Shared &s, const NcclOptions &options, std::string *error) {
  const DriverApi &cu = s.cu;
  int count = 0;
  CUresult r = cu.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0)
    return fail(error, "no CUDA device: the driver (" + cu.path + ") reports " +
                           (r == CUDA_SUCCESS ? std::string("0 GPUs")
                                              : cu.describe(r)));
  int ordinal = options.device;
  std::string source = "NcclOptions::device";
  if (ordinal < 0) {
    const char *env = std::getenv("LOOMRT_CUDA_DEVICE");
    if (env && *env) {
      char *end = nullptr;
      long v = std::strtol(env, &end, 10);
      ordinal = *end || v < 0 || v > 1 << 20 ? -1 : int(v);
      source = std::string("LOOMRT_CUDA_DEVICE=") + env;
      if (ordinal < 0)
        return fail(error, source + " is not a device ordinal");
    } else {
      ordinal = s.localRank % count;
      source = "local rank " + std::to_string(s.localRank);
    }
  }
  if (ordinal >= count)
    return fail(error, "CUDA device " + std::to_string(ordinal) + " (" +
                           source + ") does not exist: this machine has " +
                           std::to_string(count) + " CUDA device(s)");
  if ((r = cu.cuDeviceGet(&s.device, ordinal)) != CUDA_SUCCESS)
    return fail(error, "cuDeviceGet: " + cu.describe(r));
  if ((r = cu.cuDevicePrimaryCtxRetain(&s.ctx, s.device)) != CUDA_SUCCESS)
    return fail(error, "cuDevicePrimaryCtxRetain: " + cu.describe(r));
  s.retained = true;
  if (!s.bind(error))
    return false;
  if (options.stream) {
    s.stream = static_cast<CUstream>(options.stream);
  } else {
    if ((r = cu.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING)) !=
        CUDA_SUCCESS)
      return fail(error, "cuStreamCreate: " + cu.describe(r));
    s.ownStream = true;
  }
  if ((r = cu.cuMemAlloc(&s.scratch, 4)) != CUDA_SUCCESS)
    return fail(error,
                "cuMemAlloc of the barrier's 4 bytes: " + cu.describe(r));
  return true;
}

/// Creates `s.comm` with rank 0's `id`: nonblocking (NCCL 2.14 and newer),
/// its creation polled within the watchdog's limit, so that a rank of the
/// communicator that never joins (it died, hangs, or never got this far)
/// fails this one instead of hanging it; with an older NCCL, the blocking
/// ncclCommInitRank, which has no limit.
bool createCommunicator(Shared &s, const ncclUniqueId &id, std::string *error) {
  const NcclApi &nc = s.nc;
  const char *call =
      nc.ncclCommInitRankConfig ? "ncclCommInitRankConfig" : "ncclCommInitRank";
  std::string what = std::string(call) + " (rank " + std::to_string(s.rank) +
                     " of " + std::to_string(s.size) + ", " + nc.path + " " +
                     nc.versionString() + ")";
  ncclResult_t r;
  if (nc.ncclCommInitRankConfig) {
    ncclConfig config = kConfigInitializer;
    config.blocking = 0;
    r = nc.ncclCommInitRankConfig(&s.comm, s.size, id, s.rank, &config);
    s.nonblocking = true;
  } else {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "loomrt: note: NCCL %s (%s) has no ncclCommInitRankConfig "
                   "(NCCL 2.14 and newer): creating a communicator waits for "
                   "its other ranks without a time limit\n",
                   nc.versionString().c_str(), nc.path.c_str());
    r = nc.ncclCommInitRank(&s.comm, s.size, id, s.rank);
  }
  if (r == ncclInProgress && s.comm)
    r = pollWhileInProgress(nc, s.comm, s.timeoutSeconds);
  if (r == ncclSuccess)
    return true;
  std::string why =
      r == ncclInProgress
          ? what + ": the communicator was not created within " +
                seconds(s.timeoutSeconds) +
                " s: one of its ranks did not join (it died, hangs, or "
                "failed before creating it); aborted"
          : what + ": " + nc.describe(r, s.comm);
  // A nonblocking creation that failed or timed out still left a handle
  // (a blocking one that failed did not).
  if (s.comm && s.nonblocking)
    nc.ncclCommAbort(s.comm);
  s.comm = nullptr;
  return fail(error, why);
}

/// A failed start: `message` in `*error`.
std::unique_ptr<Collectives> none(std::string *error,
                                  const std::string &message) {
  fail(error, message);
  return nullptr;
}

std::unique_ptr<Collectives>
start(Collectives &bootstrap, const NcclOptions &options, std::string *error) {
  std::string why;
  const NcclApi *nc = loadNccl(&why);
  const DriverApi *cu = nc ? loadDriver(&why) : nullptr;
  std::shared_ptr<Shared> s;
  if (nc && cu) {
    s = std::make_shared<Shared>(*cu, *nc);
    s->rank = bootstrap.rank();
    s->size = bootstrap.size();
    s->localRank = bootstrap.localRank();
    s->timeoutSeconds = options.timeoutSeconds;
    if (!openDevice(*s, options, &why))
      s.reset();
  }
  // Every rank learns whether every rank got this far, so that none waits
  // for the unique id of a rank 0 that failed (the first failing rank + 1).
  int32_t failed = why.empty() ? 0 : bootstrap.rank() + 1;
  std::string e;
  if (!waitFor(bootstrap.allReduce(&failed, 1, DType::I32, ReduceOp::Max, &e),
               &e))
    return none(error, "starting NCCL: exchanging the ranks' status over " +
                           std::string(bootstrap.name()) + ": " + e);
  if (!why.empty())
    return none(error, why);
  if (failed)
    return none(error, "rank " + std::to_string(failed - 1) +
                           " could not start NCCL (its own message says why)");
  // Rank 0's unique id, and whether it has one, to every rank.
  std::vector<char> message(4 + kUniqueIdBytes, 0);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (s->rank == 0) {
    int32_t status = nc->ncclGetUniqueId(&id);
    std::memcpy(message.data(), &status, 4);
    std::memcpy(message.data() + 4, id.internal, kUniqueIdBytes);
  }
  if (!waitFor(
          bootstrap.broadcast(message.data(), message.size(), DType::U8, 0, &e),
          &e))
    return none(error, "starting NCCL: broadcasting the unique id over " +
                           std::string(bootstrap.name()) + ": " + e);
  int32_t status;
  std::memcpy(&status, message.data(), 4);
  std::memcpy(id.internal, message.data() + 4, kUniqueIdBytes);
  if (status != ncclSuccess)
    return none(error, "ncclGetUniqueId failed on rank 0: " +
                           nc->describe(status, nullptr));
  if (!s->bind(error))
    return nullptr;
  if (!createCommunicator(*s, id, error))
    return nullptr;
  if (options.abort) {
    std::weak_ptr<Shared> weak = s;
    *options.abort = [weak](const std::string &why) {
      if (std::shared_ptr<Shared> alive = weak.lock())
        alive->abort(why);
    };
  }
  return std::make_unique<NcclCollectives>(std::move(s));
}

} // namespace

std::unique_ptr<Collectives> startNccl(Collectives &bootstrap,
                                       const NcclOptions &options,
                                       std::string *error) noexcept {
  try {
    return start(bootstrap, options, error);
  } catch (...) {
    fail(error, "out of memory starting NCCL");
    return nullptr;
  }
}

} // namespace loomrt
