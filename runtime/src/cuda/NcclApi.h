//===- NcclApi.h - NCCL, reached through dlopen ----------------*- C++ -*-===//
//
// The runtime never links against NCCL, as it never links against CUDA: one
// libloomrt runs on machines with and without it. This header declares the
// few NCCL types, constants and functions that NcclCollectives uses, with the
// values of nccl.h (NCCL 2.x keeps them stable; NcclApiAbiCheck.cpp compares
// every one against the real header where one is installed). The functions
// are resolved by dlopen/dlsym from libnccl.so.2, or LOOMRT_NCCL_LIBRARY.
// ncclConfig_t grows with every NCCL release; we declare its NCCL 2.14
// layout and say so in its version field, which NCCL reads to know which
// fields the caller has (newer ones then take their defaults).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CUDA_NCCLAPI_H
#define LOOMRT_SRC_CUDA_NCCLAPI_H

#include "CudaApi.h"

#include <cstddef>
#include <string>

namespace loomrt::nccl {

// --- Types (nccl.h) ----------------------------------------------------------
// The enums of nccl.h (ncclResult_t, ncclDataType_t, ncclRedOp_t) are passed
// as int: every value fits, so C gives them int's size and calling
// convention.
using ncclResult_t = int;
using ncclDataType_t = int;
using ncclRedOp_t = int;
struct ncclComm;
using ncclComm_t = ncclComm *;
inline constexpr size_t kUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

inline constexpr ncclResult_t ncclSuccess = 0;
inline constexpr ncclResult_t ncclUnhandledCudaError = 1;
inline constexpr ncclResult_t ncclSystemError = 2;
inline constexpr ncclResult_t ncclInternalError = 3;
inline constexpr ncclResult_t ncclInvalidArgument = 4;
inline constexpr ncclResult_t ncclInvalidUsage = 5;
inline constexpr ncclResult_t ncclRemoteError = 6;
inline constexpr ncclResult_t ncclInProgress = 7;

inline constexpr ncclDataType_t ncclInt8 = 0;
inline constexpr ncclDataType_t ncclUint8 = 1;
inline constexpr ncclDataType_t ncclInt32 = 2;
inline constexpr ncclDataType_t ncclUint32 = 3;
inline constexpr ncclDataType_t ncclInt64 = 4;
inline constexpr ncclDataType_t ncclUint64 = 5;
inline constexpr ncclDataType_t ncclFloat16 = 6;
inline constexpr ncclDataType_t ncclFloat32 = 7;
inline constexpr ncclDataType_t ncclFloat64 = 8;
inline constexpr ncclDataType_t ncclBfloat16 = 9;

inline constexpr ncclRedOp_t ncclSum = 0;
inline constexpr ncclRedOp_t ncclProd = 1;
inline constexpr ncclRedOp_t ncclMax = 2;
inline constexpr ncclRedOp_t ncclMin = 3;
inline constexpr ncclRedOp_t ncclAvg = 4; // NCCL 2.10 and newer

/// ncclConfig_t as NCCL 2.14 declared it (ncclConfig_v21400): the leading
/// fields of every later version's, which NCCL copies up to `size` bytes and
/// trusts up to `version` (NCCL_VERSION(2, 14, 0)). NCCL 2.14 and newer.
struct ncclConfig {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking; ///< 0: calls on the communicator may return ncclInProgress
};
inline constexpr unsigned int kConfigMagic = 0xcafebeef;
inline constexpr unsigned int kConfigVersion = 21400;   // NCCL_VERSION(2,14,0)
inline constexpr int kConfigUndefInt = -2147483647 - 1; // INT_MIN
/// NCCL_CONFIG_INITIALIZER for the fields we declare.
inline constexpr ncclConfig kConfigInitializer = {
    sizeof(ncclConfig), kConfigMagic, kConfigVersion, kConfigUndefInt};

using cuda::CUstream; // nccl.h's cudaStream_t is the same CUstream_st *

/// The NCCL entry points NcclCollectives calls, resolved from the library.
struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int *);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t *);
  const char *(*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclAllReduce)(const void *, void *, size_t, ncclDataType_t,
                                ncclRedOp_t, ncclComm_t, CUstream);
  ncclResult_t (*ncclReduceScatter)(const void *, void *, size_t,
                                    ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                    CUstream);
  ncclResult_t (*ncclAllGather)(const void *, void *, size_t, ncclDataType_t,
                                ncclComm_t, CUstream);
  ncclResult_t (*ncclBroadcast)(const void *, void *, size_t, ncclDataType_t,
                                int, ncclComm_t, CUstream);
  ncclResult_t (*ncclSend)(const void *, size_t, ncclDataType_t, int,
                           ncclComm_t, CUstream);
  ncclResult_t (*ncclRecv)(void *, size_t, ncclDataType_t, int, ncclComm_t,
                           CUstream);
  ncclResult_t (*ncclGroupStart)();
  ncclResult_t (*ncclGroupEnd)();
  /// NCCL 2.13 and newer; null before.
  const char *(*ncclGetLastError)(ncclComm_t);
  /// NCCL 2.14 and newer; null before (communicators are then created with
  /// the blocking ncclCommInitRank, which cannot time out).
  ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int,
                                         ncclConfig *);
  /// NCCL 2.14 and newer; null before. Flushes a communicator's work and
  /// leaves it to ncclCommDestroy to free locally: on a nonblocking
  /// communicator it returns ncclInProgress instead of waiting for the other
  /// ranks (ncclCommDestroy alone is a collective of a machine's ranks).
  ncclResult_t (*ncclCommFinalize)(ncclComm_t);

  std::string path; ///< the library that was opened
  int version = 0;  ///< ncclGetVersion's code, e.g. 22809 for 2.28.9

  /// "ncclInvalidArgument (invalid argument): <NCCL's last error>".
  std::string describe(ncclResult_t result, ncclComm_t comm) const;
  /// "2.28.9".
  std::string versionString() const;
};

/// Opens NCCL once per process (per library path): LOOMRT_NCCL_LIBRARY if
/// set, else libnccl.so.2 (library path, then /usr/local/cuda/lib64). On
/// failure returns null and a message ("no NCCL (libnccl.so.2 not found):
/// ...", "... has no ncclAllReduce: ...").
const NcclApi *loadNccl(std::string *error);

} // namespace loomrt::nccl

#endif // LOOMRT_SRC_CUDA_NCCLAPI_H
