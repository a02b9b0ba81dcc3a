//===- SimulatedMesh.cpp - The ranks of a mesh, in one process ------------===//

#include "SimulatedMesh.h"

#include <chrono>

using namespace loom;
using namespace loom::interp;

/// A rank that waits longer than this for the others reports a hang (every
/// rank runs the same straight-line program, so none should take long).
constexpr auto kExchangeTimeout = std::chrono::minutes(10);

SimulatedMesh::SimulatedMesh(std::vector<MeshAxis> meshAxes)
    : axes(std::move(meshAxes)) {
  for (const MeshAxis &a : axes)
    total *= a.size;
}

int64_t SimulatedMesh::axisSize(llvm::StringRef axis) const {
  for (const MeshAxis &a : axes)
    if (a.name == axis)
      return a.size;
  return 0;
}

int64_t SimulatedMesh::coordinate(int64_t rank, llvm::StringRef axis) const {
  // Row-major: the last axis varies fastest.
  int64_t stride = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (axes[i].name == axis)
      return (rank / stride) % axes[i].size;
    stride *= axes[i].size;
  }
  return 0;
}

std::optional<std::vector<std::vector<double>>>
SimulatedMesh::exchange(int64_t rank, llvm::StringRef axis,
                        const std::string &what, std::vector<double> mine,
                        std::string &error) {
  size_t index = axes.size();
  int64_t stride = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (axes[i].name == axis) {
      index = i;
      break;
    }
    stride *= axes[i].size;
  }
  if (index == axes.size()) {
    error = "axis '" + axis.str() + "' is not in the mesh";
    return std::nullopt;
  }
  int64_t n = axes[index].size;
  int64_t coord = (rank / stride) % n;
  int64_t first = rank - coord * stride;

  std::unique_lock<std::mutex> lock(mutex);
  int64_t seq = issued[{rank, index}]++;
  Key key{index, first, seq};
  Slot &slot = slots[key];
  if (slot.values.empty()) {
    slot.values.resize(n);
    slot.what = what;
  } else if (slot.what != what && slot.mismatch.empty()) {
    slot.mismatch = "collective #" + std::to_string(seq) + " over '" +
                    axis.str() + "': rank " + std::to_string(rank) +
                    " issues " + what + " where another rank issues " +
                    slot.what;
  }
  slot.values[coord] = std::move(mine);
  ++slot.deposited;
  changed.notify_all();
  bool done = changed.wait_for(lock, kExchangeTimeout, [&] {
    return aborted || slot.deposited == n;
  });
  if (aborted) {
    error = "another rank failed";
    return std::nullopt;
  }
  if (!done) {
    error = "rank " + std::to_string(rank) + " waited too long for the "
            "other ranks at collective #" + std::to_string(seq) +
            " over '" + axis.str() + "' (" + what + ")";
    return std::nullopt;
  }
  std::optional<std::vector<std::vector<double>>> result;
  if (!slot.mismatch.empty()) {
    error = slot.mismatch;
  } else {
    result.emplace();
    for (const std::optional<std::vector<double>> &v : slot.values)
      result->push_back(*v);
  }
  if (++slot.taken == n)
    slots.erase(key);
  return result;
}

void SimulatedMesh::abort() {
  std::lock_guard<std::mutex> lock(mutex);
  aborted = true;
  changed.notify_all();
}
