//===- PlanPipeline.cpp - Parse and check plan.json's `pipeline` ----------===//
//
// A pipeline plan is refused at load, never hangs: the action lists are
// run together by pp::checkSchedule (a list that would deadlock, leave a
// send unreceived or run an action before its data is there is an error
// naming the rank, the step and the action), and each stage's entries are
// checked against the boundaries the actions move, so that the trainer
// (PipelineTrainer.cpp) can feed every input and place every output by
// name without further checks. A param that several stages read is
// listed in `shared`: exactly those stages' forwards take it, and only
// the first's (its owner's) apply_gradients. docs/pipeline.md, "In
// plan.json", lists the rules.
//
//===----------------------------------------------------------------------===//

#include "PlanPipeline.h"

#include "Support.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <map>
#include <set>

namespace loomrt {

std::string pipelineEntryName(int64_t stage, std::string_view what) {
  return "stage" + std::to_string(stage) + "_" + std::string(what);
}

namespace detail {
namespace {

using json = nlohmann::json;

struct PipelineError {
  std::string message;
};

[[noreturn]] void fail(const std::string &where, const std::string &message) {
  throw PipelineError{where + ": " + message};
}

const json &member(const json &obj, const char *key, const std::string &where) {
  auto it = obj.find(key);
  if (it == obj.end())
    fail(where, std::string("missing field '") + key + "'");
  return *it;
}

/// An integer from 1 to `max`.
int64_t getCount(const json &obj, const char *key, const std::string &where,
                 int64_t max) {
  const json &v = member(obj, key, where);
  bool ok = v.is_number_integer();
  int64_t n = 0;
  if (ok && v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    ok = u >= 1 && u <= uint64_t(max);
    n = int64_t(u);
  } else if (ok) {
    n = v.get<int64_t>();
    ok = n >= 1 && n <= max;
  }
  if (!ok)
    fail(fieldWhere(where, key), "expected an integer from 1 to " +
                                     std::to_string(max) + ", got " + v.dump());
  return n;
}

const json &getArray(const json &obj, const char *key,
                     const std::string &where) {
  const json &v = member(obj, key, where);
  if (!v.is_array())
    fail(fieldWhere(where, key),
         std::string("expected an array, got ") + typeName(v));
  return v;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeToShortName(dtype)) + " " + formatShape(shape);
}

bool isFloatType(DType d) {
  return d == DType::F32 || d == DType::F64 || d == DType::F16 ||
         d == DType::BF16;
}

std::string boundaryName(int64_t b, int64_t i) {
  return "pp.b" + std::to_string(b) + "." + std::to_string(i);
}

std::vector<int64_t> getShape(const json &obj, const std::string &where) {
  const json &shape = getArray(obj, "shape", where);
  if (shape.size() > 64)
    fail(fieldWhere(where, "shape"),
         "rank " + std::to_string(shape.size()) + " exceeds 64");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json &d = shape[i];
    bool ok = d.is_number_integer() &&
              (d.is_number_unsigned()
                   ? d.get<uint64_t>() <=
                         uint64_t(std::numeric_limits<int64_t>::max())
                   : d.get<int64_t>() >= 0);
    if (!ok)
      fail(fieldWhere(where, "shape"),
           "dimension " + std::to_string(i) +
               " is not a non-negative integer that fits int64");
    dims.push_back(d.get<int64_t>());
  }
  if (!checkedByteSize(DType::F64, dims))
    fail(fieldWhere(where, "shape"), "the tensor's size overflows");
  return dims;
}

struct Checker {
  Plan &plan;
  PlanPipeline &pipe;
  const std::string &what;
  std::string where; ///< what + ": pipeline"
  /// The params of every stage's forward (for paramOfState).
  std::set<std::string> allParams;

  std::string entryWhere(const PlanEntry &e) const {
    return what + ": entry " + quoteName(e.name);
  }

  const PlanEntry &need(int64_t s, const char *kind, const char *why) const {
    std::string name = pipelineEntryName(s, kind);
    const PlanEntry *e = plan.findEntry(name);
    if (!e)
      fail(where, "stage " + std::to_string(s) + " has no entry " +
                      quoteName(name) + " (" + why + ")");
    return *e;
  }

  /// Boundary b's tensor i, or null.
  const pp::BoundaryTensor *tensor(int64_t b, int64_t i) const {
    if (b < 0 || b >= int64_t(pipe.boundaries.size()) || i < 0 ||
        i >= int64_t(pipe.boundaries[b].size()))
      return nullptr;
    return &pipe.boundaries[b][i];
  }

  /// `binding` has the boundary tensor's type (unsharded) and `kind`.
  void checkType(const Binding &binding, BindingKind kind,
                 const pp::BoundaryTensor &t, const std::string &at,
                 const std::string &role) const {
    DType dtype = *dtypeFromShortName(t.dtype);
    if (binding.kind != kind)
      fail(at, quoteName(binding.name) + " has kind " +
                   bindingKindName(binding.kind) + ", expected " +
                   bindingKindName(kind));
    if (binding.dtype != dtype || binding.shape != t.shape || binding.shard)
      fail(at, quoteName(binding.name) + " is " + describeBinding(binding) +
                   ", but " + role + " is " + describe(dtype, t.shape));
  }

  /// No step of a stage's entry communicates over the pipeline axis: the
  /// other ranks of that axis run other stages.
  void checkNoPipelineAxis(const PlanEntry &e) const {
    if (pipe.ranks <= 1)
      return;
    for (size_t i = 0; i < e.steps.size(); ++i) {
      const PlanStep &step = e.steps[i];
      if (step.kind == PlanStep::Kind::Collective &&
          step.collective.axis == pipe.axisIndex)
        fail(entryWhere(e) + ": step " + std::to_string(i) + " (collective)",
             "communicates over the pipeline axis " + quoteName(pipe.axis) +
                 ", whose other ranks run other stages");
    }
    for (bool isInput : {true, false}) {
      const std::vector<Binding> &list = isInput ? e.inputs : e.outputs;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i].shard && list[i].shard->axisIndex == pipe.axisIndex)
          fail(entryWhere(e) + ": " + (isInput ? "input " : "output ") +
                   std::to_string(i) + ": field 'shard'",
               quoteName(list[i].name) + " is sharded over the pipeline axis " +
                   quoteName(pipe.axis) +
                   ", whose other ranks run other "
                   "stages");
    }
  }

  void checkForward(int64_t s, const PlanEntry &fwd) const {
    const int64_t S = pipe.stages;
    std::set<int64_t> taken;
    for (size_t k = 0; k < fwd.inputs.size(); ++k) {
      const Binding &in = fwd.inputs[k];
      std::string at = entryWhere(fwd) + ": input " + std::to_string(k);
      int64_t b, i;
      bool grad;
      if (!parseBoundaryName(in.name, &b, &i, &grad))
        continue;
      const pp::BoundaryTensor *t = grad || b != s - 1 ? nullptr : tensor(b, i);
      if (!t)
        fail(at,
             quoteName(in.name) + " is not a tensor of boundary " +
                 std::to_string(s - 1) +
                 (s == 0 ? " (stage 0 receives no boundary)"
                         : " (what stage " + std::to_string(s) + " receives)"));
      checkType(in, BindingKind::Input, *t, at,
                "boundary " + std::to_string(b) + "'s tensor " +
                    std::to_string(i));
      taken.insert(i);
    }
    if (s > 0)
      for (size_t i = 0; i < pipe.boundaries[s - 1].size(); ++i)
        if (!taken.count(int64_t(i)))
          fail(entryWhere(fwd),
               "takes no input " + quoteName(boundaryName(s - 1, i)) +
                   " (tensor " + std::to_string(i) + " of boundary " +
                   std::to_string(s - 1) + ")");
    std::set<int64_t> given;
    for (size_t k = 0; k < fwd.outputs.size(); ++k) {
      const Binding &out = fwd.outputs[k];
      std::string at = entryWhere(fwd) + ": output " + std::to_string(k);
      if (s == S - 1) {
        if (out.name != "loss")
          fail(at, quoteName(out.name) +
                       ": the last stage's forward returns 'loss' alone");
        if (out.kind != BindingKind::Output ||
            (out.dtype != DType::F32 && out.dtype != DType::F64) ||
            out.bytes != dtypeSize(out.dtype))
          fail(at, "'loss' is " + describeBinding(out) +
                       ", expected one f32 or f64 value of kind output");
        given.insert(0);
        continue;
      }
      int64_t b, i;
      bool grad;
      const pp::BoundaryTensor *t =
          parseBoundaryName(out.name, &b, &i, &grad) && !grad && b == s
              ? tensor(b, i)
              : nullptr;
      if (!t)
        fail(at, quoteName(out.name) + " is not a tensor of boundary " +
                     std::to_string(s) + " (stage " + std::to_string(s) +
                     "'s forward returns boundary " + std::to_string(s) +
                     " alone)");
      checkType(out, BindingKind::Output, *t, at,
                "boundary " + std::to_string(b) + "'s tensor " +
                    std::to_string(i));
      given.insert(i);
    }
    if (s == S - 1 && given.empty())
      fail(entryWhere(fwd), "returns no 'loss' (the last stage's forward "
                            "returns the loss)");
    if (s < S - 1)
      for (size_t i = 0; i < pipe.boundaries[s].size(); ++i)
        if (!given.count(int64_t(i)))
          fail(entryWhere(fwd), "returns no " + quoteName(boundaryName(s, i)) +
                                    " (tensor " + std::to_string(i) +
                                    " of boundary " + std::to_string(s) + ")");
  }

  /// stage<s>_backward, _backward_input or _backward_weight: the forward's
  /// inputs and the gradients of boundary s in; the gradients of boundary
  /// s - 1 (not for _weight) and of the params (not for _input) out.
  void checkBackward(int64_t s, const PlanEntry &fwd, const PlanEntry &bwd,
                     bool inputGrads, bool paramGrads) const {
    std::set<int64_t> taken;
    for (size_t k = 0; k < bwd.inputs.size(); ++k) {
      const Binding &in = bwd.inputs[k];
      std::string at = entryWhere(bwd) + ": input " + std::to_string(k);
      int64_t b, i;
      bool grad;
      if (parseBoundaryName(in.name, &b, &i, &grad) && grad) {
        const pp::BoundaryTensor *t = b == s ? tensor(b, i) : nullptr;
        if (!t || !t->grad)
          fail(at, quoteName(in.name) +
                       " is not the gradient of a tensor of boundary " +
                       std::to_string(s) + " that carries one");
        checkType(in, BindingKind::Input, *t, at,
                  "the gradient of boundary " + std::to_string(b) +
                      "'s tensor " + std::to_string(i));
        taken.insert(i);
        continue;
      }
      const Binding *f = fwd.findInput(in.name);
      if (!f)
        fail(at, quoteName(in.name) + " is not an input of " +
                     quoteName(fwd.name) +
                     " (a backward takes the forward's inputs and the "
                     "gradients of boundary " +
                     std::to_string(s) + ")");
      if (f->kind != in.kind || f->dtype != in.dtype || f->shape != in.shape)
        fail(at, quoteName(in.name) + " is " + bindingKindName(in.kind) + " " +
                     describeBinding(in) + ", but " + quoteName(fwd.name) +
                     " takes it as " + bindingKindName(f->kind) + " " +
                     describeBinding(*f));
    }
    if (s < pipe.stages - 1)
      for (size_t i = 0; i < pipe.boundaries[s].size(); ++i)
        if (pipe.boundaries[s][i].grad && !taken.count(int64_t(i)))
          fail(entryWhere(bwd),
               "takes no input " + quoteName(boundaryName(s, i) + ".grad") +
                   " (the gradient of tensor " + std::to_string(i) +
                   " of boundary " + std::to_string(s) + ")");
    std::set<int64_t> given;
    std::set<std::string> params;
    for (size_t k = 0; k < bwd.outputs.size(); ++k) {
      const Binding &out = bwd.outputs[k];
      std::string at = entryWhere(bwd) + ": output " + std::to_string(k);
      if (out.kind == BindingKind::Grad) {
        if (!paramGrads)
          fail(at, "grad output " + quoteName(out.name) + ": " +
                       quoteName(bwd.name) +
                       " returns the input gradients alone");
        const Binding *p = fwd.findInput(out.name);
        if (!p || p->kind != BindingKind::Param)
          fail(at, "grad output " + quoteName(out.name) +
                       " names no param of " + quoteName(fwd.name));
        params.insert(out.name);
        continue;
      }
      int64_t b, i;
      bool grad;
      const pp::BoundaryTensor *t =
          parseBoundaryName(out.name, &b, &i, &grad) && grad && b == s - 1
              ? tensor(b, i)
              : nullptr;
      if (!t || !t->grad)
        fail(at, quoteName(out.name) +
                     " is neither a grad output nor the gradient of a tensor "
                     "of boundary " +
                     std::to_string(s - 1) + " that carries one");
      if (!inputGrads)
        fail(at, quoteName(out.name) + ": " + quoteName(bwd.name) +
                     " returns the parameter gradients alone");
      checkType(out, BindingKind::Output, *t, at,
                "the gradient of boundary " + std::to_string(b) + "'s tensor " +
                    std::to_string(i));
      given.insert(i);
    }
    if (inputGrads && s > 0)
      for (size_t i = 0; i < pipe.boundaries[s - 1].size(); ++i)
        if (pipe.boundaries[s - 1][i].grad && !given.count(int64_t(i)))
          fail(entryWhere(bwd),
               "returns no " + quoteName(boundaryName(s - 1, i) + ".grad") +
                   " (the gradient of tensor " + std::to_string(i) +
                   " of boundary " + std::to_string(s - 1) + ")");
    if (paramGrads)
      for (const Binding &in : fwd.inputs)
        if (in.kind == BindingKind::Param && !params.count(in.name))
          fail(entryWhere(bwd), "returns no gradient of param " +
                                    quoteName(in.name) + " (a grad output)");
  }

  /// "[0, 3]"
  static std::string stageList(const std::vector<int64_t> &stages) {
    std::string text = "[";
    for (size_t i = 0; i < stages.size(); ++i)
      text += (i ? ", " : "") + std::to_string(stages[i]);
    return text + "]";
  }

  /// The entry of `shared` that names `param` when stage s reads it but
  /// does not own it (its apply leaves the param alone), else null.
  const PlanPipeline::SharedParam *
  sharedNotOwned(int64_t s, std::string_view param) const {
    const PlanPipeline::SharedParam *p = pipe.findShared(param);
    return p && p->owner() != s ? p : nullptr;
  }

  /// The param whose optimizer state `state` is (`<param>.<suffix>`, the
  /// longest param name that fits), or "".
  std::string paramOfState(const std::string &state) const {
    std::string best;
    for (const std::string &param : allParams)
      if (param.size() > best.size() && state.size() > param.size() + 1 &&
          state.compare(0, param.size(), param) == 0 &&
          state[param.size()] == '.')
        best = param;
    return best;
  }

  [[noreturn]] void failNotOwner(const std::string &at, const std::string &what,
                                 const PlanPipeline::SharedParam &p) const {
    fail(at, what + " param " + quoteName(p.name) + ", shared by stages " +
                 stageList(p.stages) + ": only the owner's (stage " +
                 std::to_string(p.owner()) +
                 ") apply_gradients takes it, its gradient and its state");
  }

  void checkApply(int64_t s, const PlanEntry &fwd,
                  const PlanEntry &apply) const {
    std::set<std::string> grads;
    for (size_t k = 0; k < apply.inputs.size(); ++k) {
      const Binding &in = apply.inputs[k];
      std::string at = entryWhere(apply) + ": input " + std::to_string(k);
      if (in.kind == BindingKind::Param) {
        const Binding *p = fwd.findInput(in.name);
        if (!p || p->kind != BindingKind::Param)
          fail(at, "param " + quoteName(in.name) + " is not a param of " +
                       quoteName(fwd.name));
        if (const PlanPipeline::SharedParam *sp = sharedNotOwned(s, in.name))
          failNotOwner(at, "takes the", *sp);
        continue;
      }
      if (in.kind == BindingKind::State) {
        if (const PlanPipeline::SharedParam *sp =
                sharedNotOwned(s, paramOfState(in.name)))
          failNotOwner(at, "takes state " + quoteName(in.name) + " of the",
                       *sp);
        continue;
      }
      if (in.kind != BindingKind::Input || in.name == "step" ||
          in.name == "seed")
        continue;
      const std::string suffix = ".grad";
      std::string param =
          in.name.size() > suffix.size() &&
                  in.name.compare(in.name.size() - suffix.size(), suffix.size(),
                                  suffix) == 0
              ? in.name.substr(0, in.name.size() - suffix.size())
              : std::string();
      const Binding *p = param.empty() ? nullptr : fwd.findInput(param);
      if (!p || p->kind != BindingKind::Param)
        fail(at, quoteName(in.name) +
                     " is neither step, seed nor "
                     "'<param>.grad' for a param of " +
                     quoteName(fwd.name));
      if (const PlanPipeline::SharedParam *sp = sharedNotOwned(s, param))
        failNotOwner(
            at, "takes " + quoteName(in.name) + ", the gradient of the", *sp);
      // Whole, or (tensor parallelism) split along a dimension as the
      // param is.
      bool sameSplit = !in.shard ||
                       (p->shard && in.shard->alongDim() &&
                        in.shard->axis == p->shard->axis &&
                        in.shard->dim == p->shard->dim &&
                        in.shard->groups == p->shard->groups &&
                        in.shape == p->shape);
      if (in.dtype != p->dtype || in.wholeShape() != p->wholeShape() ||
          !sameSplit || !isFloatType(in.dtype))
        fail(at, quoteName(in.name) + " is " + describeBinding(in) +
                     ", but the gradient of param " + quoteName(param) +
                     " is " + describe(p->dtype, p->wholeShape()));
      grads.insert(param);
    }
    for (const Binding &in : fwd.inputs)
      if (in.kind == BindingKind::Param && !sharedNotOwned(s, in.name)) {
        const Binding *p = apply.findInput(in.name);
        if (!p || p->kind != BindingKind::Param)
          fail(entryWhere(apply), "takes no param " + quoteName(in.name) +
                                      " of stage " + std::to_string(s));
        if (!grads.count(in.name))
          fail(entryWhere(apply),
               "takes no input " + quoteName(in.name + ".grad") +
                   " (the gradient of param " + quoteName(in.name) + ")");
      }
  }

  /// The optional `shared`: its syntax; what the stages' entries do with
  /// each param is checkShared's.
  void parseShared(const json &value) {
    auto it = value.find("shared");
    if (it == value.end() || it->is_null())
      return;
    const std::string at = fieldWhere(where, "shared");
    if (!it->is_array())
      fail(at, std::string("expected an array, got ") + typeName(*it));
    std::map<std::string, size_t> seen;
    for (size_t k = 0; k < it->size(); ++k) {
      const json &item = (*it)[k];
      std::string iat = at + ": item " + std::to_string(k);
      if (!item.is_object())
        fail(iat, std::string("expected an object, got ") + typeName(item));
      PlanPipeline::SharedParam p;
      const json &name = member(item, "name", iat);
      if (!name.is_string() || name.get<std::string>().empty())
        fail(fieldWhere(iat, "name"),
             "expected a param's name, got " + name.dump());
      p.name = name.get<std::string>();
      if (auto [prior, inserted] = seen.emplace(p.name, k); !inserted)
        fail(fieldWhere(iat, "name"), quoteName(p.name) +
                                          " is listed twice (items " +
                                          std::to_string(prior->second) +
                                          " and " + std::to_string(k) + ")");
      const json &stages = getArray(item, "stages", iat);
      std::string sat = fieldWhere(iat, "stages");
      for (size_t i = 0; i < stages.size(); ++i) {
        const json &v = stages[i];
        bool ok =
            v.is_number_integer() &&
            (v.is_number_unsigned()
                 ? v.get<uint64_t>() < uint64_t(pipe.stages)
                 : v.get<int64_t>() >= 0 && v.get<int64_t>() < pipe.stages);
        if (!ok)
          fail(sat, "item " + std::to_string(i) +
                        ": expected a stage from 0 to " +
                        std::to_string(pipe.stages - 1) + ", got " + v.dump());
        p.stages.push_back(v.get<int64_t>());
        // (Checked here, so that a long list stops at its first repeat.)
        if (i > 0 && p.stages[i] <= p.stages[i - 1])
          fail(sat, quoteName(p.name) +
                        ": expected strictly increasing stages (the first "
                        "owns the param), got " +
                        stageList(p.stages) +
                        (i + 1 < stages.size() ? " ..." : ""));
      }
      if (p.stages.size() < 2)
        fail(sat, quoteName(p.name) + ": expected at least 2 stages, got " +
                      stageList(p.stages));
      pipe.shared.push_back(std::move(p));
    }
  }

  /// Each shared param is a param of exactly the listed stages' forwards,
  /// and their backwards return gradients that can be added (one dtype,
  /// shape and shard); no other param is read by two stages' forwards.
  /// Which applies take a shared param is checkApply's.
  void checkShared() {
    for (int64_t s = 0; s < pipe.stages; ++s)
      for (const Binding &in : need(s, "forward", "every stage has one").inputs)
        if (in.kind == BindingKind::Param)
          allParams.insert(in.name);
    const std::string at = fieldWhere(where, "shared");
    for (const PlanPipeline::SharedParam &p : pipe.shared) {
      if (!allParams.count(p.name))
        fail(at, quoteName(p.name) + " is not a param of any stage's forward");
      std::set<int64_t> listed(p.stages.begin(), p.stages.end());
      for (int64_t s = 0; s < pipe.stages; ++s) {
        const PlanEntry &fwd = *plan.findEntry(pipelineEntryName(s, "forward"));
        const Binding *in = fwd.findInput(p.name);
        bool reads = in && in->kind == BindingKind::Param;
        if (reads && !listed.count(s))
          fail(at, quoteName(p.name) + " is read by stage " +
                       std::to_string(s) + " (entry " + quoteName(fwd.name) +
                       "), which its stages " + stageList(p.stages) +
                       " do not list");
        if (!reads && listed.count(s))
          fail(at, quoteName(p.name) + " lists stage " + std::to_string(s) +
                       ", whose entry " + quoteName(fwd.name) +
                       " takes no param " + quoteName(p.name));
      }
      // The sums of the stages' gradients are added on the owner's rank.
      const Binding *first = nullptr;
      std::string firstEntry;
      for (int64_t s : p.stages)
        for (const char *kind : {"backward", "backward_weight"}) {
          const PlanEntry *e = plan.findEntry(pipelineEntryName(s, kind));
          if (!e)
            continue;
          for (size_t k = 0; k < e->outputs.size(); ++k) {
            const Binding &out = e->outputs[k];
            if (out.kind != BindingKind::Grad || out.name != p.name)
              continue;
            if (!first) {
              first = &out;
              firstEntry = e->name;
              continue;
            }
            bool sameShard =
                bool(out.shard) == bool(first->shard) &&
                (!out.shard || (out.shard->axis == first->shard->axis &&
                                out.shard->dim == first->shard->dim &&
                                out.shard->groups == first->shard->groups &&
                                out.shard->shape == first->shard->shape));
            if (out.dtype != first->dtype || out.shape != first->shape ||
                !sameShard)
              fail(entryWhere(*e) + ": output " + std::to_string(k),
                   "grad output " + quoteName(p.name) + " is " +
                       describeBinding(out) + ", but " + quoteName(firstEntry) +
                       " returns it as " + describeBinding(*first) +
                       " (the stages' gradients of a shared param are added)");
          }
        }
    }
    // A param that two stages' forwards read and `shared` does not list:
    // refused here, before the stages' applies (which take it in one of
    // them only, as loomc writes a shared param) could hide why.
    std::map<std::string, int64_t> readBy;
    for (int64_t s = 0; s < pipe.stages; ++s)
      for (const Binding &in :
           plan.findEntry(pipelineEntryName(s, "forward"))->inputs) {
        if (in.kind != BindingKind::Param || pipe.findShared(in.name))
          continue;
        auto [it, inserted] = readBy.emplace(in.name, s);
        if (!inserted)
          fail(where, "param " + quoteName(in.name) + " is taken by stage " +
                          std::to_string(it->second) + " (entry " +
                          quoteName(pipelineEntryName(it->second, "forward")) +
                          ") and stage " + std::to_string(s) + " (entry " +
                          quoteName(pipelineEntryName(s, "forward")) +
                          "): a tensor belongs to one stage (a param that "
                          "several stages read is listed in the pipeline's "
                          "'shared')");
      }
  }

  void parse(const json &value) {
    if (!value.is_object())
      fail(fieldWhere(what, "pipeline"),
           std::string("expected an object, got ") + typeName(value));
    if (!plan.mesh)
      fail(where, "the plan has no mesh (a pipeline runs over a mesh axis)");
    const json &axis = member(value, "axis", where);
    if (!axis.is_string())
      fail(fieldWhere(where, "axis"),
           std::string("expected a string, got ") + typeName(axis));
    pipe.axis = axis.get<std::string>();
    int index = plan.mesh->axisIndex(pipe.axis);
    if (index < 0)
      fail(fieldWhere(where, "axis"), quoteName(pipe.axis) +
                                          " is not an axis of the mesh (" +
                                          plan.mesh->describe() + ")");
    pipe.axisIndex = uint32_t(index);
    pipe.ranks = plan.mesh->shape[size_t(index)];
    // Bounds that keep the checker's simulation (S * M actions of each
    // kind) small.
    pipe.stages = getCount(value, "stages", where, 4096);
    pipe.virtualStages = getCount(value, "virtual_stages", where, 4096);
    pipe.microbatches = getCount(value, "microbatches", where, 65536);
    if (pipe.stages != pipe.virtualStages * pipe.ranks)
      fail(fieldWhere(where, "stages"),
           std::to_string(pipe.stages) + " is not virtual_stages (" +
               std::to_string(pipe.virtualStages) + ") times the " +
               std::to_string(pipe.ranks) + " rank(s) of mesh axis " +
               quoteName(pipe.axis));
    if (pipe.stages * pipe.microbatches > (int64_t(1) << 22))
      fail(where, "stages times microbatches exceeds 2^22");
    pipe.schedule.name = "file";
    if (auto it = value.find("schedule"); it != value.end() && !it->is_null()) {
      if (!it->is_string())
        fail(fieldWhere(where, "schedule"),
             std::string("expected a string, got ") + typeName(*it));
      pipe.schedule.name = it->get<std::string>();
    }

    const json &boundaries = getArray(value, "boundaries", where);
    if (int64_t(boundaries.size()) != pipe.stages - 1)
      fail(fieldWhere(where, "boundaries"),
           "expected " + std::to_string(pipe.stages - 1) +
               " lists (stages - 1), got " + std::to_string(boundaries.size()));
    for (size_t b = 0; b < boundaries.size(); ++b) {
      std::string at =
          fieldWhere(where, "boundaries") + ": boundary " + std::to_string(b);
      if (!boundaries[b].is_array())
        fail(at, std::string("expected an array of tensors, got ") +
                     typeName(boundaries[b]));
      std::vector<pp::BoundaryTensor> list;
      for (size_t i = 0; i < boundaries[b].size(); ++i) {
        const json &t = boundaries[b][i];
        std::string tat = at + ": tensor " + std::to_string(i);
        if (!t.is_object())
          fail(tat, std::string("expected an object, got ") + typeName(t));
        pp::BoundaryTensor tensor;
        const json &name = member(t, "name", tat);
        if (!name.is_string() ||
            name.get<std::string>() != boundaryName(int64_t(b), int64_t(i)))
          fail(fieldWhere(tat, "name"),
               "expected " + quoteName(boundaryName(int64_t(b), int64_t(i))) +
                   ", got " + name.dump());
        tensor.name = name.get<std::string>();
        const json &dtype = member(t, "dtype", tat);
        std::optional<DType> d =
            dtype.is_string() ? dtypeFromShortName(dtype.get<std::string>())
                              : std::nullopt;
        if (!d)
          fail(fieldWhere(tat, "dtype"),
               "expected a dtype name (f32, i64, ...), got " + dtype.dump());
        tensor.dtype = std::string(dtypeToShortName(*d));
        tensor.shape = getShape(t, tat);
        const json &grad = member(t, "grad", tat);
        if (!grad.is_boolean())
          fail(fieldWhere(tat, "grad"),
               std::string("expected true or false, got ") + typeName(grad));
        tensor.grad = grad.get<bool>();
        if (tensor.grad && !isFloatType(*d))
          fail(fieldWhere(tat, "grad"),
               "a tensor of " + tensor.dtype + " carries no gradient");
        list.push_back(std::move(tensor));
      }
      pipe.boundaries.push_back(std::move(list));
    }

    const json &actions = getArray(value, "actions", where);
    if (int64_t(actions.size()) != pipe.ranks)
      fail(fieldWhere(where, "actions"),
           "expected " + std::to_string(pipe.ranks) +
               " lists (one per rank of mesh axis " + quoteName(pipe.axis) +
               "), got " + std::to_string(actions.size()));
    pp::Schedule &schedule = pipe.schedule;
    schedule.ranks = pipe.ranks;
    schedule.stages = pipe.stages;
    schedule.microbatches = pipe.microbatches;
    pipe.fullBackward.assign(size_t(pipe.stages), false);
    pipe.splitBackward.assign(size_t(pipe.stages), false);
    for (size_t r = 0; r < actions.size(); ++r) {
      std::string at =
          fieldWhere(where, "actions") + ": rank " + std::to_string(r);
      if (!actions[r].is_array())
        fail(at, std::string("expected an array of action tokens, got ") +
                     typeName(actions[r]));
      if (actions[r].size() >
          size_t(16) * size_t(pipe.stages) * size_t(pipe.microbatches))
        fail(at, "more actions than 16 per stage and micro-batch");
      std::vector<pp::Action> list;
      for (size_t k = 0; k < actions[r].size(); ++k) {
        const json &token = actions[r][k];
        std::string tat = at + ": step " + std::to_string(k);
        if (!token.is_string())
          fail(tat,
               std::string("expected an action token, got ") + typeName(token));
        pp::Action action;
        std::string why;
        if (!pp::parseAction(token.get<std::string>(), &action, &why))
          fail(tat, why);
        if (action.stage < 0 || action.stage >= pipe.stages ||
            action.microbatch < 0 || action.microbatch >= pipe.microbatches)
          fail(tat, quoteName(token.get<std::string>()) +
                        " names a stage or micro-batch out of range (" +
                        std::to_string(pipe.stages) + " stages, " +
                        std::to_string(pipe.microbatches) + " micro-batches)");
        if (action.kind == pp::ActionKind::Backward)
          pipe.fullBackward[size_t(action.stage)] = true;
        if (action.kind == pp::ActionKind::BackwardInput ||
            action.kind == pp::ActionKind::BackwardWeight)
          pipe.splitBackward[size_t(action.stage)] = true;
        list.push_back(action);
      }
      schedule.actions.push_back(std::move(list));
    }
    std::string why;
    if (!pp::checkSchedule(schedule, pipe.boundaries, &pipe.stats, &why))
      fail(fieldWhere(where, "actions"), why);

    parseShared(value);
    checkShared();

    // The entries of each stage, and which stage owns each tensor (a
    // shared param: the stages `shared` lists, checked above).
    std::map<std::string, std::pair<int64_t, std::string>> owner;
    for (int64_t s = 0; s < pipe.stages; ++s) {
      const PlanEntry &fwd = need(s, "forward", "every stage has one");
      checkForward(s, fwd);
      std::vector<const PlanEntry *> entries = {&fwd};
      if (pipe.fullBackward[size_t(s)]) {
        const PlanEntry &bwd = need(s, "backward", "its actions have B");
        checkBackward(s, fwd, bwd, true, true);
        entries.push_back(&bwd);
      }
      if (pipe.splitBackward[size_t(s)]) {
        // Stage 0 has no input gradients: its I computes nothing, and
        // loomc writes no stage0_backward_input.
        const PlanEntry *bi =
            s > 0 ? &need(s, "backward_input", "its actions have I and W")
                  : plan.findEntry(pipelineEntryName(s, "backward_input"));
        const PlanEntry &bw =
            need(s, "backward_weight", "its actions have I and W");
        if (bi) {
          checkBackward(s, fwd, *bi, true, false);
          entries.push_back(bi);
        }
        checkBackward(s, fwd, bw, false, true);
        entries.push_back(&bw);
      }
      const PlanEntry &apply =
          need(s, "apply_gradients", "every stage has one");
      checkApply(s, fwd, apply);
      entries.push_back(&apply);
      for (const PlanEntry *e : entries) {
        checkNoPipelineAxis(*e);
        for (const Binding &in : e->inputs) {
          if (!isStateKind(in.kind))
            continue;
          if (pipe.findShared(in.name)) {
            if (in.kind != BindingKind::Param)
              fail(entryWhere(*e),
                   "takes the shared param " + quoteName(in.name) + " as " +
                       bindingKindName(in.kind) + ", not as a param");
            continue;
          }
          auto [it, inserted] = owner.emplace(in.name, std::pair(s, e->name));
          if (!inserted && it->second.first != s)
            fail(where, std::string(bindingKindName(in.kind)) + " " +
                            quoteName(in.name) + " is taken by stage " +
                            std::to_string(it->second.first) + " (entry " +
                            quoteName(it->second.second) + ") and stage " +
                            std::to_string(s) + " (entry " +
                            quoteName(e->name) +
                            "): a tensor belongs to one stage");
        }
      }
    }
  }
};

} // namespace

bool parseBoundaryName(const std::string &name, int64_t *b, int64_t *i,
                       bool *grad) {
  const std::string prefix = "pp.b", suffix = ".grad";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  std::string rest = name.substr(prefix.size());
  *grad = rest.size() > suffix.size() &&
          rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (*grad)
    rest.resize(rest.size() - suffix.size());
  size_t dot = rest.find('.');
  auto number = [](const std::string &text, int64_t *out) {
    if (text.empty() || text.size() > 9 || (text.size() > 1 && text[0] == '0'))
      return false;
    int64_t v = 0;
    for (char c : text) {
      if (c < '0' || c > '9')
        return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  return dot != std::string::npos && number(rest.substr(0, dot), b) &&
         number(rest.substr(dot + 1), i);
}

bool parsePipeline(const json &value, Plan &plan, const std::string &what,
                   std::string *error, ErrorCode *code) {
  try {
    PlanPipeline pipe;
    Checker checker{plan, pipe, what, what + ": pipeline", {}};
    checker.parse(value);
    plan.pipeline = std::move(pipe);
    return true;
  } catch (const PipelineError &e) {
    if (error)
      *error = e.message;
    if (code)
      *code = ErrorCode::Format;
  }
  return false;
}

} // namespace detail
} // namespace loomrt
