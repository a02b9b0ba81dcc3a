//===- Mesh.h - Running a plan compiled for several ranks -------*- C++ -*-===//
//
// A plan with a `mesh` (docs/plan-format.md) was compiled for a number of
// ranks: its collective steps move data between them and its sharded
// bindings hold one rank's slice of a tensor. This header says whether a
// process can run such a plan with a given Collectives, where it stands on
// the mesh, which communicator each mesh axis uses, and how whole tensors
// (params.safetensors, checkpoints, what the trainer hands its callers)
// become a rank's shards and back. Files never hold shards: a checkpoint
// is the same whatever the world size.
//
// Ranks number the places of the mesh row-major over its axes in plan
// order (the last axis fastest): on [dp=2, tp=2], rank = i_dp * 2 + i_tp.
// A collective over one axis runs among the ranks that share every other
// coordinate.
//
// Nothing here throws; every failure is `false` plus a message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_MESH_H
#define LOOMRT_MESH_H

#include "loomrt/Collectives.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/Npy.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

/// The elements of each rank's shard of `elements` over `ranks` ranks:
/// ceil(elements / ranks).
uint64_t shardElements(uint64_t elements, int64_t ranks) noexcept;

/// Rank `rank`'s flat shard of `whole` (any dtype and shape) over `ranks`
/// ranks: elements [rank * k, (rank + 1) * k) of its row-major flattening,
/// zero past its end, as a 1-D [k] array of its dtype.
bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank,
                NpyArray *shard, std::string *error) noexcept;

/// Rank `rank`'s shard of `whole` along dimension `dim` in `groups`
/// groups (BindingShard): dimension `dim` (size D) cut into `groups`
/// equal consecutive groups, each into `ranks` equal consecutive blocks,
/// and block `rank` of every group concatenated in group order, the other
/// dimensions whole: `whole`'s shape with D / ranks at `dim`. `dim` < 0:
/// the flat shard above (`groups` must then be 1). An error when `dim` is
/// not a dimension of `whole` or groups * ranks does not divide D.
bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank, int64_t dim,
                int64_t groups, NpyArray *shard, std::string *error) noexcept;

/// Rank `rank`'s shard of `whole` as `shard` describes it (flat or along a
/// dimension).
bool sliceShard(const NpyArray &whole, const BindingShard &shard, int64_t rank,
                NpyArray *out, std::string *error) noexcept;

/// The inverse of the flat form: `gathered` holds every rank's shard in
/// rank order (ranks * k elements, as an all-gather leaves them); `*whole`
/// is its first product(`shape`) elements, shaped `shape` (the padding
/// dropped).
bool joinShards(const NpyArray &gathered, const std::vector<int64_t> &shape,
                NpyArray *whole, std::string *error) noexcept;

/// The inverse of either form: `gathered` holds every rank's shard buffer
/// concatenated in rank order (as an all-gather leaves them); `*whole` is
/// the tensor of `shape` they are the shards of, each rank's blocks put
/// back in place along `dim` (`dim` < 0: the flat form above; `ranks` and
/// `groups` are then unused).
bool joinShards(const NpyArray &gathered, const std::vector<int64_t> &shape,
                int64_t ranks, int64_t dim, int64_t groups, NpyArray *whole,
                std::string *error) noexcept;

/// The same, as `shard` describes the shards.
bool joinShards(const NpyArray &gathered, const BindingShard &shard,
                NpyArray *whole, std::string *error) noexcept;

/// Whether `entry` communicates: a collective step or a sharded binding
/// over a mesh axis larger than 1. Other entries run on any one process.
bool entryUsesMesh(const Plan &plan, const PlanEntry &entry) noexcept;

/// Whether `comm` (null: this process alone) can run what uses the plan's
/// mesh: as many ranks as the mesh has (InvalidArgument: "`who` was
/// compiled for 2 ranks (mesh dp=2); this run has 1 process: launch it
/// with mpirun -np 2"). A plan without a mesh fits any `comm`. A mesh of
/// several axes larger than 1 also needs `comm` to split (MeshComms).
bool checkMeshWorld(const Plan &plan, const Collectives *comm,
                    const std::string &who, std::string *error,
                    ErrorCode *code = nullptr) noexcept;

/// This process's index along mesh axis `axis`: 0 on an axis of size 1 or
/// without `comm`, else its coordinate on the axis from `comm`'s rank
/// (PlanMesh::coordinate; `comm`'s rank itself when that axis is the only
/// one larger than 1). Assumes checkMeshWorld passed.
int64_t meshIndex(const Plan &plan, uint32_t axis,
                  const Collectives *comm) noexcept;

/// Where this process stands in a mesh plan's data parallelism: only the
/// mesh axis named "dp" splits the batch, so `ranks` is its size and
/// `index` this process's coordinate on it; 1 and 0 when the mesh has no
/// such axis (every rank of a tensor-parallel mesh takes the same
/// batches). Assumes checkMeshWorld passed.
struct DataParallelPlace {
  int64_t ranks = 1;
  int64_t index = 0;
};
DataParallelPlace dataParallelPlace(const Plan &plan,
                                    const Collectives *comm) noexcept;

/// The communicators of a plan's mesh axes over a world Collectives: for
/// each axis larger than 1, the ranks that share every other coordinate,
/// ranked by their coordinate on the axis. With at most one axis larger
/// than 1 that is the world itself and nothing is split; with more, each
/// is Collectives::split from the world (a collective: every rank builds
/// them, at the same point). The split ones are owned here and must go
/// before the world.
class MeshComms {
public:
  MeshComms();
  ~MeshComms();
  MeshComms(MeshComms &&) noexcept;
  MeshComms &operator=(MeshComms &&) noexcept;

  /// Builds them for `plan` over `world`. Null, or a world of another
  /// size than the mesh (which checkMeshWorld refuses): every axis without
  /// a communicator. Unsupported when the world cannot split ("`who` was
  /// compiled for the mesh dp=2, tp=2, which needs a communicator per axis
  /// larger than 1: ...").
  bool build(const Plan &plan, Collectives *world, const std::string &who,
             std::string *error, ErrorCode *code = nullptr) noexcept;

  Collectives *world() const noexcept { return world_; }
  /// The communicator of mesh axis `axis`: null on an axis of size 1 (or
  /// without a world), where nothing moves between ranks.
  Collectives *axis(uint32_t axis) const noexcept;
  /// This process's coordinate on `axis` (0 without a world).
  int64_t index(uint32_t axis) const noexcept;

private:
  Collectives *world_ = nullptr;
  std::vector<Collectives *> axes;
  std::vector<int64_t> coordinates;
  std::vector<std::unique_ptr<Collectives>> owned;
};

/// Whole tensors (every param, buffer and state tensor of the plan, as
/// files hold them) to what this rank's entries take: each tensor whose
/// binding is sharded becomes this rank's shard (flat or along a
/// dimension). Names the plan does not shard are left alone. Moves
/// nothing between ranks. Assumes checkMeshWorld passed.
bool shardTensors(const Plan &plan, const Collectives *comm,
                  std::map<std::string, NpyArray> &tensors,
                  std::string *error) noexcept;

/// The inverse: each sharded tensor all-gathered over its axis's
/// communicator and joined into the whole tensor. A collective when the
/// plan shards over an axis larger than 1: every rank calls it, with the
/// same names.
bool gatherTensors(const Plan &plan, const MeshComms &comms,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept;

/// The same over the world `comm`: the axes' communicators are built for
/// the call (MeshComms::build, which splits the world each time when the
/// mesh has several axes larger than 1: keep a MeshComms, e.g.
/// Artifact::meshComms, where that recurs).
bool gatherTensors(const Plan &plan, Collectives *comm,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept;

/// The same for one value of `binding` (an entry's output): `value` becomes
/// the whole tensor when the binding is sharded.
bool gatherShard(const Plan &plan, const Binding &binding,
                 const MeshComms &comms, NpyArray &value,
                 std::string *error) noexcept;
bool gatherShard(const Plan &plan, const Binding &binding, Collectives *comm,
                 NpyArray &value, std::string *error) noexcept;

} // namespace loomrt

#endif // LOOMRT_MESH_H
