/* FakeCuda.h - Counters of the fake CUDA driver (FakeCuda.cpp) for tests. */

#ifndef LOOMRT_TESTS_FAKECUDA_H
#define LOOMRT_TESTS_FAKECUDA_H

#include <cstdint>

struct FakeCudaStats {
  int64_t launchesIssued = 0; ///< cuLaunchKernel calls (captured or not)
  int64_t kernelsRun = 0;     ///< kernel bodies executed
  int64_t matmulsIssued = 0, matmulsRun = 0;
  int64_t graphsInstantiated = 0, graphLaunches = 0, captures = 0;
  int64_t h2dBytes = 0, d2hBytes = 0, d2dBytes = 0; ///< executed copies
  int64_t pageableCopies = 0;     ///< async copies from/to unpinned memory
  int64_t hostCopiesCaptured = 0; ///< H2D/D2H recorded into a graph
  int64_t invalidAccesses = 0;    ///< device ranges outside any allocation
  int64_t captureViolations = 0;  ///< alloc/sync while capturing
  int64_t badGemmShapes = 0;
  int64_t cubinLoads = 0, ptxLoads = 0, ptxWithoutEx = 0;
  int64_t deviceAllocations = 0, streams = 0, contextsRetained = 0;
  /// Waits for a whole stream that ended: cuStreamSynchronize calls, and
  /// cuStreamQuery calls that found all of the stream's work done.
  int64_t synchronizations = 0;
  int64_t eventQueries = 0;
  int maxDynamicShared = 0;
  int lastComputeType = 0;
  unsigned lastGrid[3] = {0, 0, 0}, lastBlock[3] = {0, 0, 0}, lastShared = 0;
  /// The stream of the last launch, copy, memset or matmul issued (not the
  /// fake NCCL's work, which fakecuda_enqueue queues).
  void *lastStream = nullptr;
  int64_t streamQueries = 0; ///< cuStreamQuery calls, whatever they found
};

// Also exported by the fake driver, for tests that dlsym them:
//   const char *fakecuda_trace(): what ran on the streams since
//     fakecuda_reset, in order ("h2d kernel:lr_sum ext d2d d2h ...": ext
//     is work fakecuda_enqueue queued, e.g. the fake NCCL's);
//   int64_t fakecuda_device_offset(const void *p, uint64_t *bytes): p's
//     offset into its device allocation (-1: none), and that allocation's
//     size.

#endif
