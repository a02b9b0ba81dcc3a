//===- Mesh.cpp - Where a rank stands on the mesh; shards and back --------===//
//
// See loomrt/Mesh.h. Only one mesh axis may be larger than 1 today, so a
// rank's index along it is its rank in the world, and every collective
// here spans the world's Collectives.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Mesh.h"

#include "loomrt/Artifact.h"
#include "loomrt/Collectives.h"

#include "Support.h"

#include <algorithm>
#include <cstring>

namespace loomrt {

using detail::quoteName;

uint64_t shardElements(uint64_t elements, int64_t ranks) noexcept {
  uint64_t n = ranks < 1 ? 1 : static_cast<uint64_t>(ranks);
  return elements / n + (elements % n != 0);
}

bool sliceShard(const NpyArray &whole, int64_t ranks, int64_t rank,
                NpyArray *shard, std::string *error) noexcept {
  try {
    if (ranks < 1 || rank < 0 || rank >= ranks) {
      *error = "rank " + std::to_string(rank) + " is not in [0, " +
               std::to_string(ranks) + ")";
      return false;
    }
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
    if (mesh.axesLargerThanOne() > 1) {
      sink.set(ErrorCode::Unsupported,
               who + " was compiled for the mesh " + mesh.describe() +
                   ": a mesh of more than one axis larger than 1 needs a "
                   "communicator per axis, which this runtime does not "
                   "build yet; it is not supported yet");
      return false;
    }
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
  return comm->rank();
}

namespace {

/// The shard of `binding` this process holds: its index and the ranks.
bool shardPosition(const Plan &plan, const BindingShard &shard,
                   const Collectives *comm, const std::string &name,
                   int64_t *rank, std::string *error) {
  if (shard.ranks > 1 && (!comm || comm->size() != shard.ranks)) {
    *error = "tensor " + quoteName(name) + " is sharded over " + shard.axis +
             " (" + std::to_string(shard.ranks) + " ranks), but this run has " +
             std::to_string(comm ? comm->size() : 1) + " rank(s)";
    return false;
  }
  *rank = meshIndex(plan, shard.axisIndex, comm);
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
      int64_t rank = 0;
      std::string why;
      if (!shardPosition(plan, shard, comm, name, &rank, error) ||
          !sliceShard(it->second, shard.ranks, rank, &it->second, &why)) {
        if (!why.empty())
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

bool gatherShard(const Plan &plan, const Binding &binding, Collectives *comm,
                 NpyArray &value, std::string *error) noexcept {
  try {
    if (!binding.shard)
      return true;
    const BindingShard &shard = *binding.shard;
    int64_t rank = 0;
    if (!shardPosition(plan, shard, comm, binding.name, &rank, error))
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
    gathered.data.resize(value.data.size() * size_t(shard.ranks));
    std::string why;
    if (shard.ranks == 1) {
      gathered.data = value.data;
    } else if (!waitFor(
                   comm->allGather(value.data.data(), gathered.data.data(),
                                   value.data.size() / dtypeSize(value.dtype),
                                   value.dtype, &why),
                   &why)) {
      *error = "gathering the shards of " + quoteName(binding.name) + " over " +
               shard.axis + ": " + why;
      return false;
    }
    if (!joinShards(gathered, shard.shape, &value, &why)) {
      *error = "tensor " + quoteName(binding.name) + ": " + why;
      return false;
    }
    return true;
  } catch (...) {
    *error = "out of memory gathering " + quoteName(binding.name);
  }
  return false;
}

bool gatherTensors(const Plan &plan, Collectives *comm,
                   std::map<std::string, NpyArray> &tensors,
                   std::string *error) noexcept {
  try {
    // In name order on every rank: the all-gathers pair up.
    for (const auto &[name, binding] : stateBindings(plan)) {
      auto it = tensors.find(name);
      if (binding->shard && it != tensors.end() &&
          !gatherShard(plan, *binding, comm, it->second, error))
        return false;
    }
    return true;
  } catch (...) {
    *error = "out of memory gathering the tensors";
  }
  return false;
}

} // namespace loomrt
