//===- NcclApiAbiCheck.cpp - Our NCCL declarations match nccl.h -----------===//
//
// Built only where nccl.h is installed: every constant src/cuda/NcclApi.h
// declares must equal nccl.h's, the unique id must have its size, and the
// enums we pass as int must be int-sized. Compiling is the test.
//
//===----------------------------------------------------------------------===//

#include <nccl.h>

#include "cuda/NcclApi.h"

#include <type_traits>

namespace n = loomrt::nccl;

static_assert(n::ncclSuccess == ncclSuccess);
static_assert(n::ncclUnhandledCudaError == ncclUnhandledCudaError);
static_assert(n::ncclSystemError == ncclSystemError);
static_assert(n::ncclInternalError == ncclInternalError);
static_assert(n::ncclInvalidArgument == ncclInvalidArgument);
static_assert(n::ncclInvalidUsage == ncclInvalidUsage);
static_assert(n::ncclRemoteError == ncclRemoteError);
static_assert(n::ncclInProgress == ncclInProgress);

static_assert(n::ncclInt8 == ncclInt8 && n::ncclUint8 == ncclUint8);
static_assert(n::ncclInt32 == ncclInt32 && n::ncclUint32 == ncclUint32);
static_assert(n::ncclInt64 == ncclInt64 && n::ncclUint64 == ncclUint64);
static_assert(n::ncclFloat16 == ncclFloat16);
static_assert(n::ncclFloat32 == ncclFloat32);
static_assert(n::ncclFloat64 == ncclFloat64);
static_assert(n::ncclBfloat16 == ncclBfloat16);

static_assert(n::ncclSum == ncclSum && n::ncclProd == ncclProd);
static_assert(n::ncclMax == ncclMax && n::ncclMin == ncclMin);
static_assert(n::ncclAvg == ncclAvg);

static_assert(n::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(n::ncclUniqueId) == sizeof(ncclUniqueId));
static_assert(sizeof(ncclResult_t) == sizeof(n::ncclResult_t));
static_assert(sizeof(ncclDataType_t) == sizeof(n::ncclDataType_t));
static_assert(sizeof(ncclRedOp_t) == sizeof(n::ncclRedOp_t));
static_assert(sizeof(ncclComm_t) == sizeof(n::ncclComm_t));
static_assert(sizeof(cudaStream_t) == sizeof(n::CUstream));

// The entry points' shapes: each of ours, with the enums as int, has the
// arity and the other parameter types of nccl.h's.
template <typename R, typename... A> constexpr size_t arity(R (*)(A...)) {
  return sizeof...(A);
}
static_assert(arity(&ncclAllReduce) ==
              arity(decltype(n::NcclApi::ncclAllReduce)()));
static_assert(arity(&ncclReduceScatter) ==
              arity(decltype(n::NcclApi::ncclReduceScatter)()));
static_assert(arity(&ncclAllGather) ==
              arity(decltype(n::NcclApi::ncclAllGather)()));
static_assert(arity(&ncclBroadcast) ==
              arity(decltype(n::NcclApi::ncclBroadcast)()));
static_assert(arity(&ncclSend) == arity(decltype(n::NcclApi::ncclSend)()));
static_assert(arity(&ncclRecv) == arity(decltype(n::NcclApi::ncclRecv)()));
static_assert(arity(&ncclCommInitRank) ==
              arity(decltype(n::NcclApi::ncclCommInitRank)()));
static_assert(std::is_same_v<decltype(&ncclGroupStart), ncclResult_t (*)()>);

int main() { return 0; }
