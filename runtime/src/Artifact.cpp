//===- Artifact.cpp - Load an artifact directory and execute its plan -----===//
//
// Execution is a straight walk over the validated steps: upload the inputs,
// issue each step to the backend, synchronize, download the outputs. All
// checking happened at load (Plan.cpp and the file checks below), except the
// caller's inputs, which are checked per call.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Artifact.h"

#include "loomrt/Backend.h"
#include "loomrt/Mesh.h"
#include "loomrt/Safetensors.h"

#include "CollectiveSteps.h"
#include "Support.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace loomrt {

using detail::ErrorSink;
using detail::quoteName;

std::string describeTensorType(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeToShortName(dtype)) + " " +
         detail::formatShape(shape);
}

TensorRef tensorRef(std::string_view name, const NpyArray &array) noexcept {
  TensorRef ref;
  ref.name = name;
  ref.dtype = array.dtype;
  ref.shape = array.shape.data();
  ref.rank = array.shape.size();
  ref.data = array.data.data();
  ref.nbytes = array.data.size();
  return ref;
}

struct Artifact::Impl {
  std::string dir;
  Plan plan;
  LoadOptions options;
  std::unique_ptr<Backend> backend;
  Collectives *comm = nullptr; // setCollectives
  // The mesh axes' communicators over `comm`, once built (meshCommsFor).
  MeshComms meshComms;
  bool meshCommsBuilt = false;
  // The axes' device collectives (NCCL), started over meshComms when the
  // first entry whose steps communicate runs, where the plan's collectives
  // are the backend's (usesDeviceCollectives). Declared after the backend,
  // so they go before it (they queue work on its stream).
  DeviceComms deviceComms;
  bool deviceCommsBuilt = false;
  CollectiveTimes collectiveTimes; // over every run
  // setGradientCompression's: runs its steps with a `grad` compressed.
  GradientCompression *gradCompression = nullptr;
  std::map<std::string, NpyArray> initial;
  // One arena per entry and mode (plain, resident), allocated by the
  // entry's first run in that mode. A resident-mode arena may also hold
  // resident state between runs (see below), so plain runs of the same
  // entry use an arena of their own.
  std::vector<std::unique_ptr<Arena>> arenas;
  std::vector<std::unique_ptr<Arena>> residentArenas;
  // Per step, the byte offsets of a kernel's buffers (precomputed).
  std::vector<std::vector<std::vector<uint64_t>>> kernelOffsets;
  // Per entry: for each output, the last step that touches its bytes (-1:
  // none), and the outputs in that order (RunObserver).
  std::vector<std::vector<int64_t>> readyAt;
  std::vector<std::vector<size_t>> readyOrder;

  // Resident state, by name: at first in one arena of its own, each tensor
  // at a 64-byte aligned offset (allocated by the first setResidentState).
  // A tensor that an entry updates in place (its input and its new value
  // share a buffer: loom-plan-memory's in-place update) moves to that buffer
  // of the entry's resident-mode arena when the entry runs, and lives there
  // (its home) until another such entry runs: so the entry that runs every
  // step copies it neither in nor out.
  struct ResidentTensor {
    const Binding *binding; // the first param/state input of that name
    uint64_t offset;
    int homeEntry = -1; // offset is in residentArenas[homeEntry]; -1: resident
  };
  std::map<std::string, ResidentTensor> residentLayout;
  // Per entry, the resident tensors it updates in place, with their offset.
  std::vector<std::vector<std::pair<ResidentTensor *, uint64_t>>> inPlace;
  uint64_t residentBytes = 0;
  std::unique_ptr<Arena> resident;
  bool residentSet = false;

  Arena *homeArena(const ResidentTensor &t) const {
    return t.homeEntry < 0 ? resident.get() : residentArenas[t.homeEntry].get();
  }
  /// The arena of `entry` in resident mode, allocated on first use.
  Arena *residentArena(size_t entry, std::string *error, ErrorCode *code) {
    if (!residentArenas[entry])
      residentArenas[entry] =
          backend->allocateArena(plan.entries[entry].arenaBytes, error, code);
    return residentArenas[entry].get();
  }

  // Recordings (CUDA graphs), per entry and mode (plain = 0, resident = 1):
  // the entry runs eagerly once, is recorded on its second run and replayed
  // after. The arena, the resident arena and every offset are fixed by then,
  // so a recording stays valid for the artifact's life.
  struct Slot {
    uint64_t runs = 0;
    std::unique_ptr<Recording> recording;
  };
  std::vector<Slot> slots;
  // LoadOptions::profile: per entry, per step, the time of its first run
  // (page faults, lazy set-up) and of the runs after it.
  struct StepTime {
    bool ran = false;
    double first = 0;
    uint64_t laterCalls = 0;
    double later = 0;
  };
  std::vector<std::vector<StepTime>> stepTimes;

  /// The mesh axes' communicators over `comm`, built by the first call
  /// (checkMeshWorld passed).
  const MeshComms *meshCommsFor(const std::string &who, std::string *error,
                                ErrorCode *code) {
    if (!meshCommsBuilt) {
      if (!meshComms.build(plan, comm, who, error, code))
        return nullptr;
      meshCommsBuilt = true;
    }
    return &meshComms;
  }

  /// The device collectives over `host`, started by the first call.
  const DeviceComms *deviceCommsFor(const MeshComms &host,
                                    const std::string &who, std::string *error,
                                    ErrorCode *code) {
    if (!deviceCommsBuilt) {
      if (!deviceComms.build(plan, host, *backend,
                             options.collectiveTimeoutSeconds, who, error,
                             code))
        return nullptr;
      deviceCommsBuilt = true;
    }
    return &deviceComms;
  }
};

namespace {
/// For each output of `entry`, the last step that touches any of its bytes
/// (through any buffer: a reshape's result shares its operand's bytes), or
/// -1: after it the output holds its final value.
std::vector<int64_t> lastTouches(const PlanEntry &entry) {
  std::vector<int64_t> last(entry.outputs.size(), -1);
  for (size_t s = 0; s < entry.steps.size(); ++s)
    for (uint32_t id : stepBuffers(entry.steps[s])) {
      if (id >= entry.buffers.size())
        continue;
      const PlanBuffer &b = entry.buffers[id];
      for (size_t i = 0; i < entry.outputs.size(); ++i) {
        const PlanBuffer &o = entry.buffers[entry.outputs[i].buffer];
        if (b.offset < o.offset + o.bytes && o.offset < b.offset + b.bytes)
          last[i] = int64_t(s);
      }
    }
  return last;
}
} // namespace

Artifact::Artifact() : impl(std::make_unique<Impl>()) {}
Artifact::~Artifact() = default;

namespace {

using detail::joinPath;

/// Checks params.safetensors against every param/state input of every entry
/// and copies its tensors out.
bool loadParams(const std::string &path, const std::string &fileName,
                const Plan &plan, std::map<std::string, NpyArray> &out,
                const ErrorSink &sink) {
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  std::unique_ptr<SafetensorsFile> file =
      SafetensorsFile::open(path, &error, &code);
  if (!file) {
    sink.set(code, error);
    return false;
  }
  for (const PlanEntry &entry : plan.entries)
    for (const Binding &in : entry.inputs) {
      if (!isStateKind(in.kind))
        continue;
      const TensorView *tensor = file->find(in.name);
      std::string user = "(" + std::string(bindingKindName(in.kind)) +
                         " input of entry " + quoteName(entry.name) + ")";
      if (!tensor) {
        sink.set(ErrorCode::Format,
                 fileName + ": no tensor " + quoteName(in.name) + " " + user);
        return false;
      }
      // A sharded tensor is whole in the file (each rank takes its part).
      if (tensor->dtype != in.dtype || tensor->shape != in.wholeShape()) {
        sink.set(ErrorCode::Format,
                 fileName + ": tensor " + quoteName(in.name) + " is " +
                     describeTensorType(tensor->dtype, tensor->shape) +
                     ", the plan expects " +
                     describeTensorType(in.dtype, in.wholeShape()) +
                     (in.shard ? " (whole; the plan shards it over " +
                                     in.shard->axis + ")"
                               : std::string()) +
                     " " + user);
        return false;
      }
    }
  for (const TensorView &tensor : file->tensors()) {
    NpyArray array;
    array.dtype = tensor.dtype;
    array.shape = tensor.shape;
    array.data.assign(tensor.data, tensor.data + tensor.nbytes);
    out.emplace(tensor.name, std::move(array));
  }
  return true;
}

/// Whether element `i` of `bytes` (of `dtype`) is inf or NaN; false for
/// integer types.
bool isNonFinite(DType dtype, const uint8_t *bytes, uint64_t i) {
  switch (dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, bytes + 4 * i, 4);
    return !std::isfinite(v);
  }
  case DType::F64: {
    double v;
    std::memcpy(&v, bytes + 8 * i, 8);
    return !std::isfinite(v);
  }
  case DType::BF16:
  case DType::F16: {
    uint16_t v;
    std::memcpy(&v, bytes + 2 * i, 2);
    uint16_t exponent = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
    return (v & exponent) == exponent;
  }
  default:
    return false;
  }
}

/// Whether element `i` of `bytes` (of a floating-point `dtype`) is NaN.
bool isNaN(DType dtype, const uint8_t *bytes, uint64_t i) {
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, bytes + 4 * i, 4);
    return std::isnan(v);
  }
  if (dtype == DType::F64) {
    double v;
    std::memcpy(&v, bytes + 8 * i, 8);
    return std::isnan(v);
  }
  uint16_t v;
  std::memcpy(&v, bytes + 2 * i, 2);
  uint16_t exponent = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
  uint16_t mantissa = dtype == DType::BF16 ? 0x007f : 0x03ff;
  return (v & exponent) == exponent && (v & mantissa) != 0;
}

/// LoadOptions::checkNumerics after step `s` of `entry`: reads back the
/// floating-point buffers the step writes; at the first inf or NaN, sets
/// `nonFinite` and `*error` (the node, the step, the element) and returns
/// false.
bool checkFinite(Backend &backend, Arena &arena, const PlanEntry &entry,
                 size_t s, bool &nonFinite, std::string *error) {
  const PlanStep &step = entry.steps[s];
  if (step.writes.empty())
    return true;
  if (!backend.synchronize(error))
    return false;
  std::vector<uint8_t> host;
  for (size_t w = 0; w < step.writes.size(); ++w) {
    const PlanBuffer &buffer = entry.buffers[step.writes[w]];
    if (buffer.dtype != DType::F32 && buffer.dtype != DType::F64 &&
        buffer.dtype != DType::BF16 && buffer.dtype != DType::F16)
      continue;
    host.resize(buffer.bytes);
    // A download may complete at the next synchronize (CUDA): wait for it
    // before reading, and before `host` is resized.
    if (buffer.bytes &&
        (!backend.download(arena, buffer.offset, host.data(), buffer.bytes,
                           error) ||
         !backend.synchronize(error)))
      return false;
    // An attention's lse is -inf on a query row that may attend to no key:
    // a value, not an overflow.
    const bool lse = step.kind == PlanStep::Kind::Attention &&
                     step.attention.direction == AttentionDirection::Forward &&
                     step.writes[w] == step.attention.lse;
    auto minusInf = [&](uint64_t i) {
      float v;
      std::memcpy(&v, host.data() + 4 * i, 4);
      return v == -std::numeric_limits<float>::infinity();
    };
    uint64_t bad = 0, first = 0;
    bool nan = false;
    for (uint64_t i = 0; i < buffer.elements; ++i)
      if (isNonFinite(buffer.dtype, host.data(), i) && !(lse && minusInf(i))) {
        if (!bad++)
          first = i;
        nan |= isNaN(buffer.dtype, host.data(), i);
      }
    if (!bad)
      continue;
    std::string what;
    switch (step.kind) {
    case PlanStep::Kind::Kernel:
      what = "kernel " + step.kernel;
      break;
    case PlanStep::Kind::Gemm:
      what = "gemm";
      break;
    case PlanStep::Kind::Conv:
      what = "conv";
      break;
    case PlanStep::Kind::Attention:
      what = std::string("attention ") +
             fusedDirectionName(step.attention.direction);
      break;
    case PlanStep::Kind::LinearCrossEntropy:
      what = std::string("linear_cross_entropy ") +
             fusedDirectionName(step.linearCrossEntropy.direction);
      break;
    case PlanStep::Kind::Copy:
      what = "copy";
      break;
    case PlanStep::Kind::Collective:
      what = collectiveOpName(step.collective.op);
      break;
    }
    const std::string &node = step.nodes.size() > w ? step.nodes[w] : "";
    nonFinite = true;
    *error = (node.empty() ? std::string("a value of no known node")
                           : "node " + quoteName(node)) +
             " became non-finite: " + std::to_string(bad) + " of " +
             std::to_string(buffer.elements) + " elements of " +
             describeTensorType(buffer.dtype, buffer.shape) +
             " are inf or NaN" + (nan ? " (NaN among them)" : "") +
             ", the first at flat index " + std::to_string(first) + " (" +
             what + " writing buffer " + std::to_string(step.writes[w]) + ")";
    return false;
  }
  return true;
}

/// Issues `step` of `entry` to the backend (a collective step to
/// `collectives`); `kernelOffsets`: a kernel's buffer offsets.
bool issueStep(Backend &backend, Arena &arena, const PlanEntry &entry,
               const PlanStep &step, const std::vector<uint64_t> &kernelOffsets,
               CollectiveSteps &collectives, std::string *error) {
  switch (step.kind) {
  case PlanStep::Kind::Kernel:
    return backend.launchKernel(arena, step, kernelOffsets, error);
  case PlanStep::Kind::Gemm: {
    GemmCall call;
    call.dtype = entry.buffers[step.gemm.a].dtype;
    call.step = &step.gemm;
    call.offsetA = entry.buffers[step.gemm.a].offset;
    call.offsetB = entry.buffers[step.gemm.b].offset;
    call.offsetC = entry.buffers[step.gemm.c].offset;
    call.offsetBias = entry.buffers[step.gemm.bias].offset;
    return backend.gemm(arena, call, error);
  }
  case PlanStep::Kind::Conv: {
    ConvCall call;
    call.step = &step.conv;
    call.x = &entry.buffers[step.conv.x];
    call.w = &entry.buffers[step.conv.w];
    call.y = &entry.buffers[step.conv.y];
    return backend.conv(arena, call, error);
  }
  case PlanStep::Kind::Attention: {
    const AttentionStep &a = step.attention;
    auto buffer = [&](uint32_t id) { return &entry.buffers[id]; };
    auto optional = [&](const std::optional<uint32_t> &id) {
      return id ? &entry.buffers[*id] : nullptr;
    };
    AttentionCall call;
    call.step = &a;
    call.q = buffer(a.q);
    call.k = buffer(a.k);
    call.v = buffer(a.v);
    call.out = buffer(a.out);
    call.lse = buffer(a.lse);
    call.mask = optional(a.mask);
    call.bias = optional(a.bias);
    call.segments = optional(a.segments);
    call.seed = optional(a.seed);
    if (a.direction == AttentionDirection::Backward) {
      call.dout = buffer(a.dout);
      call.dq = buffer(a.dq);
      call.dk = buffer(a.dk);
      call.dv = buffer(a.dv);
      call.dbias = optional(a.dbias);
    }
    return backend.attention(arena, call, error);
  }
  case PlanStep::Kind::LinearCrossEntropy: {
    const LinearCrossEntropyStep &l = step.linearCrossEntropy;
    auto buffer = [&](uint32_t id) { return &entry.buffers[id]; };
    LinearCrossEntropyCall call;
    call.step = &l;
    call.x = buffer(l.x);
    call.w = buffer(l.w);
    call.labels = buffer(l.labels);
    call.lse = buffer(l.lse);
    if (l.direction == LinearCrossEntropyDirection::Forward) {
      call.loss = buffer(l.loss);
    } else {
      call.dloss = buffer(l.dloss);
      call.dx = buffer(l.dx);
      call.dw = buffer(l.dw);
    }
    return backend.linearCrossEntropy(arena, call, error);
  }
  case PlanStep::Kind::Copy:
    return backend.copy(arena, entry.buffers[step.src].offset,
                        entry.buffers[step.dst].offset,
                        entry.buffers[step.src].bytes, error);
  case PlanStep::Kind::Collective:
    return collectives.issue(step, error);
  }
  *error = "unknown step kind";
  return false;
}

/// Element `i` of an integer tensor's bytes.
int64_t integerElement(DType dtype, const void *data, uint64_t i) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, static_cast<const char *>(data) + i * sizeof v,
                sizeof v);
    return static_cast<int64_t>(v);
  };
  switch (dtype) {
  case DType::I64: return load(int64_t{});
  case DType::I32: return load(int32_t{});
  case DType::I16: return load(int16_t{});
  case DType::I8: return load(int8_t{});
  case DType::U8: return load(uint8_t{});
  default: return 0; // parsePlan allows checks on integer inputs only
  }
}

/// The index of flat element `i` of `shape`, as "[1, 3]".
std::string elementIndex(const std::vector<int64_t> &shape, uint64_t i) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = shape[d] ? static_cast<int64_t>(i % uint64_t(shape[d])) : 0;
    i = shape[d] ? i / uint64_t(shape[d]) : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < at.size(); ++d)
    s += (d ? ", " : "") + std::to_string(at[d]);
  return s + "]";
}

/// An integer input's values against its plan `checks` (the ops that read
/// it as indices or labels), on the host before the step: the compiled
/// kernels clamp an index out of range, so this is where a token id past
/// the vocabulary or a label past the classes is caught.
bool checkInputValues(const Binding &in, const TensorRef &ref,
                      const std::string &where, const ErrorSink &sink) {
  uint64_t n = in.bytes / dtypeSize(in.dtype);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t v = integerElement(in.dtype, ref.data, i);
    for (const InputCheck &c : in.checks) {
      if ((v >= c.min && v < c.max) || (c.ignore && v == *c.ignore))
        continue;
      sink.set(ErrorCode::InvalidArgument,
               where + ": input " + quoteName(in.name) + ": element " +
                   elementIndex(in.shape, i) + " is " + std::to_string(v) +
                   ", outside [" + std::to_string(c.min) + ", " +
                   std::to_string(c.max) + ")" +
                   (c.ignore ? " and not " + std::to_string(*c.ignore) +
                                   " (ignore_index)"
                             : std::string()) +
                   ", the values " + c.op + " accepts");
      return false;
    }
  }
  return true;
}

} // namespace

std::unique_ptr<Artifact> Artifact::load(const std::string &dir,
                                         std::string *error,
                                         ErrorCode *code) noexcept {
  return load(dir, LoadOptions(), error, code);
}

std::unique_ptr<Artifact> Artifact::load(const std::string &dir,
                                         const LoadOptions &options,
                                         std::string *error,
                                         ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::unique_ptr<Artifact> artifact(new Artifact());
    Impl &impl = *artifact->impl;
    impl.dir = dir;
    impl.options = options;
    std::string planPath = joinPath(dir, "plan.json");
    std::optional<Plan> plan = readPlan(planPath, error, code, planPath);
    if (!plan)
      return nullptr;
    impl.plan = std::move(*plan);
    BackendOptions backendOptions;
    backendOptions.log = options.log;
    backendOptions.localRank = options.localRank;
    std::string why;
    impl.backend = createBackend(impl.plan.target, &why, code, backendOptions);
    if (!impl.backend) {
      sink.set(code ? *code : ErrorCode::Unsupported,
               planPath + ": target " + quoteName(impl.plan.target) + ": " +
                   why);
      return nullptr;
    }
    if (!impl.backend->load(impl.plan, dir, error, code) ||
        !checkCollectiveBackend(impl.plan, *impl.backend, options.collectives,
                                planPath, error, code))
      return nullptr;
    if (!impl.plan.params.empty() &&
        !loadParams(joinPath(dir, impl.plan.params),
                    joinPath(dir, impl.plan.params), impl.plan, impl.initial,
                    sink))
      return nullptr;
    impl.arenas.resize(impl.plan.entries.size());
    impl.residentArenas.resize(impl.plan.entries.size());
    impl.slots.resize(impl.plan.entries.size() * 2);
    for (const PlanEntry &entry : impl.plan.entries)
      for (const Binding &in : entry.inputs)
        if (isStateKind(in.kind) &&
            !impl.residentLayout.count(in.name))
          impl.residentLayout.emplace(in.name, Impl::ResidentTensor{&in, 0});
    impl.inPlace.resize(impl.plan.entries.size());
    for (size_t e = 0; e < impl.plan.entries.size(); ++e) {
      const PlanEntry &entry = impl.plan.entries[e];
      for (const Binding &out : entry.outputs) {
        auto it = impl.residentLayout.find(out.name);
        if (out.kind != BindingKind::Output || it == impl.residentLayout.end())
          continue;
        for (const Binding &in : entry.inputs) {
          uint64_t at = entry.buffers[in.buffer].offset;
          if (in.name != out.name || !isStateKind(in.kind) ||
              in.bytes != out.bytes || at != entry.buffers[out.buffer].offset)
            continue;
          impl.inPlace[e].push_back({&it->second, at});
        }
      }
    }
    for (auto &[name, tensor] : impl.residentLayout) {
      tensor.offset = impl.residentBytes;
      uint64_t rounded = (tensor.binding->bytes + kBufferAlignment - 1) /
                         kBufferAlignment * kBufferAlignment;
      if (rounded > UINT64_MAX - impl.residentBytes) {
        sink.set(ErrorCode::Format, planPath + ": params and state exceed "
                                               "2^64 bytes");
        return nullptr;
      }
      impl.residentBytes += rounded;
    }
    for (const PlanEntry &entry : impl.plan.entries) {
      std::vector<std::vector<uint64_t>> offsets(entry.steps.size());
      for (size_t s = 0; s < entry.steps.size(); ++s)
        for (uint32_t id : entry.steps[s].buffers)
          offsets[s].push_back(entry.buffers[id].offset);
      impl.kernelOffsets.push_back(std::move(offsets));
      impl.stepTimes.emplace_back(entry.steps.size());
      impl.readyAt.push_back(lastTouches(entry));
      std::vector<size_t> order(entry.outputs.size());
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      const std::vector<int64_t> &at = impl.readyAt.back();
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return at[a] < at[b]; });
      impl.readyOrder.push_back(std::move(order));
    }
    sink.ok();
    return artifact;
  } catch (...) {
    sink.outOfMemory(dir);
  }
  return nullptr;
}

const std::string &Artifact::directory() const noexcept { return impl->dir; }
std::string_view Artifact::backendName() const noexcept {
  return impl->backend->name();
}
const Plan &Artifact::plan() const noexcept { return impl->plan; }
const std::string &Artifact::target() const noexcept {
  return impl->plan.target;
}
const std::string &Artifact::sourceModel() const noexcept {
  return impl->plan.sourceModel;
}

std::vector<std::string> Artifact::entryNames() const {
  std::vector<std::string> names;
  for (const PlanEntry &e : impl->plan.entries)
    names.push_back(e.name);
  return names;
}

bool Artifact::hasEntry(std::string_view entry) const noexcept {
  return impl->plan.findEntry(entry) != nullptr;
}

const PlanEntry *Artifact::entry(std::string_view name) const noexcept {
  return impl->plan.findEntry(name);
}

const std::map<std::string, NpyArray> &Artifact::initialState() const noexcept {
  return impl->initial;
}

void Artifact::setCollectives(Collectives *comm) noexcept {
  if (comm == impl->comm)
    return;
  // What was started over the old comm, and split from it, goes now,
  // while it still exists.
  impl->deviceComms = DeviceComms();
  impl->deviceCommsBuilt = false;
  impl->meshComms = MeshComms();
  impl->meshCommsBuilt = false;
  impl->comm = comm;
}

const MeshComms *Artifact::meshComms(std::string *error,
                                     ErrorCode *code) noexcept {
  if (!checkMeshWorld(impl->plan, impl->comm, "the artifact", error, code))
    return nullptr;
  return impl->meshCommsFor("the artifact", error, code);
}

Collectives *Artifact::collectives() const noexcept { return impl->comm; }

void Artifact::setGradientCompression(
    GradientCompression *compression) noexcept {
  impl->gradCompression = compression;
}

GradientCompression *Artifact::gradientCompression() const noexcept {
  return impl->gradCompression;
}

StepCollectives Artifact::stepCollectives() const noexcept {
  return usesDeviceCollectives(impl->options.collectives, *impl->backend)
             ? StepCollectives::Device
             : StepCollectives::Host;
}

CollectiveTimes Artifact::collectiveTimes() const noexcept {
  return impl->collectiveTimes;
}

bool Artifact::run(std::string_view entryName,
                   const std::vector<TensorRef> &inputs,
                   std::vector<NpyArray> *outputs, std::string *error,
                   ErrorCode *code) noexcept {
  return runImpl(entryName, inputs, outputs, /*resident=*/false, nullptr,
                 error, code);
}

bool Artifact::runResident(std::string_view entryName,
                           const std::vector<TensorRef> &inputs,
                           std::vector<NpyArray> *outputs, std::string *error,
                           ErrorCode *code) noexcept {
  if (!impl->residentSet) {
    ErrorSink{error, code}.set(ErrorCode::InvalidArgument,
                               "runResident before setResidentState");
    return false;
  }
  return runImpl(entryName, inputs, outputs, /*resident=*/true, nullptr,
                 error, code);
}

bool Artifact::canObserveRuns() const noexcept {
  return impl->backend->hostArenas();
}

bool Artifact::runResident(std::string_view entryName,
                           const std::vector<TensorRef> &inputs,
                           std::vector<NpyArray> *outputs,
                           const RunObserver &observer, std::string *error,
                           ErrorCode *code) noexcept {
  if (!impl->residentSet || !canObserveRuns()) {
    ErrorSink{error, code}.set(ErrorCode::InvalidArgument,
                               impl->residentSet
                                   ? "this backend cannot observe runs"
                                   : "runResident before setResidentState");
    return false;
  }
  return runImpl(entryName, inputs, outputs, /*resident=*/true, &observer,
                 error, code);
}

bool Artifact::hasResidentState() const noexcept { return impl->residentSet; }

bool Artifact::setResidentState(const std::map<std::string, NpyArray> &tensors,
                                std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    Impl &im = *impl;
    for (const auto &[name, t] : im.residentLayout) {
      const Binding &b = *t.binding;
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        sink.set(ErrorCode::InvalidArgument,
                 "resident state: no tensor " + quoteName(name) + " (" +
                     bindingKindName(b.kind) + " " +
                     describeTensorType(b.dtype, b.shape) + ")");
        return false;
      }
      if (it->second.dtype != b.dtype || it->second.shape != b.shape ||
          it->second.data.size() != b.bytes) {
        sink.set(ErrorCode::InvalidArgument,
                 "resident state: tensor " + quoteName(name) + " is " +
                     describeTensorType(it->second.dtype, it->second.shape) +
                     ", the plan expects " +
                     describeTensorType(b.dtype, b.shape));
        return false;
      }
    }
    Backend &backend = *im.backend;
    if (!im.resident) {
      im.resident = backend.allocateArena(im.residentBytes, error, code);
      if (!im.resident) {
        if (error)
          *error = "resident params and state: " + *error;
        return false;
      }
    }
    std::string why;
    for (const auto &[name, t] : im.residentLayout) {
      const NpyArray &a = tensors.at(name);
      if (!backend.upload(*im.homeArena(t), t.offset, a.data.data(),
                          a.data.size(), &why)) {
        sink.set(ErrorCode::IO,
                 "resident state: tensor " + quoteName(name) + ": " + why);
        return false;
      }
    }
    if (!backend.synchronize(&why)) {
      sink.set(ErrorCode::IO, "resident state: " + why);
      return false;
    }
    im.residentSet = true;
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory("resident state");
  }
  return false;
}

bool Artifact::readResidentState(std::map<std::string, NpyArray> *tensors,
                                 std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    Impl &im = *impl;
    if (!im.residentSet) {
      sink.set(ErrorCode::InvalidArgument,
               "readResidentState before setResidentState");
      return false;
    }
    std::map<std::string, NpyArray> result;
    std::string why;
    for (const auto &[name, t] : im.residentLayout) {
      NpyArray &a = result[name];
      a.dtype = t.binding->dtype;
      a.shape = t.binding->shape;
      a.data.resize(t.binding->bytes);
      if (!im.backend->download(*im.homeArena(t), t.offset, a.data.data(),
                                a.data.size(), &why)) {
        sink.set(ErrorCode::IO,
                 "resident state: tensor " + quoteName(name) + ": " + why);
        return false;
      }
    }
    if (!im.backend->synchronize(&why)) {
      sink.set(ErrorCode::IO, "resident state: " + why);
      return false;
    }
    if (tensors)
      *tensors = std::move(result);
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory("resident state");
  }
  return false;
}

bool Artifact::runImpl(std::string_view entryName,
                       const std::vector<TensorRef> &inputs,
                       std::vector<NpyArray> *outputs, bool resident,
                       const RunObserver *observer, std::string *error,
                       ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    Impl &im = *impl;
    const PlanEntry *entry = im.plan.findEntry(entryName);
    if (!entry) {
      std::string names;
      for (const PlanEntry &e : im.plan.entries)
        names += (names.empty() ? "" : ", ") + e.name;
      sink.set(ErrorCode::InvalidArgument, "no entry " + quoteName(entryName) +
                                               " in the artifact (it has " +
                                               names + ")");
      return false;
    }
    std::string where = "entry " + quoteName(entry->name);
    size_t index = static_cast<size_t>(entry - im.plan.entries.data());
    // Before anything moves: an entry that communicates needs every rank,
    // and each of its mesh axes a communicator.
    const MeshComms *comms = nullptr;
    if (entryUsesMesh(im.plan, *entry) &&
        (!checkMeshWorld(im.plan, im.comm, where, error, code) ||
         !(comms = im.meshCommsFor(where, error, code))))
      return false;
    // Steps that communicate over the backend's device collectives (NCCL):
    // started over the axes' host communicators by the first such entry.
    const DeviceComms *deviceComms = nullptr;
    const bool onDevice =
        comms && entryCommunicates(*entry) &&
        usesDeviceCollectives(im.options.collectives, *im.backend);
    if (onDevice &&
        !(deviceComms = im.deviceCommsFor(*comms, where, error, code)))
      return false;

    // Match the caller's inputs to the plan's, by name, before touching the
    // device.
    std::vector<const TensorRef *> bound(entry->inputs.size(), nullptr);
    for (const TensorRef &ref : inputs) {
      size_t i = 0;
      while (i < entry->inputs.size() && entry->inputs[i].name != ref.name)
        ++i;
      if (i == entry->inputs.size()) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": unknown input " + quoteName(ref.name));
        return false;
      }
      if (bound[i]) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": input " + quoteName(ref.name) + " given twice");
        return false;
      }
      const Binding &in = entry->inputs[i];
      if (resident &&
          isStateKind(in.kind)) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": input " + quoteName(ref.name) + " is " +
                     bindingKindName(in.kind) +
                     ", which comes from the resident state");
        return false;
      }
      std::vector<int64_t> shape;
      if (ref.rank > 0) {
        if (!ref.shape) {
          sink.set(ErrorCode::InvalidArgument,
                   where + ": input " + quoteName(ref.name) + ": null shape");
          return false;
        }
        shape.assign(ref.shape, ref.shape + ref.rank);
      }
      if (!isValidDType(ref.dtype) || ref.dtype != in.dtype ||
          shape != in.shape) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": input " + quoteName(ref.name) + ": expected " +
                     describeTensorType(in.dtype, in.shape) + ", got " +
                     (isValidDType(ref.dtype)
                          ? describeTensorType(ref.dtype, shape)
                          : std::string("an invalid dtype")));
        return false;
      }
      if (ref.nbytes != in.bytes || (!ref.data && in.bytes)) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": input " + quoteName(ref.name) + ": " +
                     std::to_string(ref.nbytes) + " bytes of data, " +
                     describeTensorType(in.dtype, in.shape) + " needs " +
                     std::to_string(in.bytes));
        return false;
      }
      if (!in.checks.empty() &&
          !checkInputValues(in, ref, where, sink))
        return false;
      bound[i] = &ref;
    }
    auto isResidentInput = [&](const Binding &in) {
      return resident &&
             isStateKind(in.kind);
    };
    auto isResidentOutput = [&](const Binding &out) {
      return resident && out.kind == BindingKind::Output &&
             im.residentLayout.count(out.name);
    };
    for (size_t i = 0; i < bound.size(); ++i)
      if (!bound[i] && !isResidentInput(entry->inputs[i])) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": missing input " + quoteName(entry->inputs[i].name) +
                     " (" + bindingKindName(entry->inputs[i].kind) + ", " +
                     describeTensorType(entry->inputs[i].dtype,
                                        entry->inputs[i].shape) +
                     ")");
        return false;
      }

    Backend &backend = *im.backend;
    if (!resident && !im.arenas[index])
      im.arenas[index] = backend.allocateArena(entry->arenaBytes, error, code);
    Arena *arena = resident ? im.residentArena(index, error, code)
                            : im.arenas[index].get();
    if (!arena)
      return false;
    std::string stepError;
    bool nonFinite = false;
    auto stepFailed = [&](const std::string &what) {
      sink.set(nonFinite ? ErrorCode::NonFinite : ErrorCode::IO,
               where + ": " + what + ": " + stepError);
      return false;
    };
    // State this entry updates in place moves into its arena (once): then
    // it is neither copied in nor out while this entry keeps running.
    bool moved = false;
    for (auto &[t, at] : im.inPlace[index]) {
      if (!resident || t->homeEntry == static_cast<int>(index))
        continue;
      if (!backend.copyBetween(*im.homeArena(*t), t->offset, *arena, at,
                               t->binding->bytes, &stepError))
        return stepFailed("moving resident state");
      t->homeEntry = static_cast<int>(index);
      t->offset = at;
      moved = true;
    }
    if (moved) // recordings copy from where the state was
      for (Impl::Slot &slot : im.slots)
        slot = Impl::Slot{};
    for (size_t i = 0; i < bound.size(); ++i)
      if (bound[i] &&
          !backend.upload(*arena,
                          entry->buffers[entry->inputs[i].buffer].offset,
                          bound[i]->data, bound[i]->nbytes, &stepError))
        return stepFailed("input " + quoteName(entry->inputs[i].name));

    // Everything between the uploads and the downloads is device work on
    // fixed addresses: what a recording captures (collectives over one
    // rank are copies; host collectives never run on a recording backend,
    // see checkCollectiveBackend; an entry with device collectives is not
    // recorded, below).
    std::string failedAt;
    CollectiveSteps collectives(im.plan, *entry, backend, *arena, comms,
                                im.options.profile || im.options.checkNumerics,
                                &im.collectiveTimes, deviceComms,
                                im.gradCompression);
    bool firstRun = im.slots[index * 2 + (resident ? 1 : 0)].runs == 0;
    // The observer's outputs, by the step after which each is final (-1:
    // before the first). Resident outputs are not the observer's.
    size_t observed = 0;
    const std::vector<int64_t> *readyAt =
        observer ? &im.readyAt[index] : nullptr;
    auto announce = [&](int64_t after) -> bool {
      for (; observed < entry->outputs.size() &&
             (*readyAt)[im.readyOrder[index][observed]] <= after;
           ++observed) {
        size_t i = im.readyOrder[index][observed];
        const Binding &out = entry->outputs[i];
        if (isResidentOutput(out))
          continue;
        const PlanBuffer &bytes = entry->buffers[out.buffer];
        if (!collectives.waitForBytes(bytes.offset, bytes.bytes, &stepError)) {
          failedAt = "output " + quoteName(out.name);
          return false;
        }
        void *data = backend.hostAddress(*arena, bytes.offset);
        if (!data && out.bytes) {
          stepError = "the backend has no host address for it";
          failedAt = "output " + quoteName(out.name);
          return false;
        }
        if (!observer->outputReady(i, data, &stepError)) {
          failedAt = "output " + quoteName(out.name);
          return false;
        }
      }
      return true;
    };
    auto issue = [&]() -> bool {
      for (const Binding &in : entry->inputs)
        if (isResidentInput(in)) {
          const Impl::ResidentTensor &t = im.residentLayout.at(in.name);
          uint64_t at = entry->buffers[in.buffer].offset;
          if (im.homeArena(t) == arena && t.offset == at)
            continue; // updated in place: it lives here
          if (in.bytes && !backend.copyBetween(*im.homeArena(t), t.offset, *arena,
                                               entry->buffers[in.buffer].offset,
                                               in.bytes, &stepError)) {
            failedAt = "resident input " + quoteName(in.name);
            return false;
          }
        }
      if (observer && !announce(-1))
        return false;
      for (size_t s = 0; s < entry->steps.size(); ++s) {
        const PlanStep &step = entry->steps[s];
        std::chrono::steady_clock::time_point begin;
        if (im.options.profile)
          begin = std::chrono::steady_clock::now();
        // A step that touches a pending collective's bytes waits for it;
        // after any step, the pending ones progress.
        bool ok =
            collectives.beforeStep(step, &stepError) &&
            issueStep(backend, *arena, *entry, step, im.kernelOffsets[index][s],
                      collectives, &stepError) &&
            collectives.afterStep(&stepError);
        if (ok && im.options.profile) {
          ok = backend.synchronize(&stepError);
          double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - begin)
                               .count();
          Impl::StepTime &t = im.stepTimes[index][s];
          t.ran = true;
          if (firstRun) {
            t.first = seconds;
          } else {
            ++t.laterCalls;
            t.later += seconds;
          }
        }
        if (ok && im.options.checkNumerics &&
            !checkFinite(backend, *arena, *entry, s, nonFinite, &stepError)) {
          failedAt = "plan step " + std::to_string(s);
          return false;
        }
        if (!ok) {
          failedAt = "step " + std::to_string(s);
          return false;
        }
        if (observer) {
          if (!announce(int64_t(s)))
            return false;
          if (observer->afterStep && !observer->afterStep(&stepError)) {
            failedAt = "after step " + std::to_string(s);
            return false;
          }
        }
      }
      if (!collectives.finish(&stepError)) {
        failedAt = "waiting for the collectives";
        return false;
      }
      if (observer && observer->finish && !observer->finish(&stepError)) {
        failedAt = "finishing the outputs";
        return false;
      }
      for (const Binding &out : entry->outputs)
        if (isResidentOutput(out)) {
          const Impl::ResidentTensor &t = im.residentLayout.at(out.name);
          uint64_t at = entry->buffers[out.buffer].offset;
          if (im.homeArena(t) == arena && t.offset == at)
            continue; // updated in place
          if (out.bytes && !backend.copyBetween(*arena, at, *im.homeArena(t),
                                                t.offset, out.bytes,
                                                &stepError)) {
            failedAt = "resident output " + quoteName(out.name);
            return false;
          }
        }
      return true;
    };

    Impl::Slot &slot = im.slots[index * 2 + (resident ? 1 : 0)];
    // Not an entry whose steps run NCCL: each collective records an event
    // that its Request polls (the watchdog), which a graph cannot hold.
    bool record = im.options.graphs && !im.options.profile &&
                  !im.options.checkNumerics && !observer && !deviceComms &&
                  backend.canRecord();
    if (slot.recording && !observer) {
      if (!backend.replay(*slot.recording, &stepError))
        return stepFailed("replaying the recorded steps");
    } else if (record && slot.runs >= 1) {
      if (!backend.beginRecording(&stepError))
        return stepFailed("recording the steps (try --no-cuda-graph)");
      bool issued = issue();
      std::unique_ptr<Recording> recording =
          backend.endRecording(issued ? &stepError : nullptr);
      if (!issued)
        return stepFailed(failedAt + " (while recording)");
      if (!recording)
        return stepFailed("recording the steps (try --no-cuda-graph)");
      slot.recording = std::move(recording);
      if (!backend.replay(*slot.recording, &stepError))
        return stepFailed("replaying the recorded steps");
    } else {
      if (!issue())
        return stepFailed(failedAt);
    }
    ++slot.runs;

    std::vector<NpyArray> results(entry->outputs.size());
    for (size_t i = 0; i < entry->outputs.size(); ++i) {
      const Binding &out = entry->outputs[i];
      results[i].dtype = out.dtype;
      results[i].shape = out.shape;
      if (isResidentOutput(out))
        continue;
      results[i].data.resize(out.bytes);
      if (!backend.download(*arena, entry->buffers[out.buffer].offset,
                            results[i].data.data(), out.bytes, &stepError))
        return stepFailed("output " + quoteName(out.name));
    }
    if (!backend.synchronize(&stepError))
      return stepFailed("synchronize");
    if (outputs)
      *outputs = std::move(results);
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory("entry " + quoteName(entryName));
  }
  return false;
}

std::vector<StepProfile> Artifact::profile() const {
  std::vector<StepProfile> out;
  for (size_t e = 0; e < impl->stepTimes.size(); ++e) {
    const PlanEntry &entry = impl->plan.entries[e];
    for (size_t s = 0; s < entry.steps.size(); ++s) {
      const Impl::StepTime &t = impl->stepTimes[e][s];
      bool warm = t.laterCalls > 0;
      if (!t.ran)
        continue;
      const PlanStep &step = entry.steps[s];
      StepProfile p;
      p.entry = entry.name;
      p.step = s;
      p.kind = step.kind;
      p.calls = warm ? t.laterCalls : 1;
      p.seconds = warm ? t.later : t.first;
      switch (step.kind) {
      case PlanStep::Kind::Kernel:
        p.what = step.kernel;
        break;
      case PlanStep::Kind::Gemm: {
        const GemmStep &g = step.gemm;
        p.what = "gemm " + std::to_string(g.m) + "x" + std::to_string(g.n) +
                 "x" + std::to_string(g.k);
        if (g.batch != 1)
          p.what += " batch " + std::to_string(g.batch);
        if (g.transA)
          p.what += " A^T";
        if (g.transB)
          p.what += " B^T";
        if (g.epilogue != GemmEpilogue::None)
          p.what += std::string(" + ") + gemmEpilogueName(g.epilogue);
        break;
      }
      case PlanStep::Kind::Conv: {
        const ConvStep &c = step.conv;
        auto dims = [](const std::vector<int64_t> &shape) {
          std::string text;
          for (int64_t d : shape)
            text += (text.empty() ? "" : "x") + std::to_string(d);
          return text;
        };
        p.what = std::string("conv ") + convDirectionName(c.direction) + " " +
                 dims(entry.buffers[c.x].shape) + " * " +
                 dims(entry.buffers[c.w].shape);
        if (c.groups != 1)
          p.what += " groups " + std::to_string(c.groups);
        break;
      }
      case PlanStep::Kind::Attention: {
        // "attention backward 2x8x512x64 * 2x2x512x64 causal window 128"
        // (q and k).
        const AttentionStep &a = step.attention;
        auto dims = [](const std::vector<int64_t> &shape) {
          std::string text;
          for (int64_t d : shape)
            text += (text.empty() ? "" : "x") + std::to_string(d);
          return text;
        };
        p.what = std::string("attention ") +
                 fusedDirectionName(a.direction) + " " +
                 dims(entry.buffers[a.q].shape) + " * " +
                 dims(entry.buffers[a.k].shape);
        if (a.causal)
          p.what += " causal";
        if (a.window > 0)
          p.what += " window " + std::to_string(a.window);
        if (a.mask)
          p.what += " mask";
        if (a.bias)
          p.what += " bias";
        break;
      }
      case PlanStep::Kind::LinearCrossEntropy: {
        // "linear_cross_entropy backward 2048x768 * 50304x768 transpose_w
        // mean ignore_index -100" (x and w).
        const LinearCrossEntropyStep &l = step.linearCrossEntropy;
        auto dims = [](const std::vector<int64_t> &shape) {
          std::string text;
          for (int64_t d : shape)
            text += (text.empty() ? "" : "x") + std::to_string(d);
          return text;
        };
        p.what = std::string("linear_cross_entropy ") +
                 fusedDirectionName(l.direction) + " " +
                 dims(entry.buffers[l.x].shape) + " * " +
                 dims(entry.buffers[l.w].shape) +
                 (l.transposeW ? " transpose_w " : " ") +
                 linearCrossEntropyReductionName(l.reduction);
        if (l.ignoreIndex)
          p.what += " ignore_index " + std::to_string(*l.ignoreIndex);
        break;
      }
      case PlanStep::Kind::Copy:
        p.what = "copy " + std::to_string(entry.buffers[step.src].bytes) +
                 " bytes";
        break;
      case PlanStep::Kind::Collective: {
        const CollectiveStep &c = step.collective;
        const PlanBuffer &src = entry.buffers[c.src];
        p.what = collectiveOpName(c.op);
        if (c.reduce != CollectiveReduce::None)
          p.what += std::string(" ") + collectiveReduceName(c.reduce);
        p.what += " " + std::to_string(src.elements) + " " +
                  std::string(dtypeToShortName(src.dtype)) + " over " +
                  impl->plan.mesh->axes[c.axis] + "=" + std::to_string(c.ranks);
        break;
      }
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

bool Artifact::run(std::string_view entry,
                   const std::map<std::string, const NpyArray *> &inputs,
                   std::vector<NpyArray> *outputs, std::string *error,
                   ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::vector<TensorRef> refs;
    refs.reserve(inputs.size());
    for (const auto &[name, array] : inputs) {
      if (!array) {
        sink.set(ErrorCode::InvalidArgument,
                 "input " + quoteName(name) + " is null");
        return false;
      }
      refs.push_back(tensorRef(name, *array));
    }
    return run(entry, refs, outputs, error, code);
  } catch (...) {
    sink.outOfMemory("entry " + quoteName(entry));
  }
  return false;
}

} // namespace loomrt
