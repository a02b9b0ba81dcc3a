//===- GradientBuckets.h - Gradient all-reduce overlapped with backward -*- C++ -*-===//
//
// Data parallelism's gradient reduction, issued while the backward still
// runs (as PyTorch's DDP does): each gradient output of a run joins its
// dtype's current bucket as soon as the plan step that writes it last is
// done (a RunObserver); a bucket of at least `bucketBytes` is copied into
// one buffer and summed over the ranks by one nonblocking all-reduce while
// the run goes on (a run's first bucket closes at `firstBucketBytes`, 1 MiB
// as in DDP, so that communication starts early even when the model is
// smaller than `bucketBytes`); after each plan step the buckets in flight are given a
// chance to progress. When the run's steps are done the last, partial
// buckets go, every bucket is waited for and copied back into the run's
// gradients, which the run then returns summed over the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_GRADIENTBUCKETS_H
#define LOOMRT_SRC_GRADIENTBUCKETS_H

#include "loomrt/Artifact.h"
#include "loomrt/Collectives.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

/// Time the reductions of one or more runs took, and how much of it the
/// run waited for after its last step (exposed, not hidden by compute).
struct ReductionTimes {
  double seconds = 0;        ///< from each run's first issue to its last completion
  double exposedSeconds = 0; ///< waited for after the run's last step
  int64_t buckets = 0;
  int64_t bytes = 0;
};

class GradientBuckets {
public:
  /// A run's first bucket closes at this many bytes (or `bucketBytes`, if
  /// less): PyTorch DDP's first bucket.
  static constexpr uint64_t kFirstBucketBytes = 1 << 20;

  /// Reduces the `grad` outputs of `entry`'s runs over `comm`, in buckets
  /// of at least `bucketBytes` (the first of a run: at least
  /// min(`firstBucketBytes`, `bucketBytes`); the last may be smaller).
  GradientBuckets(Collectives &comm, const PlanEntry &entry,
                  uint64_t bucketBytes,
                  uint64_t firstBucketBytes = kFirstBucketBytes);
  ~GradientBuckets();

  /// The observer of one run (valid while this object is).
  RunObserver observer();
  const ReductionTimes &times() const { return total; }

private:
  using Clock = std::chrono::steady_clock;
  struct Part {
    void *data;
    uint64_t bytes;
  };
  struct Bucket {
    DType dtype;
    std::vector<Part> parts;
    uint64_t bytes = 0;
    std::vector<char> buffer;
    std::unique_ptr<Request> request;
    bool complete = false;
  };

  bool ready(size_t output, void *data, std::string *error);
  bool issue(Bucket &bucket, std::string *error);
  bool progress(std::string *error);
  bool finish(std::string *error);
  /// The bucket of `dtype` that gathers parts (not yet issued).
  Bucket &open(DType dtype);

  Collectives &comm;
  const PlanEntry &entry;
  uint64_t bucketBytes;
  uint64_t firstBucketBytes;
  std::vector<std::unique_ptr<Bucket>> buckets; ///< this run's, issued or not
  std::vector<std::vector<char>> spare;         ///< buffers kept across runs
  bool started = false;
  Clock::time_point firstIssue;
  Clock::time_point lastComplete;
  ReductionTimes total;
};

} // namespace loomrt

#endif // LOOMRT_SRC_GRADIENTBUCKETS_H
