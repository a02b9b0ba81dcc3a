//===- MpiCollectives.cpp - Collectives over MPI --------------------------===//
//
// Each collective is MPI's nonblocking one (MPI_Iallreduce, ...) on
// MPI_COMM_WORLD; Avg is MPI_SUM, then a division when the request is waited
// for. Element types map to MPI's (f32, f64, i64, i32; 16-bit floats only
// move, they are not reduced).
//
//===----------------------------------------------------------------------===//

#include "MpiCollectives.h"

#include <cstdlib>
#include <cstring>

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

#if LOOMRT_HAVE_MPI
namespace {

std::string mpiError(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(what) + ": " + std::string(text, length);
}

class MpiRequest final : public Request {
public:
  MpiRequest(MPI_Request request, void *avgData, size_t avgCount, DType dtype,
             int worldSize)
      : request(request), avgData(avgData), avgCount(avgCount), dtype(dtype),
        worldSize(worldSize) {}
  ~MpiRequest() override {
    if (request != MPI_REQUEST_NULL) // never waited for: complete it anyway
      MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  bool wait(std::string *error) noexcept override {
    int rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      if (error)
        *error = mpiError("MPI_Wait", rc);
      return false;
    }
    if (avgData) {
      if (dtype == DType::F32)
        for (size_t i = 0; i < avgCount; ++i)
          static_cast<float *>(avgData)[i] /= float(worldSize);
      else
        for (size_t i = 0; i < avgCount; ++i)
          static_cast<double *>(avgData)[i] /= double(worldSize);
    }
    return true;
  }

private:
  MPI_Request request;
  void *avgData;
  size_t avgCount;
  DType dtype;
  int worldSize;
};

class MpiCollectives final : public Collectives {
public:
  MpiCollectives() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_,
                        MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &localRank_);
    MPI_Comm_free(&local);
  }
  ~MpiCollectives() override { MPI_Finalize(); }

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
    return finish(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), type, mop,
                                 MPI_COMM_WORLD, &r),
                  "MPI_Iallreduce", r, op == ReduceOp::Avg ? data : nullptr,
                  count, dtype, error);
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
    return finish(MPI_Ireduce_scatter_block(send, recv, int(count), type, mop,
                                            MPI_COMM_WORLD, &r),
                  "MPI_Ireduce_scatter_block", r,
                  op == ReduceOp::Avg ? recv : nullptr, count, dtype, error);
  }
  std::unique_ptr<Request> allGather(const void *send, void *recv,
                                     size_t count, DType dtype,
                                     std::string *error) noexcept override {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(count * size_t(size_), error))
      return nullptr;
    MPI_Request r;
    return finish(MPI_Iallgather(send, int(count), type, recv, int(count),
                                 type, MPI_COMM_WORLD, &r),
                  "MPI_Iallgather", r, nullptr, 0, dtype, error);
  }
  std::unique_ptr<Request> broadcast(void *data, size_t count, DType dtype,
                                     int root,
                                     std::string *error) noexcept override {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(count, error) ||
        !validRank(root, error))
      return nullptr;
    MPI_Request r;
    return finish(
        MPI_Ibcast(data, int(count), type, root, MPI_COMM_WORLD, &r),
        "MPI_Ibcast", r, nullptr, 0, dtype, error);
  }
  std::unique_ptr<Request> allToAll(const void *send, void *recv,
                                    size_t count, DType dtype,
                                    std::string *error) noexcept override {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(count * size_t(size_), error))
      return nullptr;
    MPI_Request r;
    return finish(MPI_Ialltoall(send, int(count), type, recv, int(count), type,
                                MPI_COMM_WORLD, &r),
                  "MPI_Ialltoall", r, nullptr, 0, dtype, error);
  }
  std::unique_ptr<Request> send(const void *data, size_t count, DType dtype,
                                int to, int tag,
                                std::string *error) noexcept override {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(count, error) ||
        !validRank(to, error))
      return nullptr;
    MPI_Request r;
    return finish(MPI_Isend(data, int(count), type, to, tag, MPI_COMM_WORLD,
                            &r),
                  "MPI_Isend", r, nullptr, 0, dtype, error);
  }
  std::unique_ptr<Request> recv(void *data, size_t count, DType dtype,
                                int from, int tag,
                                std::string *error) noexcept override {
    MPI_Datatype type;
    if (!movable(dtype, &type, error) || !fits(count, error) ||
        !validRank(from, error))
      return nullptr;
    MPI_Request r;
    return finish(MPI_Irecv(data, int(count), type, from, tag, MPI_COMM_WORLD,
                            &r),
                  "MPI_Irecv", r, nullptr, 0, dtype, error);
  }
  bool barrier(std::string *error) noexcept override {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS && error)
      *error = mpiError("MPI_Barrier", rc);
    return rc == MPI_SUCCESS;
  }

private:
  int rank_ = 0, size_ = 1, localRank_ = 0;

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
  static bool reducible(DType dtype, ReduceOp op, MPI_Datatype *type,
                        MPI_Op *mop, std::string *error) {
    switch (dtype) {
    case DType::F32:
      *type = MPI_FLOAT;
      break;
    case DType::F64:
      *type = MPI_DOUBLE;
      break;
    case DType::I64:
      *type = MPI_INT64_T;
      break;
    case DType::I32:
      *type = MPI_INT32_T;
      break;
    default:
      return fail(error, "cannot reduce " +
                             std::string(dtypeToShortName(dtype)) +
                             " elements (f32, f64, i64 and i32 reduce)");
    }
    if (op == ReduceOp::Avg && dtype != DType::F32 && dtype != DType::F64)
      return fail(error, "avg reduces f32 and f64 only");
    *mop = op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
    return true;
  }
  std::unique_ptr<Request> finish(int rc, const char *what, MPI_Request r,
                                  void *avgData, size_t count, DType dtype,
                                  std::string *error) const {
    if (rc != MPI_SUCCESS) {
      fail(error, mpiError(what, rc));
      return nullptr;
    }
    return std::make_unique<MpiRequest>(r, avgData, count, dtype, size_);
  }
};

} // namespace

std::unique_ptr<Collectives> startMpi(std::string *error) noexcept {
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
  try {
    return std::make_unique<MpiCollectives>();
  } catch (...) {
    if (error)
      *error = "out of memory starting MPI";
    return nullptr;
  }
}

void abortMpi(int code) noexcept {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
#else
void abortMpi(int code) noexcept { std::_Exit(code); }

std::unique_ptr<Collectives> startMpi(std::string *error) noexcept {
  if (error)
    *error = "this loom-run was built without MPI (install libopenmpi-dev "
             "and rebuild, see README.md)";
  return nullptr;
}
#endif

} // namespace loomrt
