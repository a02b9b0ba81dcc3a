//===- Mesh.cpp - Where a rank stands on the mesh; shards and back --------===//
//
// See loomrt/Mesh.h. A rank's coordinates come from its rank in the world
// (row-major over the axes, PlanMesh::coordinate). With one axis larger
// than 1 the world is that axis's communicator; with more, MeshComms
// splits the world once per such axis, and a collective over an axis
// (a plan step, the gather of a shard) goes over its communicator.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Mesh.h"

#include "loomrt/Artifact.h"

#include "Support.h"

#include <algorithm>
#include <cstring>

namespace loomrt {

using detail::formatShape;
using detail::quoteName;

uint64_t shardElements(uint64_t elements, int64_t ranks) noexcept {
  uint64_t n = ranks < 1 ? 1 : static_cast<uint64_t>(ranks);
  return elements / n + (elements % n != 0);
}

namespace {

bool rankInRange(int64_t ranks, int64_t rank, std::string *error) {
  if (ranks >= 1 && rank >= 0 && rank < ranks)
    return true;
  *error = "rank " + std::to_string(rank) + " is not in [0, " +
           std::to_string(ranks) + ")";
  return false;
}

/// A tensor of `shape` seen around dimension `dim` as [outer, D, inner]:
/// D is `groups` groups of `ranks` blocks of `block` indices each, and one
/// index along `dim` spans `rowBytes` bytes.
struct DimBlocks {
  uint64_t outer = 1, size = 0, groups = 1, ranks = 1, block = 0, rowBytes = 0;
  uint64_t wholeBytes() const { return outer * size * rowBytes; }
  uint64_t shardBytes() const { return outer * (size / ranks) * rowBytes; }
};

bool dimBlocks(const std::vector<int64_t> &shape, DType dtype, int64_t ranks,
               int64_t dim, int64_t groups, DimBlocks *out,
               std::string *error) {
  if (ranks < 1) {
    *error = std::to_string(ranks) + " ranks";
    return false;
  }
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) {
    *error = "dimension " + std::to_string(dim) + " is not a dimension of " +
             formatShape(shape);
    return false;
  }
  int64_t size = shape[static_cast<size_t>(dim)];
  if (groups < 1 || size % groups != 0 || (size / groups) % ranks != 0) {
    *error = "dimension " + std::to_string(dim) + " of " + formatShape(shape) +
             " (" + std::to_string(size) + ") does not split into " +
             std::to_string(groups) + " group(s) of " + std::to_string(ranks) +
             " equal blocks";
    return false;
  }
  std::vector<int64_t> inner(shape.begin() + dim + 1, shape.end());
  std::optional<uint64_t> wholeBytes = checkedByteSize(dtype, shape);
  std::optional<uint64_t> rowBytes = checkedByteSize(dtype, inner);
  if (!wholeBytes || !rowBytes) {
    *error = describeTensorType(dtype, shape) + " overflows a 64-bit size";
    return false;
  }
  DimBlocks b;
  for (int64_t i = 0; i < dim; ++i)
    b.outer *= static_cast<uint64_t>(shape[static_cast<size_t>(i)]);
  b.size = static_cast<uint64_t>(size);
  b.groups = static_cast<uint64_t>(groups);
  b.ranks = static_cast<uint64_t>(ranks);
  b.block = b.size / b.groups / b.ranks;
  b.rowBytes = *rowBytes;
  *out = b;
  return true;
}

} // namespace

bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank,
                NpyArray *shard, std::string *error) noexcept {
  try {
    if (!rankInRange(ranks, rank, error))
      return false;
    size_t size = dtypeSize(whole.dtype);
    uint64_t elements = size ? whole.data.size() / size : 0;
    uint64_t k = shardElements(elements, ranks);
    uint64_t first = std::min(elements, uint64_t(rank) * k);
    uint64_t count = std::min(elements - first, k);
    NpyArray out;
    out.dtype = whole.dtype;
    out.shape = {static_cast<int64_t>(k)};
    out.data.assign(k * size, 0); // the padding is zeros
    if (count)
      std::memcpy(out.data.data(), whole.data.data() + first * size,
                  count * size);
    *shard = std::move(out);
    return true;
  } catch (...) {
    *error = "out of memory slicing a shard";
  }
  return false;
}

bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank, int64_t dim,
                int64_t groups, NpyArray *shard, std::string *error) noexcept {
  try {
    if (dim < 0) {
      if (groups != 1) {
        *error = std::to_string(groups) +
                 " groups without a dimension: a flat shard has one group";
        return false;
      }
      return sliceShard(whole, ranks, rank, shard, error);
    }
    if (!rankInRange(ranks, rank, error))
      return false;
    DimBlocks b;
    if (!dimBlocks(whole.shape, whole.dtype, ranks, dim, groups, &b, error))
      return false;
    if (whole.data.size() != b.wholeBytes()) {
      *error = describeTensorType(whole.dtype, whole.shape) + " holds " +
               std::to_string(whole.data.size()) + " bytes, not " +
               std::to_string(b.wholeBytes());
      return false;
    }
    NpyArray out;
    out.dtype = whole.dtype;
    out.shape = whole.shape;
    out.shape[static_cast<size_t>(dim)] /= ranks;
    out.data.resize(b.shardBytes());
    // Row o of the outer dimensions, group g: the rank's block of the
    // group, `block` consecutive indices along `dim`.
    const uint64_t local = b.size / b.ranks, bytes = b.block * b.rowBytes;
    for (uint64_t o = 0; o < b.outer; ++o)
      for (uint64_t g = 0; g < b.groups; ++g) {
        uint64_t from = o * b.size + (g * b.ranks + uint64_t(rank)) * b.block;
        uint64_t to = o * local + g * b.block;
        if (bytes)
          std::memcpy(out.data.data() + to * b.rowBytes,
                      whole.data.data() + from * b.rowBytes, bytes);
      }
    *shard = std::move(out);
    return true;
  } catch (...) {
    *error = "out of memory slicing a shard";
  }
  return false;
}

bool sliceShard(const NpyArray &whole, const BindingShard &shard, int64_t rank,
                NpyArray *out, std::string *error) noexcept {
  return sliceShard(whole, shard.ranks, rank, shard.dim, shard.groups, out,
                    error);
}

bool joinShards(const NpyArray &gathered, const std::vector<int64_t> &shape,
                NpyArray *whole, std::string *error) noexcept {
  try {
    std::optional<uint64_t> bytes = checkedByteSize(gathered.dtype, shape);
    if (!bytes || *bytes > gathered.data.size()) {
      *error = "the gathered shards hold " +
               std::to_string(gathered.data.size()) + " bytes, fewer than " +
               describeTensorType(gathered.dtype, shape);
      return false;
    }
    NpyArray out;
    out.dtype = gathered.dtype;
    out.shape = shape;
    out.data.assign(gathered.data.begin(), gathered.data.begin() + *bytes);
    *whole = std::move(out);
    return true;
  } catch (...) {
    *error = "out of memory joining shards";
  }
  return false;
}

bool joinShards(const NpyArray &gathered, const std::vector<int64_t> &shape,
                int64_t ranks, int64_t dim, int64_t groups, NpyArray *whole,
                std::string *error) noexcept {
  try {
    if (dim < 0)
      return joinShards(gathered, shape, whole, error);
    DimBlocks b;
    if (!dimBlocks(shape, gathered.dtype, ranks, dim, groups, &b, error))
      return false;
    if (gathered.data.size() != b.wholeBytes()) {
      *error = "the gathered shards hold " +
               std::to_string(gathered.data.size()) + " bytes, not the " +
               std::to_string(b.wholeBytes()) + " of " +
               describeTensorType(gathered.dtype, shape);
      return false;
    }
    NpyArray out;
    out.dtype = gathered.dtype;
    out.shape = shape;
    out.data.resize(b.wholeBytes());
    // Rank s's buffer is the s-th of `ranks` equal parts of `gathered`;
    // its group g of row o goes back to block s of that group.
    const uint64_t local = b.size / b.ranks, bytes = b.block * b.rowBytes;
    for (uint64_t s = 0; s < b.ranks; ++s) {
      const uint8_t *shard = gathered.data.data() + s * b.shardBytes();
      for (uint64_t o = 0; o < b.outer; ++o)
        for (uint64_t g = 0; g < b.groups; ++g) {
          uint64_t from = o * local + g * b.block;
          uint64_t to = o * b.size + (g * b.ranks + s) * b.block;
          if (bytes)
            std::memcpy(out.data.data() + to * b.rowBytes,
                        shard + from * b.rowBytes, bytes);
        }
    }
    *whole = std::move(out);
    return true;
  } catch (...) {
    *error = "out of memory joining shards";
  }
  return false;
}

bool joinShards(const NpyArray &gathered, const BindingShard &shard,
                NpyArray *whole, std::string *error) noexcept {
  return joinShards(gathered, shard.shape, shard.ranks, shard.dim, shard.groups,
                    whole, error);
}

bool entryUsesMesh(const Plan &plan, const PlanEntry &entry) noexcept {
  if (!plan.mesh)
    return false;
  for (const PlanStep &step : entry.steps)
    if (step.kind == PlanStep::Kind::Collective && step.collective.ranks > 1)
      return true;
  for (const std::vector<Binding> *list : {&entry.inputs, &entry.outputs})
    for (const Binding &b : *list)
      if (b.shard && b.shard->ranks > 1)
        return true;
  return false;
}

bool checkMeshWorld(const Plan &plan, const Collectives *comm,
                    const std::string &who, std::string *error,
                    ErrorCode *code) noexcept {
  detail::ErrorSink sink{error, code};
  try {
    if (!plan.mesh) {
      sink.ok();
      return true;
    }
    const PlanMesh &mesh = *plan.mesh;
    int64_t world = comm ? comm->size() : 1;
    if (world != mesh.size()) {
      std::string ranks = std::to_string(mesh.size());
      sink.set(ErrorCode::InvalidArgument,
               who + " was compiled for " + ranks +
                   (mesh.size() == 1 ? " rank" : " ranks") + " (mesh " +
                   mesh.describe() + "); this run has " +
                   std::to_string(world) +
                   (world == 1 ? " process" : " processes") +
                   (mesh.size() == 1 ? ": run it as one process, without mpirun"
                                     : ": launch it with mpirun -np " + ranks));
      return false;
    }
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory(who);
  }
  return false;
}

int64_t meshIndex(const Plan &plan, uint32_t axis,
                  const Collectives *comm) noexcept {
  if (!plan.mesh || axis >= plan.mesh->shape.size() ||
      plan.mesh->shape[axis] == 1 || !comm)
    return 0;
  return plan.mesh->coordinate(comm->rank(), axis);
}

DataParallelPlace dataParallelPlace(const Plan &plan,
                                    const Collectives *comm) noexcept {
  DataParallelPlace place;
  int axis = plan.mesh ? plan.mesh->axisIndex("dp") : -1;
  if (axis < 0)
    return place;
  place.ranks = plan.mesh->shape[static_cast<size_t>(axis)];
  place.index = meshIndex(plan, static_cast<uint32_t>(axis), comm);
  return place;
}

//===----------------------------------------------------------------------===//
// MeshComms
//===----------------------------------------------------------------------===//

MeshComms::MeshComms() = default;
MeshComms::~MeshComms() = default;
MeshComms::MeshComms(MeshComms &&) noexcept = default;
MeshComms &MeshComms::operator=(MeshComms &&) noexcept = default;

bool MeshComms::build(const Plan &plan, Collectives *world,
                      const std::string &who, std::string *error,
                      ErrorCode *code) noexcept {
  detail::ErrorSink sink{error, code};
  try {
    // The split ones of an earlier build go first (before a world that
    // may be going too).
    owned.clear();
    axes.clear();
    coordinates.clear();
    world_ = world;
    if (!plan.mesh) {
      sink.ok();
      return true;
    }
    const PlanMesh &mesh = *plan.mesh;
    const size_t n = mesh.shape.size();
    axes.assign(n, nullptr);
    coordinates.assign(n, 0);
    // A world that does not fit the mesh gets no communicators: what
    // would use them fails naming what is wrong (checkMeshWorld).
    if (!world || world->size() != mesh.size()) {
      sink.ok();
      return true;
    }
    for (uint32_t a = 0; a < n; ++a)
      coordinates[a] = meshIndex(plan, a, world);
    if (mesh.axesLargerThanOne() <= 1) {
      for (uint32_t a = 0; a < n; ++a)
        if (mesh.shape[a] > 1)
          axes[a] = world;
      sink.ok();
      return true;
    }
    // One split per axis larger than 1, in axis order on every rank: the
    // ranks whose coordinates differ on this axis alone share a color
    // (this rank's with its coordinate on the axis zeroed), ranked by
    // their coordinate on it.
    const int rank = world->rank();
    for (uint32_t a = 0; a < n; ++a) {
      if (mesh.shape[a] == 1)
        continue;
      int64_t color = rank - coordinates[a] * mesh.stride(a);
      std::string why;
      std::unique_ptr<Collectives> comm = world->split(
          static_cast<int>(color), static_cast<int>(coordinates[a]), &why);
      if (!comm) {
        sink.set(
            ErrorCode::Unsupported,
            who + " was compiled for the mesh " + mesh.describe() +
                ", which needs a communicator per axis larger than 1: " + why);
        owned.clear();
        axes.assign(n, nullptr);
        return false;
      }
      if (comm->size() != mesh.shape[a] || comm->rank() != coordinates[a]) {
        sink.set(ErrorCode::IO,
                 who + ": the communicator of mesh axis " + mesh.axes[a] +
                     " has " + std::to_string(comm->size()) +
                     " ranks and this one is its rank " +
                     std::to_string(comm->rank()) + "; expected " +
                     std::to_string(mesh.shape[a]) + " and " +
                     std::to_string(coordinates[a]));
        owned.clear();
        axes.assign(n, nullptr);
        return false;
      }
      axes[a] = comm.get();
      owned.push_back(std::move(comm));
    }
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory(who);
  }
  return false;
}

Collectives *MeshComms::axis(uint32_t axis) const noexcept {
  return axis < axes.size() ? axes[axis] : nullptr;
}

int64_t MeshComms::index(uint32_t axis) const noexcept {
  return axis < coordinates.size() ? coordinates[axis] : 0;
}

//===----------------------------------------------------------------------===//
// Whole tensors and shards
//===----------------------------------------------------------------------===//

namespace {

/// Whether the world `comm` holds every rank of the plan's mesh, which a
/// tensor sharded over an axis larger than 1 needs.
bool shardWorldFits(const Plan &plan, const BindingShard &shard,
                    const Collectives *comm, const std::string &name,
                    std::string *error) {
  int64_t meshRanks = plan.mesh ? plan.mesh->size() : 1;
  if (shard.ranks > 1 && (!comm || comm->size() != meshRanks)) {
    *error = "tensor " + quoteName(name) + " is sharded over " + shard.axis +
             " (" + std::to_string(shard.ranks) + " ranks" +
             (meshRanks != shard.ranks && plan.mesh
                  ? " of the mesh " + plan.mesh->describe()
                  : std::string()) +
             "), but this run has " + std::to_string(comm ? comm->size() : 1) +
             " rank(s)";
    return false;
  }
  return true;
}

} // namespace

bool shardTensors(const Plan &plan, const Collectives *comm,
                  std::map<std::string, NpyArray> &tensors,
                  std::string *error) noexcept {
  try {
    for (const auto &[name, binding] : stateBindings(plan)) {
      auto it = tensors.find(name);
      if (!binding->shard || it == tensors.end())
        continue;
      const BindingShard &shard = *binding->shard;
      if (it->second.dtype != binding->dtype ||
          it->second.shape != shard.shape) {
        *error = "tensor " + quoteName(name) + " is " +
                 describeTensorType(it->second.dtype, it->second.shape) +
                 ", expected the whole " +
                 describeTensorType(binding->dtype, shard.shape) +
                 " to take this rank's shard of";
        return false;
      }
      if (!shardWorldFits(plan, shard, comm, name, error))
        return false;
      int64_t rank = meshIndex(plan, shard.axisIndex, comm);
      std::string why;
      if (!sliceShard(it->second, shard, rank, &it->second, &why)) {
        *error = "tensor " + quoteName(name) + ": " + why;
        return false;
      }
    }
    return true;
  } catch (...) {
    *error = "out of memory sharding the tensors";
  }
  return false;
}

bool gatherShard(const Plan &plan, const Binding &binding,
                 const MeshComms &comms, NpyArray &value,
                 std::string *error) noexcept {
  try {
    if (!binding.shard)
      return true;
    const BindingShard &shard = *binding.shard;
    if (!shardWorldFits(plan, shard, comms.world(), binding.name, error))
      return false;
    if (value.dtype != binding.dtype || value.shape != binding.shape) {
      *error = "tensor " + quoteName(binding.name) + " is " +
               describeTensorType(value.dtype, value.shape) +
               ", expected its " +
               describeTensorType(binding.dtype, binding.shape) + " shard";
      return false;
    }
    NpyArray gathered;
    gathered.dtype = value.dtype;
    std::string why;
    if (shard.ranks == 1) {
      gathered.data = value.data;
    } else {
      // Over the ranks that share every other coordinate with this one.
      Collectives *comm = comms.axis(shard.axisIndex);
      if (!comm) {
        *error = "gathering the shards of " + quoteName(binding.name) +
                 " over " + shard.axis + ": no communicator for the axis";
        return false;
      }
      gathered.data.resize(value.data.size() * size_t(shard.ranks));
      if (!waitFor(comm->allGather(value.data.data(), gathered.data.data(),
                                   value.data.size() / dtypeSize(value.dtype),
                                   value.dtype, &why),
                   &why)) {
        *error = "gathering the shards of " + quoteName(binding.name) +
                 " over " + shard.axis + ": " + why;
        return false;
      }
    }
    if (!joinShards(gathered, shard, &value, &why)) {
      *error = "tensor " + quoteName(binding.name) + ": " + why;
      return false;
    }
    return true;
  } catch (...) {
    *error = "out of memory gathering " + quoteName(binding.name);
  }
  return false;
}

bool gatherTensors(const Plan &plan, const MeshComms &comms,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept {
  try {
    // In name order on every rank: the all-gathers pair up.
    for (const auto &[name, binding] : stateBindings(plan)) {
      auto it = tensors.find(name);
      if (binding->shard && it != tensors.end() &&
          !gatherShard(plan, *binding, comms, it->second, error))
        return false;
    }
    return true;
  } catch (...) {
    *error = "out of memory gathering the tensors";
  }
  return false;
}

bool gatherShard(const Plan &plan, const Binding &binding, Collectives *comm,
                 NpyArray &value, std::string *error) noexcept {
  try {
    if (!binding.shard)
      return true;
    MeshComms comms;
    return comms.build(plan, comm, "gathering " + quoteName(binding.name),
                       error) &&
           gatherShard(plan, binding, comms, value, error);
  } catch (...) {
    *error = "out of memory gathering " + quoteName(binding.name);
  }
  return false;
}

bool gatherTensors(const Plan &plan, Collectives *comm,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept {
  try {
    MeshComms comms;
    return comms.build(plan, comm, "gathering the tensors", error) &&
           gatherTensors(plan, comms, tensors, error);
  } catch (...) {
    *error = "out of memory gathering the tensors";
  }
  return false;
}

} // namespace loomrt
