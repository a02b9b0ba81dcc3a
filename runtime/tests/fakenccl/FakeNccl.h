/* FakeNccl.h - The call log of the fake NCCL (FakeNccl.cpp) for tests. */

#ifndef LOOMRT_TESTS_FAKENCCL_H
#define LOOMRT_TESTS_FAKENCCL_H

#include <cstdint>

/// One NCCL call the fake accepted. Buffers are given as byte offsets into
/// the fake driver's device allocation that holds them (-1: none, or not
/// device memory), with that allocation's size: a plan's buffer in an
/// arena is its plan offset, in an allocation of the entry's arena_bytes.
struct FakeNcclCall {
  char op[24];                    ///< "ncclAllReduce", "ncclSend", ...
  int64_t sendOffset, recvOffset; ///< recv: also the in-place buffer
  uint64_t sendAllocation, recvAllocation;
  uint64_t count; ///< elements, as passed
  int type;       ///< ncclDataType_t
  int redOp;      ///< ncclRedOp_t, or -1
  int root;       ///< broadcast root, send/recv peer, or -1
  void *stream;
  int commRank, commSize;
  int commId; ///< which of this process's communicators, from 1
};

// Exported by the fake (dlsym them):
//   const FakeNcclCall *fakenccl_calls(int64_t *count);
//   void fakenccl_clear_calls();
//   int64_t fakenccl_groups();  // send/recv groups queued

#endif
