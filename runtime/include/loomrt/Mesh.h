//===- Mesh.h - Running a plan compiled for several ranks -------*- C++ -*-===//
//
// A plan with a `mesh` (docs/plan-format.md) was compiled for a number of
// ranks: its collective steps move data between them and its sharded
// bindings hold one rank's slice of a tensor. This header says whether a
// process can run such a plan with a given Collectives, where it stands on
// the mesh, and how whole tensors (params.safetensors, checkpoints, what
// the trainer hands its callers) become a rank's shards and back. Files
// never hold shards: a checkpoint is the same whatever the world size.
//
// Nothing here throws; every failure is `false` plus a message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_MESH_H
#define LOOMRT_MESH_H

#include "loomrt/ErrorCode.h"
#include "loomrt/Npy.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loomrt {

class Collectives;

/// The elements of each rank's shard of `elements` over `ranks` ranks:
/// ceil(elements / ranks).
uint64_t shardElements(uint64_t elements, int64_t ranks) noexcept;

/// Rank `rank`'s shard of `whole` (any dtype and shape) over `ranks`
/// ranks: elements [rank * k, (rank + 1) * k) of its row-major flattening,
/// zero past its end, as a 1-D [k] array of its dtype.
bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank,
                NpyArray *shard, std::string *error) noexcept;

/// The inverse: `gathered` holds every rank's shard in rank order (ranks *
/// k elements, as an all-gather leaves them); `*whole` is its first
/// product(`shape`) elements, shaped `shape` (the padding dropped).
bool joinShards(const NpyArray &gathered, const std::vector<int64_t> &shape,
                NpyArray *whole, std::string *error) noexcept;

/// Whether `entry` communicates: a collective step or a sharded binding
/// over a mesh axis larger than 1. Other entries run on any one process.
bool entryUsesMesh(const Plan &plan, const PlanEntry &entry) noexcept;

/// Whether `comm` (null: this process alone) can run what uses the plan's
/// mesh: at most one axis larger than 1 (Unsupported otherwise), and as
/// many ranks as the mesh has (InvalidArgument: "`who` was compiled for 2
/// ranks (mesh dp=2); this run has 1 process: launch it with mpirun -np
/// 2"). A plan without a mesh fits any `comm`.
bool checkMeshWorld(const Plan &plan, const Collectives *comm,
                    const std::string &who, std::string *error,
                    ErrorCode *code = nullptr) noexcept;

/// This process's index along mesh axis `axis`: 0 on an axis of size 1,
/// else `comm`'s rank (the one axis larger than 1 spans every rank).
/// Assumes checkMeshWorld passed.
int64_t meshIndex(const Plan &plan, uint32_t axis,
                  const Collectives *comm) noexcept;

/// Whole tensors (every param, buffer and state tensor of the plan, as
/// files hold them) to what this rank's entries take: each tensor whose
/// binding is sharded becomes this rank's shard. Names the plan does not
/// shard are left alone. Assumes checkMeshWorld passed.
bool shardTensors(const Plan &plan, const Collectives *comm,
                  std::map<std::string, NpyArray> &tensors,
                  std::string *error) noexcept;

/// The inverse: each sharded tensor all-gathered over its axis and joined
/// into the whole tensor. A collective over `comm` when the plan shards
/// over an axis larger than 1: every rank calls it, with the same names.
bool gatherTensors(const Plan &plan, Collectives *comm,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept;

/// The same for one value of `binding` (an entry's output): `value` becomes
/// the whole tensor when the binding is sharded.
bool gatherShard(const Plan &plan, const Binding &binding, Collectives *comm,
                 NpyArray &value, std::string *error) noexcept;

} // namespace loomrt

#endif // LOOMRT_MESH_H
