//===- CollectiveSteps.cpp - A run's collective steps, overlapped ---------===//
//
// See CollectiveSteps.h. One handler per op and kind of collectives, each
// over the communicator of its step's mesh axis (MeshComms, DeviceComms);
// parsePlan proved the element counts and that src and dst are disjoint
// (or, for an all_reduce, the same bytes), so nothing here checks them
// again.
//
//===----------------------------------------------------------------------===//

#include "CollectiveSteps.h"

#include "loomrt/Mesh.h"

#include "Support.h"

#include <cstring>

namespace loomrt {

using detail::quoteName;

namespace {

ReduceOp reduceOpOf(CollectiveReduce reduce) {
  switch (reduce) {
  case CollectiveReduce::Max:
    return ReduceOp::Max;
  case CollectiveReduce::Mean:
    return ReduceOp::Avg;
  case CollectiveReduce::Sum:
  case CollectiveReduce::None:
    break;
  }
  return ReduceOp::Sum;
}

} // namespace

const char *stepCollectivesName(StepCollectives kind) noexcept {
  switch (kind) {
  case StepCollectives::Host:
    return "mpi";
  case StepCollectives::Device:
    return "nccl";
  case StepCollectives::Auto:
    break;
  }
  return "auto";
}

bool stepCommunicates(const PlanStep &step) noexcept {
  return step.kind == PlanStep::Kind::Collective && step.collective.ranks > 1 &&
         step.collective.op != CollectiveOp::RankSlice;
}

bool entryCommunicates(const PlanEntry &entry) noexcept {
  for (const PlanStep &step : entry.steps)
    if (stepCommunicates(step))
      return true;
  return false;
}

bool usesDeviceCollectives(StepCollectives kind,
                           const Backend &backend) noexcept {
  return kind == StepCollectives::Device ||
         (kind == StepCollectives::Auto && !backend.hostArenas());
}

bool checkCollectiveBackend(const Plan &plan, const Backend &backend,
                            StepCollectives kind, const std::string &what,
                            std::string *error, ErrorCode *code) {
  detail::ErrorSink sink{error, code};
  std::string backendName(backend.name());
  if (usesDeviceCollectives(kind, backend)) {
    std::string why;
    if (kind == StepCollectives::Device &&
        !backend.deviceCollectivesAvailable(&why)) {
      sink.set(ErrorCode::Unsupported,
               what + ": collective steps over device collectives (NCCL) " +
                   "were asked for, but " +
                   (backend.hostArenas()
                        ? "the " + backendName +
                              " backend has none: NCCL runs the collective "
                              "steps of cuda artifacts; on the " +
                              backendName +
                              " they run over host collectives (MPI: "
                              "loom-run --collectives=mpi or auto)"
                        : why));
      return false;
    }
    return true;
  }
  if (backend.hostArenas())
    return true;
  for (const PlanEntry &entry : plan.entries)
    for (size_t s = 0; s < entry.steps.size(); ++s) {
      const PlanStep &step = entry.steps[s];
      if (!stepCommunicates(step))
        continue;
      std::string op = collectiveOpName(step.collective.op);
      sink.set(ErrorCode::Unsupported,
               what + ": entry " + quoteName(entry.name) + ": step " +
                   std::to_string(s) +
                   " (collective): " + (op[0] == 'a' ? "an " : "a ") + op +
                   " over " + std::to_string(step.collective.ranks) +
                   " ranks cannot run over host collectives (MPI) on the " +
                   backendName +
                   " backend, whose arenas are device memory: run the "
                   "collective steps over NCCL (loom-run --collectives=nccl "
                   "or auto)");
      return false;
    }
  return true;
}

//===----------------------------------------------------------------------===//
// DeviceComms
//===----------------------------------------------------------------------===//

DeviceComms::DeviceComms() = default;
DeviceComms::~DeviceComms() = default;
DeviceComms::DeviceComms(DeviceComms &&) noexcept = default;
DeviceComms &DeviceComms::operator=(DeviceComms &&) noexcept = default;

bool DeviceComms::build(const Plan &plan, const MeshComms &host,
                        Backend &backend, double timeoutSeconds,
                        const std::string &who, std::string *error,
                        ErrorCode *code) noexcept {
  detail::ErrorSink sink{error, code};
  try {
    axes.clear();
    if (!plan.mesh) {
      sink.ok();
      return true;
    }
    const PlanMesh &mesh = *plan.mesh;
    std::vector<std::unique_ptr<Collectives>> made(mesh.shape.size());
    // In axis order on every rank: each start is a collective over the
    // axis's host communicator.
    for (uint32_t a = 0; a < mesh.shape.size(); ++a) {
      if (mesh.shape[a] == 1)
        continue;
      Collectives *bootstrap = host.axis(a);
      if (!bootstrap) {
        sink.set(ErrorCode::InvalidArgument,
                 who + ": mesh axis " + mesh.axes[a] +
                     " has no communicator to start " +
                     std::string(backend.name()) +
                     " device collectives over (one process?)");
        return false;
      }
      std::string why;
      made[a] =
          backend.startDeviceCollectives(*bootstrap, timeoutSeconds, &why);
      if (!made[a]) {
        sink.set(ErrorCode::IO,
                 who +
                     ": starting the device collectives (NCCL) of mesh "
                     "axis " +
                     mesh.axes[a] + " (" + std::to_string(mesh.shape[a]) +
                     " ranks) on the " + std::string(backend.name()) +
                     " backend: " + why);
        return false;
      }
      if (made[a]->size() != mesh.shape[a] ||
          made[a]->rank() != bootstrap->rank()) {
        sink.set(ErrorCode::IO,
                 who + ": the device communicator of mesh axis " +
                     mesh.axes[a] + " has " + std::to_string(made[a]->size()) +
                     " ranks and this one is its rank " +
                     std::to_string(made[a]->rank()) + "; expected " +
                     std::to_string(mesh.shape[a]) + " and " +
                     std::to_string(bootstrap->rank()));
        return false;
      }
    }
    axes = std::move(made);
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory(who);
  }
  return false;
}

Collectives *DeviceComms::axis(uint32_t axis) const noexcept {
  return axis < axes.size() ? axes[axis].get() : nullptr;
}

void DeviceComms::set(uint32_t axis, std::unique_ptr<Collectives> comm) {
  if (axes.size() <= axis)
    axes.resize(axis + 1);
  axes[axis] = std::move(comm);
}

//===----------------------------------------------------------------------===//
// CollectiveSteps
//===----------------------------------------------------------------------===//

CollectiveSteps::CollectiveSteps(const Plan &plan, const PlanEntry &entry,
                                 Backend &backend, Arena &arena,
                                 const MeshComms *comms, bool blocking,
                                 CollectiveTimes *times,
                                 const DeviceComms *device,
                                 GradientCompression *compression)
    : plan(plan), entry(entry), backend(backend), arena(arena), comms(comms),
      deviceComms(device), blocking(blocking), times(times),
      compression(compression) {}

CollectiveSteps::~CollectiveSteps() {
  std::string ignored;
  for (Pending &p : pending)
    p.request->wait(&ignored);
}

void *CollectiveSteps::host(uint32_t buffer) {
  return backend.hostAddress(arena, entry.buffers[buffer].offset);
}

void *CollectiveSteps::device(uint32_t buffer) {
  return backend.deviceAddress(arena, entry.buffers[buffer].offset);
}

std::string CollectiveSteps::describe(const PlanStep &step) const {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  std::string text = "collective step " +
                     std::to_string(&step - entry.steps.data()) + " (" +
                     collectiveOpName(c.op);
  if (c.reduce != CollectiveReduce::None)
    text += std::string(" ") + collectiveReduceName(c.reduce);
  return text + " of " + std::to_string(src.elements) + " " +
         std::string(dtypeToShortName(src.dtype)) + " over " +
         plan.mesh->axes[c.axis] + ", " + std::to_string(c.ranks) + " ranks)";
}

bool CollectiveSteps::beforeStep(const PlanStep &step, std::string *error) {
  if (pending.empty())
    return true;
  for (uint32_t id : stepBuffers(step)) {
    const PlanBuffer &b = entry.buffers[id];
    if (!waitForBytes(b.offset, b.bytes, error))
      return false;
  }
  return true;
}

bool CollectiveSteps::waitForBytes(uint64_t offset, uint64_t bytes,
                                   std::string *error) {
  if (bytes == 0)
    return true;
  for (size_t i = 0; i < pending.size();) {
    const Pending &p = pending[i];
    if (!p.streamOrdered && (p.src.overlaps(offset, offset + bytes) ||
                             p.dst.overlaps(offset, offset + bytes))) {
      if (!complete(i, error))
        return false;
    } else {
      ++i;
    }
  }
  return true;
}

bool CollectiveSteps::complete(size_t i, std::string *error) {
  std::string why;
  auto waitBegin = std::chrono::steady_clock::now();
  bool ok = pending[i].request->wait(&why);
  if (times) {
    auto now = std::chrono::steady_clock::now();
    times->waitedSeconds +=
        std::chrono::duration<double>(now - waitBegin).count();
    times->inFlightSeconds +=
        std::chrono::duration<double>(now - pending[i].issued).count();
  }
  if (!ok)
    *error = pending[i].what + ": " + why;
  pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
  return ok;
}

bool CollectiveSteps::afterStep(std::string *error) {
  // The stream runs its collectives in issue order: once one of them is
  // not done, the later ones are not either (no need to ask each after
  // every step).
  bool streamBusy = false;
  for (size_t i = 0; i < pending.size();) {
    if (pending[i].streamOrdered && streamBusy) {
      ++i;
      continue;
    }
    bool done = false;
    std::string why;
    if (!pending[i].request->test(&done, &why)) {
      *error = pending[i].what + ": " + why;
      return false;
    }
    // Done: dropping it now spares later steps the overlap checks.
    if (done) {
      if (!complete(i, error))
        return false;
    } else {
      streamBusy |= pending[i].streamOrdered;
      ++i;
    }
  }
  return true;
}

bool CollectiveSteps::finish(std::string *error) {
  while (!pending.empty())
    if (!complete(0, error))
      return false;
  return true;
}

bool CollectiveSteps::issue(const PlanStep &step, std::string *error) {
  const CollectiveStep &c = step.collective;
  // Device collectives where there are any for the axis: only axes larger
  // than 1 get them (DeviceComms::build), but a test may set one of one
  // rank, whose ops then go through it (they give what a copy gives).
  if (Collectives *dev = deviceComms ? deviceComms->axis(c.axis) : nullptr;
      dev && c.op != CollectiveOp::RankSlice) {
    switch (c.op) {
    case CollectiveOp::AllReduce:
      return deviceAllReduce(step, *dev, error);
    case CollectiveOp::ReduceScatter:
      return deviceReduceScatter(step, *dev, error);
    case CollectiveOp::AllGather:
      return deviceAllGather(step, *dev, error);
    case CollectiveOp::RankSlice:
      break;
    }
  }
  // Artifact checked the rest (checkMeshWorld, checkCollectiveBackend); a
  // caller that did not gets a message, not a crash.
  Collectives *comm = comms ? comms->axis(c.axis) : nullptr;
  if (stepCommunicates(step) && (!comm || !backend.hostArenas())) {
    *error =
        describe(step) + ": " +
        (!comm ? "no Collectives for the ranks"
         : deviceComms
             ? "no device collectives for mesh axis " + plan.mesh->axes[c.axis]
             : "the backend's memory is not the host's, and the step "
               "has no device collectives");
    return false;
  }
  // A gradient's reduction under compression: compressed where the
  // method applies, else exact (its bytes counted either way).
  if (compression && !c.grad.empty() && stepCommunicates(step)) {
    if (compression->compresses(step))
      return compressedReduce(step, *comm, error);
    compression->countExact(entry.buffers[c.src]);
  }
  // Over an axis of one rank nothing communicates: each op is a copy.
  if (c.ranks == 1 && c.op != CollectiveOp::RankSlice)
    return localCopy(step, 0, error);
  switch (c.op) {
  case CollectiveOp::AllReduce:
    return allReduce(step, *comm, error);
  case CollectiveOp::ReduceScatter:
    return reduceScatter(step, *comm, error);
  case CollectiveOp::AllGather:
    return allGather(step, *comm, error);
  case CollectiveOp::RankSlice:
    return rankSlice(step, error);
  }
  *error = "unknown collective op";
  return false;
}

bool CollectiveSteps::localCopy(const PlanStep &step, uint64_t srcSkip,
                                std::string *error) {
  const PlanBuffer &src = entry.buffers[step.collective.src];
  const PlanBuffer &dst = entry.buffers[step.collective.dst];
  if (src.offset + srcSkip == dst.offset || dst.bytes == 0)
    return true; // in place
  return backend.copy(arena, src.offset + srcSkip, dst.offset, dst.bytes,
                      error);
}

bool CollectiveSteps::track(const PlanStep &step,
                            std::unique_ptr<Request> request,
                            const std::string *why, std::string *error,
                            bool streamOrdered) {
  std::string what = describe(step);
  if (!request) {
    *error = what + ": " + *why;
    return false;
  }
  const PlanBuffer &src = entry.buffers[step.collective.src];
  const PlanBuffer &dst = entry.buffers[step.collective.dst];
  pending.push_back(Pending{std::move(request),
                            streamOrdered,
                            {src.offset, src.offset + src.bytes},
                            {dst.offset, dst.offset + dst.bytes},
                            std::move(what),
                            std::chrono::steady_clock::now()});
  if (times)
    ++times->calls;
  return !blocking || complete(pending.size() - 1, error);
}

bool CollectiveSteps::allReduce(const PlanStep &step, Collectives &comm,
                                std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  const PlanBuffer &dst = entry.buffers[c.dst];
  // Collectives reduce in place: src's values go to dst first. The host
  // reads and writes the arena from here on.
  if (!backend.synchronize(error))
    return false;
  if (src.offset != dst.offset)
    std::memcpy(host(c.dst), host(c.src), dst.bytes);
  std::string why;
  return track(step,
               comm.allReduce(host(c.dst), dst.elements, dst.dtype,
                              reduceOpOf(c.reduce), &why),
               &why, error);
}

bool CollectiveSteps::reduceScatter(const PlanStep &step, Collectives &comm,
                                    std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &dst = entry.buffers[c.dst];
  if (!backend.synchronize(error))
    return false;
  std::string why;
  return track(step,
               comm.reduceScatter(host(c.src), host(c.dst), dst.elements,
                                  dst.dtype, reduceOpOf(c.reduce), &why),
               &why, error);
}

bool CollectiveSteps::allGather(const PlanStep &step, Collectives &comm,
                                std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  if (!backend.synchronize(error))
    return false;
  std::string why;
  return track(
      step,
      comm.allGather(host(c.src), host(c.dst), src.elements, src.dtype, &why),
      &why, error);
}

// Device collectives: the backend's stream runs them after the steps
// before and before the steps after, so nothing is synchronized here.

bool CollectiveSteps::deviceAllReduce(const PlanStep &step, Collectives &comm,
                                      std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  const PlanBuffer &dst = entry.buffers[c.dst];
  // In place, like every Collectives all-reduce: src's values to dst
  // first, a device-to-device copy on the same stream.
  if (src.offset != dst.offset &&
      !backend.copy(arena, src.offset, dst.offset, dst.bytes, error))
    return false;
  std::string why;
  return track(step,
               comm.allReduce(device(c.dst), dst.elements, dst.dtype,
                              reduceOpOf(c.reduce), &why),
               &why, error, /*streamOrdered=*/true);
}

bool CollectiveSteps::deviceReduceScatter(const PlanStep &step,
                                          Collectives &comm,
                                          std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &dst = entry.buffers[c.dst];
  std::string why;
  return track(step,
               comm.reduceScatter(device(c.src), device(c.dst), dst.elements,
                                  dst.dtype, reduceOpOf(c.reduce), &why),
               &why, error, /*streamOrdered=*/true);
}

bool CollectiveSteps::deviceAllGather(const PlanStep &step, Collectives &comm,
                                      std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  std::string why;
  return track(step,
               comm.allGather(device(c.src), device(c.dst), src.elements,
                              src.dtype, &why),
               &why, error, /*streamOrdered=*/true);
}

bool CollectiveSteps::compressedReduce(const PlanStep &step, Collectives &comm,
                                       std::string *error) {
  // Synchronous, after everything in flight: its own collectives go over
  // the same communicators, and MPI's hierarchical all-reduce wants no
  // other collective started while one of its stages is pending.
  if (!finish(error) || !backend.synchronize(error))
    return false;
  const CollectiveStep &c = step.collective;
  auto begin = std::chrono::steady_clock::now();
  std::string why;
  bool ok = compression->reduce(step, entry.buffers[c.src], host(c.src),
                                host(c.dst), comm, &why);
  if (times) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    ++times->calls;
    times->inFlightSeconds += seconds;
    times->waitedSeconds += seconds;
  }
  if (!ok)
    *error = describe(step) + ", compressed (" + compression->spec().text +
             "): " + why;
  return ok;
}

bool CollectiveSteps::rankSlice(const PlanStep &step, std::string *error) {
  const CollectiveStep &c = step.collective;
  // Block r of src: r * dst's bytes into it, r this rank's coordinate on
  // the step's axis.
  uint64_t r =
      c.ranks > 1 && comms ? static_cast<uint64_t>(comms->index(c.axis)) : 0;
  return localCopy(step, r * entry.buffers[c.dst].bytes, error);
}

} // namespace loomrt
