//===- FakeNccl.cpp - A host-memory stand-in for libnccl.so.2, over MPI ---===//
//
// Lets NcclCollectives run end to end without a GPU: loaded through
// LOOMRT_NCCL_LIBRARY next to the fake CUDA driver (tests/fakecuda, which
// LOOMRT_CUDA_DRIVER names: its "device" pointers are host memory), it
// implements the NCCL entry points that src/cuda/NcclApi.h declares with MPI.
// A communicator is the world ranks that passed the same unique id, split
// from MPI_COMM_WORLD: so ncclCommInitRank is a collective over the whole
// world here (every world rank calls it at the same point, as the runtime's
// MeshComms/DeviceComms do, one axis after another), where NCCL's is one
// over the communicator's ranks alone. It refuses an id that
// ncclGetUniqueId did not make, ranks that passed the same id but
// different nranks, as many ranks as nranks says but not with that id
// (different ids: ncclInvalidUsage), and rank numbers other than the
// ranks' order in the world (which is how the runtime numbers an axis).
// ncclCommInitRankConfig with blocking = 0 (NCCL 2.14's nonblocking
// communicators) returns ncclInProgress and finishes the creation as
// ncclCommGetAsyncError is polled, so a rank that never creates its
// communicator leaves the others in progress, not blocked; every later call
// on such a communicator returns ncclInProgress too, its work reaching the
// stream only when ncclCommGetAsyncError is polled (twice), and a call made
// before the last one settled is refused (ncclInvalidUsage), as NCCL
// requires. Built with FAKENCCL_LEGACY it is NCCL 2.12, without
// ncclCommInitRankConfig and ncclCommFinalize.
// Each collective is logged (fakenccl_calls: its buffers as offsets into
// their device allocations, count, type, reduction, stream, communicator),
// checks its buffers against the fake driver's live allocations and is
// queued on the fake stream (fakecuda_enqueue), so it runs when the
// stream does, in order with the copies around it: MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, and send/recv (a
// group's all at once: each send is its size then its data, and each
// receive reads the size first, so that a receive of another size than the
// send is caught). The MPI calls are nonblocking, tested at each query of
// the stream, which says "not ready" while a peer has not come: a
// collective whose peer died or hangs leaves its stream busy, as on a GPU,
// rather than the process blocked. f16 and bf16 reduce in float through MPI
// user operations; avg is MPI_SUM divided by the world size. An error while
// the work runs (MPI's, or a size mismatch) becomes the communicator's
// asynchronous error, as NCCL reports errors found on the GPU.
//
//===----------------------------------------------------------------------===//

#include "FakeNccl.h"
#include "../../src/Half.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <functional>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using ncclResult_t = int;
constexpr ncclResult_t kSuccess = 0, kUnhandledCudaError = 1, kSystemError = 2,
                       kInvalidArgument = 4, kInvalidUsage = 5, kInProgress = 7;
/// The fake driver's CUDA_ERROR_NOT_READY: a stream op not finished yet.
constexpr int kNotReady = 600;
constexpr int kNumTypes = 10, kNumOps = 5;
constexpr int kF16 = 6, kBf16 = 9, kAvg = 4;
constexpr size_t kElementSize[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
constexpr char kMagic[8] = {'F', 'A', 'K', 'E', 'N', 'C', 'C', 'L'};

struct UniqueId {
  char internal[128];
};

struct Comm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int id = 0; ///< this process's communicators, numbered from 1
  bool destroyed = false;
  ncclResult_t asyncError = kSuccess;
  /// ncclCommInitRankConfig with blocking 0: calls say ncclInProgress.
  bool blocking = true;
  /// A nonblocking creation waiting for every world rank's (id hash,
  /// nranks, rank): `mine` sent, `all` received by `initRequest`.
  bool initializing = false;
  MPI_Request initRequest = MPI_REQUEST_NULL;
  uint64_t mine[3] = {0, 0, 0};
  std::vector<uint64_t> all;
  /// A nonblocking call's work, queued on its stream by the second
  /// ncclCommGetAsyncError after the call (until then: ncclInProgress).
  std::function<ncclResult_t()> pending;
  int pendingPolls = 0;
};

thread_local std::string lastError;
/// Why the running work item failed, beyond its MPI code (a size mismatch).
std::string workDetail;

ncclResult_t fail(ncclResult_t code, const std::string &message) {
  lastError = "fake NCCL: " + message;
  return code;
}

/// The fake driver's hooks, from the library LOOMRT_CUDA_DRIVER names.
struct Hooks {
  int (*enqueue)(void *, int (*)(void *), void *, void (*)(void *)) = nullptr;
  int (*deviceRange)(const void *, size_t) = nullptr;
  int64_t (*deviceOffset)(const void *, uint64_t *) = nullptr;
};

const Hooks *hooks() {
  static Hooks h;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const char *path = std::getenv("LOOMRT_CUDA_DRIVER");
    void *lib = path ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (lib) {
      h.enqueue = reinterpret_cast<decltype(h.enqueue)>(
          ::dlsym(lib, "fakecuda_enqueue"));
      h.deviceRange = reinterpret_cast<decltype(h.deviceRange)>(
          ::dlsym(lib, "fakecuda_device_range"));
      h.deviceOffset = reinterpret_cast<decltype(h.deviceOffset)>(
          ::dlsym(lib, "fakecuda_device_offset"));
    }
  }
  return h.enqueue && h.deviceRange ? &h : nullptr;
}

std::string mpiText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

// --- 16-bit floats in MPI ----------------------------------------------------

MPI_Datatype f16Type = MPI_DATATYPE_NULL, bf16Type = MPI_DATATYPE_NULL;
MPI_Op ops16[kNumOps - 1] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                             MPI_OP_NULL};

template <int Op>
void reduce16(void *in, void *inout, int *len, MPI_Datatype *type) {
  bool bf = *type == bf16Type;
  auto *a = static_cast<uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = bf ? loomrt::bf16ToFloat(a[i]) : loomrt::halfToFloat(a[i]);
    float y = bf ? loomrt::bf16ToFloat(b[i]) : loomrt::halfToFloat(b[i]);
    float r = Op == 0   ? x + y
              : Op == 1 ? x * y
              : Op == 2 ? (x > y ? x : y)
                        : (x < y ? x : y);
    b[i] = bf ? loomrt::floatToBf16(r) : loomrt::floatToHalf(r);
  }
}

void make16BitTypes() {
  if (f16Type != MPI_DATATYPE_NULL)
    return;
  MPI_Type_contiguous(2, MPI_BYTE, &f16Type);
  MPI_Type_commit(&f16Type);
  MPI_Type_contiguous(2, MPI_BYTE, &bf16Type);
  MPI_Type_commit(&bf16Type);
  MPI_Op_create(reduce16<0>, 1, &ops16[0]);
  MPI_Op_create(reduce16<1>, 1, &ops16[1]);
  MPI_Op_create(reduce16<2>, 1, &ops16[2]);
  MPI_Op_create(reduce16<3>, 1, &ops16[3]);
}

MPI_Datatype mpiType(int type) {
  switch (type) {
  case 0:
    return MPI_INT8_T;
  case 1:
    return MPI_UINT8_T;
  case 2:
    return MPI_INT32_T;
  case 3:
    return MPI_UINT32_T;
  case 4:
    return MPI_INT64_T;
  case 5:
    return MPI_UINT64_T;
  case kF16:
    return f16Type;
  case 7:
    return MPI_FLOAT;
  case 8:
    return MPI_DOUBLE;
  default:
    return bf16Type;
  }
}

MPI_Op mpiOp(int op, int type) {
  int base = op == kAvg ? 0 : op; // avg: a sum, divided afterwards
  if (type == kF16 || type == kBf16)
    return ops16[base];
  static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  return ops[base];
}

template <typename T> void divideAll(void *data, size_t count, int n) {
  for (size_t i = 0; i < count; ++i)
    static_cast<T *>(data)[i] = T(static_cast<T *>(data)[i] / T(n));
}

void divide(void *data, size_t count, int type, int n) {
  switch (type) {
  case 0:
    return divideAll<int8_t>(data, count, n);
  case 1:
    return divideAll<uint8_t>(data, count, n);
  case 2:
    return divideAll<int32_t>(data, count, n);
  case 3:
    return divideAll<uint32_t>(data, count, n);
  case 4:
    return divideAll<int64_t>(data, count, n);
  case 5:
    return divideAll<uint64_t>(data, count, n);
  case 7:
    return divideAll<float>(data, count, n);
  case 8:
    return divideAll<double>(data, count, n);
  }
  auto *h = static_cast<uint16_t *>(data);
  for (size_t i = 0; i < count; ++i)
    h[i] = type == kBf16
               ? loomrt::floatToBf16(loomrt::bf16ToFloat(h[i]) / float(n))
               : loomrt::floatToHalf(loomrt::halfToFloat(h[i]) / float(n));
}

// --- checks and queueing
// -------------------------------------------------------

ncclResult_t checkComm(Comm *comm) {
  if (!comm || comm->destroyed)
    return fail(kInvalidArgument, "invalid communicator");
  if (!hooks())
    return fail(kSystemError, "needs the fake CUDA driver "
                              "(LOOMRT_CUDA_DRIVER=.../libfakecuda.so)");
  // NCCL: on a nonblocking communicator, nothing may be called until the
  // last call's ncclInProgress has turned into ncclSuccess.
  if (comm->initializing || comm->pending)
    return fail(kInvalidUsage,
                "the communicator's last call is still in progress (poll "
                "ncclCommGetAsyncError until it is no longer ncclInProgress)");
  if (comm->mpi == MPI_COMM_NULL)
    return fail(kInvalidUsage, "the communicator was never created (its "
                               "nonblocking creation failed)");
  return kSuccess;
}

ncclResult_t checkCount(size_t count, int type, size_t times) {
  if (type < 0 || type >= kNumTypes)
    return fail(kInvalidArgument, "invalid datatype " + std::to_string(type));
  if (count > size_t(INT_MAX) / times)
    return fail(kInvalidArgument,
                "count " + std::to_string(count) + " is past what MPI counts");
  return kSuccess;
}

ncclResult_t checkBuffer(const void *p, size_t bytes, const char *which) {
  if (bytes == 0)
    return kSuccess;
  if (!p || !hooks()->deviceRange(p, bytes))
    return fail(kInvalidArgument, std::string(which) + " " +
                                      std::to_string(bytes) +
                                      " bytes at a pointer that is not "
                                      "device memory");
  return kSuccess;
}

std::vector<FakeNcclCall> callLog;

/// Logs an NCCL call that passed its checks (what fakenccl_calls returns).
void logCall(const char *op, const void *send, const void *recv, size_t count,
             int type, int redOp, int root, void *stream, const Comm *comm) {
  FakeNcclCall c{};
  std::snprintf(c.op, sizeof c.op, "%s", op);
  c.sendOffset = c.recvOffset = -1;
  if (hooks()->deviceOffset) {
    if (send)
      c.sendOffset = hooks()->deviceOffset(send, &c.sendAllocation);
    if (recv)
      c.recvOffset = hooks()->deviceOffset(recv, &c.recvAllocation);
  }
  c.count = count;
  c.type = type;
  c.redOp = redOp;
  c.root = root;
  c.stream = stream;
  c.commRank = comm->rank;
  c.commSize = comm->size;
  c.commId = comm->id;
  callLog.push_back(c);
}

/// One NCCL operation as the stream runs it: nonblocking MPI calls in
/// phases (each phase's requests posted when the phase before completed),
/// polled by the fake driver's queries, so that a peer that never comes
/// leaves the stream "not ready" rather than blocks the process.
struct Work {
  Comm *comm = nullptr;
  std::string what;
  int phases = 1;
  /// Posts phase `phase`'s requests into `requests`: an MPI code.
  std::function<int(Work &, int phase)> post;
  /// After the last phase (an average's division, a size check): an MPI
  /// code.
  std::function<int()> finish;
  int phase = -1; ///< -1: not started (again, for a graph's replay)
  std::vector<MPI_Request> requests;
};

/// The fake driver's op for a Work: 0 when done (an MPI error becomes the
/// communicator's asynchronous error, as NCCL reports errors found on the
/// GPU), kNotReady while its requests wait for the peers.
int runWork(void *arg) {
  Work *w = static_cast<Work *>(arg);
  if (w->comm->destroyed) {
    // Aborted: whatever was posted is abandoned (MPI cannot cancel a
    // collective), as NCCL's kernels stop.
    w->phase = -1;
    w->requests.clear();
    return 0;
  }
  int rc = MPI_SUCCESS;
  if (w->phase < 0) {
    w->phase = 0;
    rc = w->post(*w, 0);
  }
  while (rc == MPI_SUCCESS) {
    int done = 1;
    if (!w->requests.empty())
      rc = MPI_Testall(int(w->requests.size()), w->requests.data(), &done,
                       MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      break;
    if (!done)
      return kNotReady;
    w->requests.clear();
    if (++w->phase < w->phases) {
      rc = w->post(*w, w->phase);
      continue;
    }
    workDetail.clear();
    rc = w->finish ? w->finish() : MPI_SUCCESS;
    break;
  }
  w->phase = -1;
  w->requests.clear();
  if (rc != MPI_SUCCESS && w->comm->asyncError == kSuccess) {
    w->comm->asyncError = kSystemError;
    lastError = "fake NCCL: " + w->what + ": " + mpiText(rc) +
                (workDetail.empty() ? "" : ": " + workDetail);
  }
  return 0;
}

void releaseWork(void *arg) { delete static_cast<Work *>(arg); }

ncclResult_t enqueueNow(void *stream, Work *w) {
  if (hooks()->enqueue(stream, runWork, w, releaseWork) != 0)
    return fail(kUnhandledCudaError, "fakecuda_enqueue failed");
  return kSuccess;
}

/// Queues `w` on `stream`. On a nonblocking communicator the call says
/// ncclInProgress and the work reaches the stream only when
/// ncclCommGetAsyncError is polled (the second poll: a caller that records
/// an event or issues the next call without polling is caught), as NCCL
/// may finish queueing a nonblocking call in the background.
ncclResult_t submit(Comm *comm, void *stream, Work *w) {
  if (comm->blocking)
    return enqueueNow(stream, w);
  comm->pending = [stream, w] { return enqueueNow(stream, w); };
  comm->pendingPolls = 0;
  return kInProgress;
}

Work *makeWork(Comm *comm, std::string what) {
  auto *w = new Work();
  w->comm = comm;
  w->what = std::move(what);
  return w;
}

struct Transfer {
  bool send;
  void *data;
  size_t count;
  int type, peer;
  Comm *comm;
};
int groupDepth = 0;
int64_t groupsQueued = 0;
std::vector<Transfer> grouped;
void *groupStream = nullptr;

/// A send is a header (its byte count, tag 1) and the data (tag 0); a
/// receive reads the header first (phase 0), then the data (phase 1), so
/// that a send and a receive of different sizes are reported (NCCL
/// requires equal counts) and the data is still drained. The data sends
/// are posted in phase 0 and waited for in phase 1, with the receives.
Work *transferWork(std::vector<Transfer> transfers, std::string what) {
  struct State {
    std::vector<Transfer> transfers;
    std::vector<uint64_t> sizes; ///< sent, or received headers
    std::vector<std::vector<char>> drains;
    std::vector<MPI_Request> dataSends;
    std::string mismatch;
  };
  auto st = std::make_shared<State>();
  st->transfers = std::move(transfers);
  Work *w = makeWork(st->transfers.front().comm, std::move(what));
  w->phases = 2;
  w->post = [st](Work &self, int phase) {
    MPI_Comm comm = st->transfers.front().comm->mpi;
    const std::vector<Transfer> &ts = st->transfers;
    if (phase == 0) {
      st->sizes.assign(ts.size(), 0);
      st->drains.clear();
      st->dataSends.clear();
      st->mismatch.clear();
      for (size_t i = 0; i < ts.size(); ++i) {
        const Transfer &t = ts[i];
        MPI_Request header, data;
        int rc;
        if (t.send) {
          st->sizes[i] = t.count * kElementSize[t.type];
          rc = MPI_Isend(&st->sizes[i], 1, MPI_UINT64_T, t.peer, 1, comm,
                         &header);
          if (rc == MPI_SUCCESS)
            rc = MPI_Isend(t.data, int(st->sizes[i]), MPI_BYTE, t.peer, 0, comm,
                           &data);
          if (rc == MPI_SUCCESS)
            st->dataSends.push_back(data);
        } else {
          rc = MPI_Irecv(&st->sizes[i], 1, MPI_UINT64_T, t.peer, 1, comm,
                         &header);
        }
        if (rc != MPI_SUCCESS)
          return rc;
        self.requests.push_back(header);
      }
      return int(MPI_SUCCESS);
    }
    for (size_t i = 0; i < ts.size(); ++i) {
      const Transfer &t = ts[i];
      if (t.send)
        continue;
      uint64_t sent = st->sizes[i], wanted = t.count * kElementSize[t.type];
      void *into = t.data;
      if (sent != wanted) {
        if (st->mismatch.empty())
          st->mismatch = "ncclRecv of " + std::to_string(wanted) +
                         " bytes from rank " + std::to_string(t.peer) +
                         ", which sent " + std::to_string(sent);
        st->drains.emplace_back(sent);
        into = st->drains.back().data();
      }
      MPI_Request data;
      int rc = MPI_Irecv(into, int(sent), MPI_BYTE, t.peer, 0, comm, &data);
      if (rc != MPI_SUCCESS)
        return rc;
      self.requests.push_back(data);
    }
    self.requests.insert(self.requests.end(), st->dataSends.begin(),
                         st->dataSends.end());
    st->dataSends.clear();
    return int(MPI_SUCCESS);
  };
  w->finish = [st] {
    if (st->mismatch.empty())
      return int(MPI_SUCCESS);
    workDetail = st->mismatch;
    return int(MPI_ERR_TRUNCATE);
  };
  return w;
}

ncclResult_t pointToPoint(bool send, void *data, size_t count, int type,
                          int peer, Comm *comm, void *stream) {
  ncclResult_t r = checkComm(comm);
  if (r == kSuccess)
    r = checkCount(count, type, 1);
  if (r != kSuccess)
    return r;
  if (peer < 0 || peer >= comm->size)
    return fail(kInvalidArgument, "peer " + std::to_string(peer) +
                                      " is not a rank of the " +
                                      std::to_string(comm->size));
  if ((r = checkBuffer(data, count * kElementSize[type],
                       send ? "ncclSend:" : "ncclRecv:")) != kSuccess)
    return r;
  logCall(send ? "ncclSend" : "ncclRecv", send ? data : nullptr,
          send ? nullptr : data, count, type, -1, peer, stream, comm);
  Transfer t{send, data, count, type, peer, comm};
  if (groupDepth > 0) {
    if (grouped.empty())
      groupStream = stream;
    grouped.push_back(t);
    return kSuccess;
  }
  return submit(comm, stream,
                transferWork({t}, send ? "MPI_Send" : "MPI_Recv"));
}

// --- communicators
// ----------------------------------------------------------------

int communicators = 0; ///< this process's, numbered from 1

/// What ncclCommInitRank checks before it talks to the other ranks.
ncclResult_t checkInit(Comm **out, int nranks, const UniqueId &id, int rank) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return fail(kSystemError, "MPI is not initialized (the fake runs under "
                              "mpirun, after MPI_Init)");
  if (!out)
    return fail(kInvalidArgument, "null communicator pointer");
  if (!hooks())
    return fail(kSystemError, "needs the fake CUDA driver "
                              "(LOOMRT_CUDA_DRIVER=.../libfakecuda.so)");
  int worldSize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(kInvalidArgument, "rank " + std::to_string(rank) +
                                      " is not in [0, " +
                                      std::to_string(nranks) + ")");
  if (nranks > worldSize)
    return fail(kInvalidArgument, "nranks " + std::to_string(nranks) +
                                      " is more than MPI_COMM_WORLD's " +
                                      std::to_string(worldSize));
  if (std::memcmp(id.internal, kMagic, sizeof kMagic) != 0)
    return fail(kInvalidArgument,
                "the unique id was not made by ncclGetUniqueId");
  return kSuccess;
}

uint64_t hashOf(const UniqueId &id) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : id.internal)
    hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  return hash;
}

/// The second half of creating `comm`: every world rank's (id hash, nranks,
/// rank) in `all`; the ranks of one id form the communicator, in world
/// order. Splits MPI_COMM_WORLD even when refused, so that no rank waits
/// for the others.
ncclResult_t finishInit(Comm *comm, const std::vector<uint64_t> &all) {
  int worldRank = 0, worldSize = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  const uint64_t hash = comm->mine[0];
  const int nranks = int(comm->mine[1]), rank = int(comm->mine[2]);
  int members = 0, position = 0, leader = -1;
  bool sameNranks = true, wholeWorld = true;
  for (int q = 0; q < worldSize; ++q) {
    if (all[3 * q] != hash) {
      wholeWorld = false;
      continue;
    }
    if (leader < 0)
      leader = q;
    if (q < worldRank)
      ++position;
    ++members;
    sameNranks &= all[3 * q + 1] == uint64_t(nranks);
  }
  ncclResult_t refused = kSuccess;
  std::string why;
  if (!sameNranks) {
    refused = kInvalidArgument;
    why = "the ranks that passed this unique id passed different nranks";
  } else if (members != nranks) {
    // All passed the same id but nranks says otherwise: a wrong nranks;
    // otherwise ranks meant to share a communicator hold different ids.
    refused = wholeWorld ? kInvalidArgument : kInvalidUsage;
    why = wholeWorld
              ? "nranks " + std::to_string(nranks) + ", but " +
                    std::to_string(members) + " ranks passed this unique id"
              : "the ranks passed different unique ids (" +
                    std::to_string(members) + " passed this one, " +
                    "for nranks " + std::to_string(nranks) + ")";
  } else if (position != rank) {
    refused = kInvalidArgument;
    why = "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
          " does not match this process's place among the ranks of the id "
          "(" +
          std::to_string(position) +
          ": the fake numbers a communicator in world order)";
  }
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, refused == kSuccess ? leader : MPI_UNDEFINED,
                 rank, &split);
  if (refused != kSuccess)
    return fail(refused, why);
  make16BitTypes();
  comm->mpi = split;
  MPI_Comm_set_errhandler(comm->mpi, MPI_ERRORS_RETURN);
  comm->rank = rank;
  comm->size = nranks;
  comm->id = ++communicators;
  return kSuccess;
}

/// A nonblocking creation's progress: once every world rank's contribution
/// arrived, the rest of it (finishInit's split: every rank is then in its
/// creation, so none waits long).
void progressInit(Comm *comm) {
  int done = 0;
  int rc = MPI_Test(&comm->initRequest, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    comm->initializing = false;
    comm->asyncError = fail(kSystemError, "MPI_Iallgather: " + mpiText(rc));
    return;
  }
  if (!done)
    return;
  comm->initializing = false;
  comm->asyncError = finishInit(comm, comm->all);
}

/// The state ncclCommGetAsyncError reports, after a poll's progress.
ncclResult_t stateOf(Comm *comm) {
  if (comm->destroyed)
    return comm->asyncError;
  if (comm->initializing) {
    progressInit(comm);
    if (comm->initializing)
      return kInProgress;
  }
  if (comm->pending) {
    if (++comm->pendingPolls < 2)
      return kInProgress;
    ncclResult_t r = comm->pending();
    comm->pending = nullptr;
    if (r != kSuccess && comm->asyncError == kSuccess)
      comm->asyncError = r;
  }
  return comm->asyncError;
}

} // namespace

// --- the NCCL API
// ----------------------------------------------------------------

EXPORT ncclResult_t ncclGetVersion(int *version) {
#if FAKENCCL_LEGACY
  *version = 21200; // 2.12.0: no ncclCommInitRankConfig
#else
  *version = 22800; // 2.28.0
#endif
  return kSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case kSuccess:
    return "no error";
  case kUnhandledCudaError:
    return "unhandled cuda error";
  case kSystemError:
    return "unhandled system error";
  case kInvalidArgument:
    return "invalid argument";
  case kInvalidUsage:
    return "invalid usage";
  case kInProgress:
    return "NCCL operation in progress";
  }
  return "unknown result code";
}

EXPORT const char *ncclGetLastError(void *) { return lastError.c_str(); }

EXPORT ncclResult_t ncclGetUniqueId(UniqueId *id) {
  if (!id)
    return fail(kInvalidArgument, "null unique id");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  // Different on every call, so that ranks that make their own ids (instead
  // of receiving rank 0's) are caught.
  uint64_t seed = uint64_t(::getpid()) * 0x9E3779B97F4A7C15ull ^
                  uint64_t(std::time(nullptr)) ^
                  uint64_t(reinterpret_cast<uintptr_t>(id));
  static uint64_t calls = 0;
  seed += ++calls * 0xBF58476D1CE4E5B9ull;
  std::memcpy(id->internal + 8, &seed, sizeof seed);
  return kSuccess;
}

/// Blocking: every world rank's (id hash, nranks, rank) by MPI_Allgather,
/// then finishInit.
EXPORT ncclResult_t ncclCommInitRank(Comm **out, int nranks, UniqueId id,
                                     int rank) {
  ncclResult_t r = checkInit(out, nranks, id, rank);
  if (r != kSuccess)
    return r;
  int worldSize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  auto comm = std::make_unique<Comm>();
  comm->mine[0] = hashOf(id);
  comm->mine[1] = uint64_t(nranks);
  comm->mine[2] = uint64_t(rank);
  std::vector<uint64_t> all(3 * size_t(worldSize));
  MPI_Allgather(comm->mine, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T,
                MPI_COMM_WORLD);
  if ((r = finishInit(comm.get(), all)) != kSuccess)
    return r;
  *out = comm.release();
  return kSuccess;
}

#if !FAKENCCL_LEGACY
/// NCCL 2.14's config: what the fake reads of ncclConfig_t.
struct Config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};

/// With `blocking` 0: returns ncclInProgress at once, the communicator's
/// contribution posted (MPI_Iallgather over the world); each
/// ncclCommGetAsyncError then tests it and, once every world rank's came,
/// finishes the creation (ncclSuccess, or the refusal). A rank that never
/// creates its communicator leaves the others' in progress for ever, which
/// is what the runtime's timeout is for. Otherwise ncclCommInitRank.
EXPORT ncclResult_t ncclCommInitRankConfig(Comm **out, int nranks, UniqueId id,
                                           int rank, Config *config) {
  int blocking = 1;
  if (config) {
    if (config->magic != 0xcafebeef)
      return fail(kInvalidArgument, "ncclConfig_t argument not initialized "
                                    "via NCCL_CONFIG_INITIALIZER");
    if (config->size >= offsetof(Config, blocking) + sizeof(int) &&
        config->version >= 21400 && config->blocking != INT_MIN)
      blocking = config->blocking;
  }
  if (blocking)
    return ncclCommInitRank(out, nranks, id, rank);
  ncclResult_t r = checkInit(out, nranks, id, rank);
  if (r != kSuccess)
    return r;
  int worldSize = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  auto *comm = new Comm();
  comm->blocking = false;
  comm->initializing = true;
  comm->mine[0] = hashOf(id);
  comm->mine[1] = uint64_t(nranks);
  comm->mine[2] = uint64_t(rank);
  comm->all.resize(3 * size_t(worldSize));
  int rc = MPI_Iallgather(comm->mine, 3, MPI_UINT64_T, comm->all.data(), 3,
                          MPI_UINT64_T, MPI_COMM_WORLD, &comm->initRequest);
  if (rc != MPI_SUCCESS) {
    delete comm;
    return fail(kSystemError, "MPI_Iallgather: " + mpiText(rc));
  }
  *out = comm;
  return kInProgress;
}
#endif

// The Comm itself is never freed: work still queued on a stream may name it
// (it then does nothing). A creation still in progress is abandoned (its
// MPI_Iallgather cannot be cancelled).
EXPORT ncclResult_t ncclCommDestroy(Comm *comm) {
  if (!comm || comm->destroyed)
    return fail(kInvalidArgument, "invalid communicator");
  comm->destroyed = true;
  comm->initializing = false;
  comm->pending = nullptr;
  if (comm->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&comm->mpi);
  return kSuccess;
}
EXPORT ncclResult_t ncclCommAbort(Comm *comm) { return ncclCommDestroy(comm); }

#if !FAKENCCL_LEGACY
/// Nothing to flush here (work runs on the streams); on a nonblocking
/// communicator, ncclInProgress until ncclCommGetAsyncError is polled, as
/// NCCL's waits for the other ranks in the background.
EXPORT ncclResult_t ncclCommFinalize(Comm *comm) {
  ncclResult_t r = checkComm(comm);
  if (r != kSuccess)
    return r;
  if (comm->blocking)
    return kSuccess;
  comm->pending = [] { return kSuccess; };
  comm->pendingPolls = 0;
  return kInProgress;
}
#endif

EXPORT ncclResult_t ncclCommGetAsyncError(Comm *comm, ncclResult_t *error) {
  if (!comm || !error)
    return fail(kInvalidArgument, "invalid communicator");
  *error = stateOf(comm);
  return kSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                  int type, int op, Comm *comm, void *stream) {
  ncclResult_t r = checkComm(comm);
  if (r == kSuccess)
    r = checkCount(count, type, 1);
  if (r != kSuccess)
    return r;
  if (op < 0 || op >= kNumOps)
    return fail(kInvalidArgument, "invalid reduction " + std::to_string(op));
  size_t bytes = count * kElementSize[type];
  if ((r = checkBuffer(send, bytes, "ncclAllReduce: send")) != kSuccess ||
      (r = checkBuffer(recv, bytes, "ncclAllReduce: recv")) != kSuccess)
    return r;
  logCall("ncclAllReduce", send, recv, count, type, op, -1, stream, comm);
  Work *w = makeWork(comm, "MPI_Allreduce");
  w->post = [=](Work &self, int) {
    self.requests.resize(1);
    return MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, int(count),
                          mpiType(type), mpiOp(op, type), comm->mpi,
                          &self.requests[0]);
  };
  w->finish = [=] {
    if (op == kAvg)
      divide(recv, count, type, comm->size);
    return int(MPI_SUCCESS);
  };
  return submit(comm, stream, w);
}

EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv,
                                      size_t count, int type, int op,
                                      Comm *comm, void *stream) {
  ncclResult_t r = checkComm(comm);
  if (r == kSuccess)
    r = checkCount(count, type, size_t(comm->size));
  if (r != kSuccess)
    return r;
  if (op < 0 || op >= kNumOps)
    return fail(kInvalidArgument, "invalid reduction " + std::to_string(op));
  size_t bytes = count * kElementSize[type];
  if ((r = checkBuffer(send, bytes * comm->size, "ncclReduceScatter: send")) !=
          kSuccess ||
      (r = checkBuffer(recv, bytes, "ncclReduceScatter: recv")) != kSuccess)
    return r;
  logCall("ncclReduceScatter", send, recv, count, type, op, -1, stream, comm);
  Work *w = makeWork(comm, "MPI_Reduce_scatter_block");
  auto copy = std::make_shared<std::vector<char>>();
  w->post = [=](Work &self, int) {
    // A copy of the input, taken when the stream gets here: NCCL allows
    // recv inside send, MPI does not.
    const char *in = static_cast<const char *>(send);
    copy->assign(in, in + bytes * comm->size);
    self.requests.resize(1);
    return MPI_Ireduce_scatter_block(copy->data(), recv, int(count),
                                     mpiType(type), mpiOp(op, type), comm->mpi,
                                     &self.requests[0]);
  };
  w->finish = [=] {
    if (op == kAvg)
      divide(recv, count, type, comm->size);
    return int(MPI_SUCCESS);
  };
  return submit(comm, stream, w);
}

EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                                  int type, Comm *comm, void *stream) {
  ncclResult_t r = checkComm(comm);
  if (r == kSuccess)
    r = checkCount(count, type, size_t(comm->size));
  if (r != kSuccess)
    return r;
  size_t bytes = count * kElementSize[type];
  if ((r = checkBuffer(send, bytes, "ncclAllGather: send")) != kSuccess ||
      (r = checkBuffer(recv, bytes * comm->size, "ncclAllGather: recv")) !=
          kSuccess)
    return r;
  logCall("ncclAllGather", send, recv, count, type, -1, -1, stream, comm);
  Work *w = makeWork(comm, "MPI_Allgather");
  auto copy = std::make_shared<std::vector<char>>();
  w->post = [=](Work &self, int) {
    const char *in = static_cast<const char *>(send);
    copy->assign(in, in + bytes);
    self.requests.resize(1);
    return MPI_Iallgather(copy->data(), int(count), mpiType(type), recv,
                          int(count), mpiType(type), comm->mpi,
                          &self.requests[0]);
  };
  return submit(comm, stream, w);
}

EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                                  int type, int root, Comm *comm,
                                  void *stream) {
  ncclResult_t r = checkComm(comm);
  if (r == kSuccess)
    r = checkCount(count, type, 1);
  if (r != kSuccess)
    return r;
  if (root < 0 || root >= comm->size)
    return fail(kInvalidArgument, "root " + std::to_string(root) +
                                      " is not a rank of the " +
                                      std::to_string(comm->size));
  size_t bytes = count * kElementSize[type];
  if ((comm->rank == root &&
       (r = checkBuffer(send, bytes, "ncclBroadcast: send")) != kSuccess) ||
      (r = checkBuffer(recv, bytes, "ncclBroadcast: recv")) != kSuccess)
    return r;
  logCall("ncclBroadcast", send, recv, count, type, -1, root, stream, comm);
  Work *w = makeWork(comm, "MPI_Bcast");
  w->post = [=](Work &self, int) {
    if (comm->rank == root && send != recv)
      std::memmove(recv, send, bytes);
    self.requests.resize(1);
    return MPI_Ibcast(recv, int(count), mpiType(type), root, comm->mpi,
                      &self.requests[0]);
  };
  return submit(comm, stream, w);
}

EXPORT ncclResult_t ncclSend(const void *data, size_t count, int type, int peer,
                             Comm *comm, void *stream) {
  return pointToPoint(true, const_cast<void *>(data), count, type, peer, comm,
                      stream);
}
EXPORT ncclResult_t ncclRecv(void *data, size_t count, int type, int peer,
                             Comm *comm, void *stream) {
  return pointToPoint(false, data, count, type, peer, comm, stream);
}

EXPORT ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return kSuccess;
}
EXPORT ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return fail(kInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0 || grouped.empty())
    return kSuccess;
  std::vector<Transfer> transfers;
  transfers.swap(grouped);
  Comm *comm = transfers.front().comm;
  ++groupsQueued;
  std::string what =
      "a group of " + std::to_string(transfers.size()) + " send/recv";
  return submit(comm, groupStream,
                transferWork(std::move(transfers), std::move(what)));
}

/// Send/recv groups queued (a test checks that a ring exchange was one).
EXPORT int64_t fakenccl_groups() { return groupsQueued; }

/// The NCCL calls made so far (each that passed its argument checks), in
/// order; `*count` of them.
EXPORT const FakeNcclCall *fakenccl_calls(int64_t *count) {
  *count = int64_t(callLog.size());
  return callLog.data();
}
EXPORT void fakenccl_clear_calls() { callLog.clear(); }
