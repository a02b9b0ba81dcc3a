//===- DataParallel.cpp - The trainer's collectives over the ranks --------===//
//
// See DataParallel.h.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"

#include "Support.h"

#include <memory>
#include <vector>

namespace loomrt {

using detail::quoteName;

bool broadcastFromRank0(Collectives &comm,
                        std::map<std::string, NpyArray> &tensors,
                        std::string *error) {
  for (auto &[name, a] : tensors) {
    std::string why;
    if (!waitFor(comm.broadcast(a.data.data(), a.data.size(), DType::U8, 0,
                                &why),
                 &why)) {
      *error = "broadcasting " + quoteName(name) + " from rank 0: " + why;
      return false;
    }
  }
  return true;
}

bool sumOverRanks(Collectives &comm, std::map<std::string, NpyArray> *grads,
                  double *lossSum, std::string *error) {
  std::vector<std::unique_ptr<Request>> pending;
  std::string why;
  auto issue = [&](std::unique_ptr<Request> r, const std::string &what) {
    if (!r) {
      *error = "all-reduce of " + what + ": " + why;
      return false;
    }
    pending.push_back(std::move(r));
    return true;
  };
  if (grads)
    for (auto &[name, g] : *grads)
      if (!issue(comm.allReduce(g.data.data(),
                                g.data.size() / dtypeSize(g.dtype), g.dtype,
                                ReduceOp::Sum, &why),
                 "the gradient of " + quoteName(name)))
        return false;
  if (lossSum &&
      !issue(comm.allReduce(lossSum, 1, DType::F64, ReduceOp::Sum, &why),
             "the loss"))
    return false;
  for (auto &r : pending)
    if (!r->wait(&why)) {
      *error = "all-reduce: " + why;
      return false;
    }
  return true;
}

bool ranksAgree(Collectives &comm,
                const std::map<std::string, NpyArray> &tensors, bool *agree,
                std::string *error) {
  uint64_t hash = 1469598103934665603ull;
  for (const auto &[name, a] : tensors)
    for (uint8_t byte : a.data)
      hash = (hash ^ byte) * 1099511628211ull;
  int64_t extremes[2] = {int64_t(hash >> 1), -int64_t(hash >> 1)};
  std::string why;
  if (!waitFor(comm.allReduce(extremes, 2, DType::I64, ReduceOp::Max, &why),
               &why)) {
    *error = "comparing the ranks' tensors: " + why;
    return false;
  }
  *agree = extremes[0] == -extremes[1];
  return true;
}

} // namespace loomrt
