//===- GradientBuckets.cpp - Gradient all-reduce overlapped with backward -===//
//
// See GradientBuckets.h. A gradient is only read (copied into its bucket)
// while the run goes on, and written back (the sum) once every bucket is
// done, after the run's last step: the RunObserver contract.
//
//===----------------------------------------------------------------------===//

#include "GradientBuckets.h"

#include <algorithm>

#include <cstring>

namespace loomrt {

GradientBuckets::GradientBuckets(Collectives &comm, const PlanEntry &entry,
                                 uint64_t bucketBytes,
                                 uint64_t firstBucketBytes)
    : comm(comm), entry(entry), bucketBytes(bucketBytes),
      firstBucketBytes(std::min(firstBucketBytes, bucketBytes)) {}

GradientBuckets::~GradientBuckets() = default;

RunObserver GradientBuckets::observer() {
  RunObserver o;
  o.outputReady = [this](size_t output, void *data, std::string *error) {
    return ready(output, data, error);
  };
  o.afterStep = [this](std::string *error) { return progress(error); };
  o.finish = [this](std::string *error) { return finish(error); };
  return o;
}

GradientBuckets::Bucket &GradientBuckets::open(DType dtype) {
  for (auto &b : buckets)
    if (!b->request && b->dtype == dtype)
      return *b;
  buckets.push_back(std::make_unique<Bucket>());
  buckets.back()->dtype = dtype;
  return *buckets.back();
}

bool GradientBuckets::ready(size_t output, void *data, std::string *error) {
  const Binding &out = entry.outputs[output];
  if (out.kind != BindingKind::Grad || out.bytes == 0)
    return true;
  bool firstOfRun = std::none_of(
      buckets.begin(), buckets.end(),
      [](const std::unique_ptr<Bucket> &b) { return b->request != nullptr; });
  Bucket &b = open(out.dtype);
  b.parts.push_back({data, out.bytes});
  b.bytes += out.bytes;
  return b.bytes < (firstOfRun ? firstBucketBytes : bucketBytes) ||
         issue(b, error);
}

bool GradientBuckets::issue(Bucket &b, std::string *error) {
  if (!spare.empty()) {
    b.buffer = std::move(spare.back());
    spare.pop_back();
  }
  b.buffer.resize(b.bytes);
  uint64_t at = 0;
  for (const Part &p : b.parts) {
    std::memcpy(b.buffer.data() + at, p.data, p.bytes);
    at += p.bytes;
  }
  if (!started) {
    started = true;
    firstIssue = Clock::now();
  }
  std::string why;
  b.request = comm.allReduce(b.buffer.data(), b.bytes / dtypeSize(b.dtype),
                             b.dtype, ReduceOp::Sum, &why);
  if (!b.request) {
    if (error)
      *error = "all-reduce of a gradient bucket: " + why;
    return false;
  }
  ++total.buckets;
  total.bytes += int64_t(b.bytes);
  return true;
}

bool GradientBuckets::progress(std::string *error) {
  for (auto &b : buckets) {
    if (!b->request || b->complete)
      continue;
    if (!b->request->test(&b->complete, error))
      return false;
    if (b->complete)
      lastComplete = Clock::now();
  }
  return true;
}

bool GradientBuckets::finish(std::string *error) {
  Clock::time_point begin = Clock::now();
  for (auto &b : buckets)
    if (!b->request && b->bytes && !issue(*b, error))
      return false;
  for (auto &b : buckets) {
    if (!b->request)
      continue;
    if (!b->complete) {
      if (!b->request->wait(error))
        return false;
      lastComplete = Clock::now();
    }
    uint64_t at = 0;
    for (const Part &p : b->parts) {
      std::memcpy(p.data, b->buffer.data() + at, p.bytes);
      at += p.bytes;
    }
    spare.push_back(std::move(b->buffer));
  }
  Clock::time_point end = Clock::now();
  if (started) {
    total.seconds +=
        std::chrono::duration<double>(lastComplete - firstIssue).count();
    total.exposedSeconds += std::chrono::duration<double>(end - begin).count();
  }
  buckets.clear();
  started = false;
  return true;
}

} // namespace loomrt
