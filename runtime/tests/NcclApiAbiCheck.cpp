//===- NcclApiAbiCheck.cpp - Our NCCL declarations match nccl.h -----------===//
//
// Built only where nccl.h is installed: every constant src/cuda/NcclApi.h
// declares must equal nccl.h's, the unique id must have its size, the enums
// we pass as int must be int-sized, and our ncclConfig (NCCL 2.14's) must be
// the leading fields of nccl.h's ncclConfig_t, with NCCL_CONFIG_INITIALIZER's
// values. Compiling is the test.
//
//===----------------------------------------------------------------------===//

#include <nccl.h>

#include "cuda/NcclApi.h"

#include <climits>
#include <cstddef>
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

// ncclConfig: NCCL 2.14's fields, where every later ncclConfig_t has them,
// and the initializer's values for them.
static_assert(offsetof(n::ncclConfig, size) == offsetof(ncclConfig_t, size));
static_assert(offsetof(n::ncclConfig, magic) == offsetof(ncclConfig_t, magic));
static_assert(offsetof(n::ncclConfig, version) ==
              offsetof(ncclConfig_t, version));
static_assert(offsetof(n::ncclConfig, blocking) ==
              offsetof(ncclConfig_t, blocking));
static_assert(sizeof(n::ncclConfig) <= sizeof(ncclConfig_t));
static_assert(std::is_same_v<decltype(n::ncclConfig::size),
                             decltype(ncclConfig_t::size)>);
static_assert(std::is_same_v<decltype(n::ncclConfig::magic),
                             decltype(ncclConfig_t::magic)>);
static_assert(std::is_same_v<decltype(n::ncclConfig::version),
                             decltype(ncclConfig_t::version)>);
static_assert(std::is_same_v<decltype(n::ncclConfig::blocking),
                             decltype(ncclConfig_t::blocking)>);
constexpr ncclConfig_t kInitializer = NCCL_CONFIG_INITIALIZER;
static_assert(n::kConfigMagic == kInitializer.magic);
static_assert(n::kConfigUndefInt == NCCL_CONFIG_UNDEF_INT &&
              n::kConfigUndefInt == kInitializer.blocking);
static_assert(n::kConfigVersion == NCCL_VERSION(2, 14, 0));
static_assert(n::kConfigVersion <= kInitializer.version);
static_assert(n::kConfigInitializer.magic == kInitializer.magic &&
              n::kConfigInitializer.size == sizeof(n::ncclConfig) &&
              n::kConfigInitializer.blocking == kInitializer.blocking);

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
static_assert(arity(&ncclCommInitRankConfig) ==
              arity(decltype(n::NcclApi::ncclCommInitRankConfig)()));
static_assert(arity(&ncclCommFinalize) ==
              arity(decltype(n::NcclApi::ncclCommFinalize)()));
static_assert(std::is_same_v<decltype(&ncclGroupStart), ncclResult_t (*)()>);

int main() { return 0; }
