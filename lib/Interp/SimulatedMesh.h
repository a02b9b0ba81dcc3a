//===- SimulatedMesh.h - The ranks of a mesh, in one process ----*- C++ -*-===//
//
// interp::runRanks runs every rank of a module's mesh on a thread of its own;
// the collectives of the interpreter meet here. A collective over axis `a`
// is an exchange among the ranks that differ only in their coordinate along
// `a`: each deposits its operand, waits for the others', and combines them
// itself (in rank order, so that every rank computes the same bits). Ranks
// count their collectives per group, so the k-th collective of one rank
// meets the k-th of the others; one that differs in kind, axis or operand
// size is reported, as is a rank that failed (the others stop waiting).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERP_SIMULATEDMESH_H
#define LOOM_LIB_INTERP_SIMULATEDMESH_H

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace loom::interp {

class SimulatedMesh {
public:
  explicit SimulatedMesh(std::vector<MeshAxis> axes);

  int64_t size() const { return total; }
  /// `rank`'s coordinate along `axis`, and the axis's size (0 for an axis
  /// the mesh lacks).
  int64_t coordinate(int64_t rank, llvm::StringRef axis) const;
  int64_t axisSize(llvm::StringRef axis) const;

  /// Deposits `mine` for `rank`'s next collective over `axis` (described by
  /// `what`, e.g. "loom.all_reduce of 64 elements") and returns every
  /// group member's operand, in coordinate order. Fails with `error` when
  /// the members disagree on `what`, or when a rank failed (abort()).
  std::optional<std::vector<std::vector<double>>>
  exchange(int64_t rank, llvm::StringRef axis, const std::string &what,
           std::vector<double> mine, std::string &error);

  /// A rank failed: every exchange in progress or to come fails.
  void abort();

private:
  struct Slot {
    std::string what;
    std::vector<std::optional<std::vector<double>>> values;
    int64_t deposited = 0, taken = 0;
    std::string mismatch;
  };
  /// (axis index, first rank of the group, sequence number).
  using Key = std::tuple<size_t, int64_t, int64_t>;

  std::vector<MeshAxis> axes;
  int64_t total = 1;
  std::mutex mutex;
  std::condition_variable changed;
  bool aborted = false;
  std::map<Key, Slot> slots;
  /// Collectives issued so far per (rank, axis index).
  std::map<std::pair<int64_t, size_t>, int64_t> issued;
};

} // namespace loom::interp

#endif // LOOM_LIB_INTERP_SIMULATEDMESH_H
