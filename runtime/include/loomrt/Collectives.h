//===- Collectives.h - Communication between the ranks of a run -*- C++ -*-===//
//
// The collectives a distributed run issues: all-reduce,
// reduce-scatter, all-gather, broadcast, all-to-all, and point-to-point
// send/recv. Every call is nonblocking: it returns a Request to wait on, so
// that communication overlaps the work issued after it. Ranks issue the same
// collectives in the same order (MPI's rule). loom-run makes the MPI
// implementation (src/tool/MpiCollectives.cpp, host memory) when an MPI
// launcher started it (`mpirun -np N loom-run ...`); the library itself
// links no MPI. The NCCL implementation (src/cuda/NcclCollectives.h) takes
// device pointers.
//
// Nothing here throws; every failure is `false` (or null) plus a message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COLLECTIVES_H
#define LOOMRT_COLLECTIVES_H

#include "loomrt/DType.h"

#include <cstddef>
#include <memory>
#include <string>

namespace loomrt {

enum class ReduceOp { Sum, Max, Avg };

/// One outstanding collective or point-to-point transfer.
class Request {
public:
  virtual ~Request();
  /// Blocks until the transfer is done (its buffers may then be reused).
  virtual bool wait(std::string *error) noexcept = 0;
  /// Lets the transfer progress without blocking (MPI moves data only
  /// inside its calls); `*complete` says whether it is done, and then
  /// wait() returns at once. The default makes no progress.
  virtual bool test(bool *complete, std::string * /*error*/) noexcept {
    *complete = false;
    return true;
  }
};

class Collectives {
public:
  virtual ~Collectives();
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// Rank among the processes of this machine (from the launcher).
  virtual int localRank() const noexcept = 0;
  /// "mpi", ...
  virtual const char *name() const noexcept = 0;

  /// `count` elements of `dtype` at `data`, reduced over every rank in
  /// place (Avg: the sum divided by size(); float types only).
  virtual std::unique_ptr<Request> allReduce(void *data, size_t count,
                                             DType dtype, ReduceOp op,
                                             std::string *error) noexcept = 0;
  /// `send` holds size() blocks of `count` elements; rank r receives the
  /// reduction of every rank's block r in `recv` (`count` elements).
  virtual std::unique_ptr<Request>
  reduceScatter(const void *send, void *recv, size_t count, DType dtype,
                ReduceOp op, std::string *error) noexcept = 0;
  /// Every rank's `count` elements of `send`, in rank order, into `recv`
  /// (size() * count elements).
  virtual std::unique_ptr<Request> allGather(const void *send, void *recv,
                                             size_t count, DType dtype,
                                             std::string *error) noexcept = 0;
  /// Rank `root`'s `count` elements copied into every rank's `data`.
  virtual std::unique_ptr<Request> broadcast(void *data, size_t count,
                                             DType dtype, int root,
                                             std::string *error) noexcept = 0;
  /// Block r of `send` (`count` elements each, size() blocks) goes to rank
  /// r; block s of `recv` comes from rank s.
  virtual std::unique_ptr<Request> allToAll(const void *send, void *recv,
                                            size_t count, DType dtype,
                                            std::string *error) noexcept = 0;
  virtual std::unique_ptr<Request> send(const void *data, size_t count,
                                        DType dtype, int to, int tag,
                                        std::string *error) noexcept = 0;
  virtual std::unique_ptr<Request> recv(void *data, size_t count, DType dtype,
                                        int from, int tag,
                                        std::string *error) noexcept = 0;
  virtual bool barrier(std::string *error) noexcept = 0;

  /// The ranks of this communicator that pass the same `color`, as a
  /// communicator of their own, ranked by `key` (ties: by rank here): what
  /// a mesh of several axes needs, one per axis (MeshComms,
  /// loomrt/Mesh.h). A collective: every rank calls it, in the same order
  /// as its other collectives. The result's collectives time out and name
  /// themselves as this one's do, naming this process's rank in the
  /// communicator split; it must go before this one. The default cannot
  /// split: null, and `error` says so.
  virtual std::unique_ptr<Collectives> split(int color, int key,
                                             std::string *error) noexcept;
};

/// Waits for `request` (null: the call that made it failed, and `error`
/// says why already).
bool waitFor(std::unique_ptr<Request> request, std::string *error) noexcept;

} // namespace loomrt

#endif // LOOMRT_COLLECTIVES_H
