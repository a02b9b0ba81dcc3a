//===- NcclCollectives.h - NCCL collectives on device memory --*- C++ -*-===//
//
// The Collectives of a run whose buffers live on NVIDIA GPUs: one NCCL
// communicator over every rank, NCCL reached through dlopen (NcclApi.h) like
// the CUDA driver, so libloomrt needs neither to build or to load. Another
// Collectives (MPI's, from loom-run's startMpi) starts it: it carries the
// ranks, and rank 0's NCCL unique id to the others.
//
// Every pointer handed to these collectives is a device pointer
// (CUdeviceptr) of the chosen device's primary context, the context the CUDA
// backend allocates its arenas in. Work is queued on one CUDA stream; a
// Request waits for an event recorded after its operation, so it blocks for
// that operation only, and gives up after NcclOptions::timeoutSeconds
// (aborting the communicator: another rank died or hangs). The same limit
// holds for creating the communicator (a nonblocking one, NCCL 2.14 and
// newer: a rank that never joins fails the others rather than hang them),
// for NCCL finishing to queue a call, and for the stream's drain when the
// communicator is destroyed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CUDA_NCCLCOLLECTIVES_H
#define LOOMRT_SRC_CUDA_NCCLCOLLECTIVES_H

#include "loomrt/Collectives.h"

#include <functional>
#include <memory>
#include <string>

namespace loomrt {

struct NcclOptions {
  /// CUDA device ordinal; -1: LOOMRT_CUDA_DEVICE when set, else the rank's
  /// local rank modulo the machine's device count (one GPU per rank).
  int device = -1;
  /// The CUstream the collectives are queued on (the CUDA backend's, so
  /// that they are ordered after the kernels that produce their inputs);
  /// null: a stream of their own, and the caller orders by synchronizing.
  void *stream = nullptr;
  /// Seconds a Request waits before it aborts the communicator and fails
  /// naming the collective; also the limit on creating the communicator,
  /// on NCCL queueing a call, and on draining the stream at the end; 0
  /// waits forever.
  double timeoutSeconds = 60;
  /// Where set, startNccl stores here a function that aborts the
  /// communicator (ncclCommAbort; every later call then fails naming
  /// `why`), and does nothing once the communicator is gone: for the owner
  /// of `stream` (the CUDA backend), whose own wait for the stream timed out
  /// behind one of its collectives, so that the stream drains.
  std::function<void(const std::string &why)> *abort = nullptr;
};

/// Loads NCCL (LOOMRT_NCCL_LIBRARY, else libnccl.so.2) and the CUDA driver
/// (LOOMRT_CUDA_DRIVER, else libcuda.so.1), and makes one communicator over
/// `bootstrap`'s ranks: every rank calls it at the same time. `bootstrap`
/// (host memory, e.g. MPI) exchanges the start-up status and the unique id,
/// and is not used afterwards. Null with `error` on every rank when any rank
/// cannot start ("no NCCL (libnccl.so.2 not found): ...", or "rank 1 could
/// not start NCCL" on the others). The communicator is created nonblocking
/// (ncclCommInitRankConfig, blocking = 0) and waited for at most
/// NcclOptions::timeoutSeconds: a rank that never joins it makes the
/// others fail ("ncclCommInitRankConfig (rank 0 of 2, ...): the
/// communicator was not created within 60 s ..."). An NCCL older than 2.14
/// has no such call: ncclCommInitRank then blocks without a limit (a note
/// on stderr says so, once).
///
/// Differences from the MPI collectives: every pointer is a device pointer;
/// f16 and bf16 reduce (sum, max, avg) as well as f32, f64, i64, i32, i8, u8;
/// send/recv tags are not matched (NCCL pairs a rank's sends to a peer with
/// the peer's receives in issue order), and consecutive send/recv calls are
/// issued as one NCCL group when the next collective is issued or one of
/// them is waited for, so that a ring exchange cannot deadlock. Requests must
/// be waited for, or dropped, before their buffers are freed.
std::unique_ptr<Collectives> startNccl(Collectives &bootstrap,
                                       const NcclOptions &options,
                                       std::string *error) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_CUDA_NCCLCOLLECTIVES_H
