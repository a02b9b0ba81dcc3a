//===- DataParallel.h - The trainer's collectives over the ranks -*- C++ -*-===//
//
// What train() asks of the ranks of a data-parallel run, over a Collectives:
// rank 0's starting tensors on every rank, the gradient and loss sums of a
// step, and the check at the end that every rank holds the same tensors.
// (The gradients summed during the backward are GradientBuckets'.) Each
// returns false with a message; train() adds the step and fails.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_DATAPARALLEL_H
#define LOOMRT_SRC_DATAPARALLEL_H

#include "loomrt/Collectives.h"
#include "loomrt/Npy.h"

#include <map>
#include <string>

namespace loomrt {

/// Every rank's `tensors` become rank 0's.
bool broadcastFromRank0(Collectives &comm,
                        std::map<std::string, NpyArray> &tensors,
                        std::string *error);

/// Each rank's gradient sums (`grads`; null when they are summed already)
/// and loss sum (`lossSum`, or null) become the sums over every rank, all
/// transfers in flight together.
bool sumOverRanks(Collectives &comm, std::map<std::string, NpyArray> *grads,
                  double *lossSum, std::string *error);

/// Whether every rank holds the same `tensors` (`*agree`): a 64-bit FNV-1a
/// hash of them, halved to fit an i64, whose maximum and negated minimum
/// over the ranks one all-reduce finds.
bool ranksAgree(Collectives &comm,
                const std::map<std::string, NpyArray> &tensors, bool *agree,
                std::string *error);

} // namespace loomrt

#endif // LOOMRT_SRC_DATAPARALLEL_H
