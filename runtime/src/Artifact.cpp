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
#include "loomrt/Safetensors.h"

#include "Support.h"

#include <cstring>
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
  std::unique_ptr<Backend> backend;
  std::map<std::string, NpyArray> initial;
  // One arena per entry, allocated by the entry's first run.
  std::vector<std::unique_ptr<Arena>> arenas;
  // Per step, the byte offsets of a kernel's buffers (precomputed).
  std::vector<std::vector<std::vector<uint64_t>>> kernelOffsets;
};

Artifact::Artifact() : impl(std::make_unique<Impl>()) {}
Artifact::~Artifact() = default;

namespace {

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  if (dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

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
      if (in.kind != BindingKind::Param && in.kind != BindingKind::State)
        continue;
      const TensorView *tensor = file->find(in.name);
      std::string user = "(" + std::string(bindingKindName(in.kind)) +
                         " input of entry " + quoteName(entry.name) + ")";
      if (!tensor) {
        sink.set(ErrorCode::Format,
                 fileName + ": no tensor " + quoteName(in.name) + " " + user);
        return false;
      }
      if (tensor->dtype != in.dtype || tensor->shape != in.shape) {
        sink.set(ErrorCode::Format,
                 fileName + ": tensor " + quoteName(in.name) + " is " +
                     describeTensorType(tensor->dtype, tensor->shape) +
                     ", the plan expects " +
                     describeTensorType(in.dtype, in.shape) + " " + user);
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

} // namespace

std::unique_ptr<Artifact> Artifact::load(const std::string &dir,
                                         std::string *error,
                                         ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::unique_ptr<Artifact> artifact(new Artifact());
    Impl &impl = *artifact->impl;
    impl.dir = dir;
    std::string planPath = joinPath(dir, "plan.json");
    std::optional<Plan> plan = readPlan(planPath, error, code, planPath);
    if (!plan)
      return nullptr;
    impl.plan = std::move(*plan);
    impl.backend = createBackend(impl.plan.target, error, code);
    if (!impl.backend)
      return nullptr;
    if (!impl.plan.kernels.empty() &&
        !impl.backend->loadKernels(joinPath(dir, impl.plan.kernels),
                                   impl.plan.kernelSymbols, error, code))
      return nullptr;
    if (!impl.plan.params.empty() &&
        !loadParams(joinPath(dir, impl.plan.params),
                    joinPath(dir, impl.plan.params), impl.plan, impl.initial,
                    sink))
      return nullptr;
    impl.arenas.resize(impl.plan.entries.size());
    for (const PlanEntry &entry : impl.plan.entries) {
      std::vector<std::vector<uint64_t>> offsets(entry.steps.size());
      for (size_t s = 0; s < entry.steps.size(); ++s)
        for (uint32_t id : entry.steps[s].buffers)
          offsets[s].push_back(entry.buffers[id].offset);
      impl.kernelOffsets.push_back(std::move(offsets));
    }
    sink.ok();
    return artifact;
  } catch (...) {
    sink.outOfMemory(dir);
  }
  return nullptr;
}

const std::string &Artifact::directory() const noexcept { return impl->dir; }
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

bool Artifact::run(std::string_view entryName,
                   const std::vector<TensorRef> &inputs,
                   std::vector<NpyArray> *outputs, std::string *error,
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
      bound[i] = &ref;
    }
    for (size_t i = 0; i < bound.size(); ++i)
      if (!bound[i]) {
        sink.set(ErrorCode::InvalidArgument,
                 where + ": missing input " + quoteName(entry->inputs[i].name) +
                     " (" + bindingKindName(entry->inputs[i].kind) + ", " +
                     describeTensorType(entry->inputs[i].dtype,
                                        entry->inputs[i].shape) +
                     ")");
        return false;
      }

    Backend &backend = *im.backend;
    std::unique_ptr<Arena> &arena = im.arenas[index];
    if (!arena) {
      arena = backend.allocateArena(entry->arenaBytes, error, code);
      if (!arena)
        return false;
    }
    std::string stepError;
    auto stepFailed = [&](const std::string &what) {
      sink.set(ErrorCode::IO, where + ": " + what + ": " + stepError);
      return false;
    };
    for (size_t i = 0; i < bound.size(); ++i)
      if (!backend.upload(*arena,
                          entry->buffers[entry->inputs[i].buffer].offset,
                          bound[i]->data, bound[i]->nbytes, &stepError))
        return stepFailed("input " + quoteName(entry->inputs[i].name));

    for (size_t s = 0; s < entry->steps.size(); ++s) {
      const PlanStep &step = entry->steps[s];
      bool ok = true;
      switch (step.kind) {
      case PlanStep::Kind::Kernel:
        ok = backend.launchKernel(*arena, step.kernelIndex,
                                  im.kernelOffsets[index][s], &stepError);
        break;
      case PlanStep::Kind::Gemm: {
        GemmCall call;
        call.dtype = entry->buffers[step.gemm.a].dtype;
        call.step = &step.gemm;
        call.offsetA = entry->buffers[step.gemm.a].offset;
        call.offsetB = entry->buffers[step.gemm.b].offset;
        call.offsetC = entry->buffers[step.gemm.c].offset;
        ok = backend.gemm(*arena, call, &stepError);
        break;
      }
      case PlanStep::Kind::Copy:
        ok = backend.copy(*arena, entry->buffers[step.src].offset,
                          entry->buffers[step.dst].offset,
                          entry->buffers[step.src].bytes, &stepError);
        break;
      }
      if (!ok)
        return stepFailed("step " + std::to_string(s));
    }
    if (!backend.synchronize(&stepError))
      return stepFailed("synchronize");

    std::vector<NpyArray> results(entry->outputs.size());
    for (size_t i = 0; i < entry->outputs.size(); ++i) {
      const Binding &out = entry->outputs[i];
      results[i].dtype = out.dtype;
      results[i].shape = out.shape;
      results[i].data.resize(out.bytes);
      if (!backend.download(*arena, entry->buffers[out.buffer].offset,
                            results[i].data.data(), out.bytes, &stepError))
        return stepFailed("output " + quoteName(out.name));
    }
    if (outputs)
      *outputs = std::move(results);
    sink.ok();
    return true;
  } catch (...) {
    sink.outOfMemory("entry " + quoteName(entryName));
  }
  return false;
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
