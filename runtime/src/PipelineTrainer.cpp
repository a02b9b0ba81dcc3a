//===- PipelineTrainer.cpp - train() for a plan with a pipeline -----------===//
//
// Each step, every rank runs the action list of its coordinate r on the
// pipeline axis (docs/pipeline.md): F runs stage<s>_forward on a
// micro-batch and keeps (stashes) its inputs until the stage's B (or W) of
// that micro-batch; B runs stage<s>_backward on the stash and the output
// gradients and adds the parameter gradients into the stage's sums; SF/SB
// post nonblocking sends to the neighbouring stages' ranks and RF/RB block
// until their message is there. The lists were checked at load
// (pp::checkSchedule): they cannot deadlock, every send is received, and
// messages between two ranks match in order, activations and gradients
// apart. After the list each stage's sums are divided by M and its
// stage<s>_apply_gradients runs: the update one process makes with
// --accumulate M (the same sums in the same order, the same division).
//
// The data order is train()'s: a step takes M * n_dp micro-batches of the
// loader, data-parallel row i the run [i M, (i + 1) M), so checkpoints
// move between a pipelined run and one process (--accumulate M * n_dp).
// A rank holds the params and state of its own stages only; checkpoints,
// --save-params and the final tensors are gathered to world rank 0 over
// the pipeline axis (from the row whose other coordinates are 0). A
// param several stages read (the plan's `shared`) has a copy on each of
// their ranks: after the list the other stages' gradient sums are added
// into its owner's (the first stage's), and after the updates the owner's
// new value replaces the copies, so they stay the same bits.
//
//===----------------------------------------------------------------------===//

#include "PipelineTrainer.h"

#include "DataParallel.h"
#include "PlanPipeline.h"
#include "TrainerSupport.h"

#include "loomrt/Collectives.h"
#include "loomrt/Mesh.h"
#include "loomrt/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

namespace loomrt::training {
namespace {

namespace fs = std::filesystem;

// Message tags: 8192 per kind, so that every tag stays within the 32767
// that MPI guarantees. A tag names (boundary, micro-batch, tensor) modulo
// 8192; where that wraps, order still matches the messages: the schedule
// checker proved that two ranks' messages of one kind pair up in the
// order they are sent, and MPI does not overtake within a tag.
enum TagKind : int { kActivation = 0, kGradient = 1, kGather = 2, kReport = 3 };
constexpr uint64_t kTagsPerKind = 8192;
int tagOf(TagKind kind, uint64_t unique) {
  return int(uint64_t(kind) * kTagsPerKind + unique % kTagsPerKind);
}

/// Larger tensors go as several messages (in order, under one tag): MPI
/// counts in int.
constexpr size_t kChunkBytes = size_t(1) << 30;

/// Where an input of a stage's entry comes from.
enum class Source : uint8_t { State, Step, Seed, Boundary, BoundaryGrad, Data };
struct Feed {
  Source source;
  size_t index; ///< boundary tensor, or data input
};
/// Where an output goes.
enum class Sink : uint8_t { Boundary, BoundaryGrad, ParamGrad, Loss };
struct Place {
  Sink sink;
  size_t index; ///< boundary tensor
};

struct EntryRun {
  const PlanEntry *entry = nullptr;
  std::vector<Feed> feeds;
  std::vector<Place> places;
};

/// A stage this rank runs, and what its micro-batches hold during a step.
struct StageState {
  int64_t stage = 0;
  EntryRun forward, backward, backwardInput, backwardWeight;
  const PlanEntry *apply = nullptr;
  /// apply_gradients' `<param>.grad` inputs and their params.
  std::vector<std::pair<std::string, std::string>> gradOf;
  /// The bytes of a micro-batch's stash: the forward's non-state inputs.
  uint64_t stashBytes = 0;
  /// Per micro-batch, per boundary tensor: boundary s - 1 received (the
  /// stash, with the micro-batch's data), boundary s computed, boundary
  /// s's gradients received, boundary s - 1's gradients computed.
  std::vector<std::vector<NpyArray>> received, outputs, outGrads, inGrads;
  std::map<std::string, NpyArray> grads; ///< this step's sums, by param
  uint64_t held = 0, peakBytes = 0;
  int64_t inFlight = 0, peakInFlight = 0;
};

struct PendingSend {
  std::unique_ptr<Request> request;
  std::shared_ptr<const std::vector<NpyArray>> data; ///< kept until done
};

struct ActionRecord {
  int64_t step;
  uint32_t action;
  double start, end; ///< seconds since the run's common start
};

std::string describeBytes(uint64_t bytes) {
  char buf[48];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1 << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.2f KiB", double(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)bytes);
  return buf;
}

class PipelineRun {
public:
  PipelineRun(Artifact &artifact, const TrainOptions &opt, TrainResult &result)
      : artifact(artifact), opt(opt), result(result), plan(artifact.plan()),
        pipe(*plan.pipeline), P(pipe.ranks), S(pipe.stages),
        M(pipe.microbatches) {}

  void run();

private:
  Artifact &artifact;
  const TrainOptions &opt;
  TrainResult &result;
  const Plan &plan;
  const PlanPipeline &pipe;
  const int64_t P, S, M;

  Collectives *comm = nullptr; ///< the world; null: one process
  /// Gradient compression of the stages' dp reductions (GradCompression.h).
  std::unique_ptr<CompressionRun> compression;
  /// The world handed to the artifact for the run (its stages' collective
  /// steps and meshComms use it).
  std::optional<MeshCollectives> meshComm;
  bool lead = true;
  const MeshComms *comms = nullptr;
  Collectives *ppComm = nullptr; ///< the pipeline axis's, when P > 1
  int64_t ppIndex = 0;
  DataParallelPlace dp;
  bool rowZero = true;  ///< every coordinate but the pipeline's is 0
  bool lossRank = true; ///< reports its row's loss (last stage, tp 0)

  std::vector<StageState> stages; ///< this rank's, by stage
  std::vector<int> localOf;       ///< stage -> index in `stages`, or -1
  std::vector<std::set<std::string>> owned;     ///< tensors per coordinate
  /// What each coordinate sends to world rank 0 for a checkpoint: `owned`
  /// less the copies of shared params whose owner stage is elsewhere.
  std::vector<std::set<std::string>> gathered;
  std::map<std::string, NpyArray> tensors;      ///< this rank's (shards)
  std::vector<DataInput> localInputs;           ///< what its stages read
  std::vector<DataInput> allInputs;             ///< what every stage reads
  std::vector<std::vector<DataInput>> inputsOf; ///< by stage
  int64_t batch = 0;                            ///< samples per micro-batch
  std::string batchEntry;                       ///< an entry that says so
  size_t maxTensors = 1; ///< most tensors of one boundary

  // The step being run.
  int64_t step = 0;
  NpyArray stepArray;
  std::vector<Batch> batches;  ///< this row's M micro-batches
  std::vector<NpyArray> seeds; ///< and their `seed` inputs
  double lossSum = 0;
  std::vector<PendingSend> pending;

  Clock::time_point t0;
  bool tracing = false;
  std::vector<ActionRecord> records;
  double bubbleSum = 0;
  int64_t bubbleSteps = 0;

  StageState &local(int64_t s) { return stages[size_t(localOf[size_t(s)])]; }
  double now() const {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::string where(const pp::Action &a) const {
    return "step " + std::to_string(step) + ": " + pp::formatAction(a);
  }

  void setUp();
  EntryRun entryRun(const PlanEntry *entry);
  std::vector<DataInput> stageInputs(const PlanEntry &forward);
  std::vector<NpyArray> runEntry(const EntryRun &run, StageState &st, int64_t m,
                                 const pp::Action &a);
  void place(const EntryRun &run, StageState &st, int64_t m,
             std::vector<NpyArray> &outs);
  void release(StageState &st, int64_t m);
  void act(const pp::Action &a);
  void send(const pp::Action &a, std::vector<NpyArray> arrays, int64_t b,
            TagKind kind, int64_t toStage);
  void receive(const pp::Action &a, std::vector<NpyArray> &arrays, int64_t b,
               TagKind kind, int64_t fromStage);
  void progressSends();
  void finishSends();
  void waitAll(std::vector<std::unique_ptr<Request>> &requests,
               const std::vector<std::string> &whats);
  /// Shared params: the non-owner stages' gradient sums added into the
  /// owner's (before the updates), and the owner's new value copied to
  /// the other stages (after them).
  void reduceSharedGradients();
  void copySharedParams();
  void postBytes(Collectives &c, std::shared_ptr<const std::vector<NpyArray>>,
                 const NpyArray &a, int to, int tag, const std::string &what);
  void recvBytes(Collectives &c, NpyArray &a, int from, int tag,
                 const std::string &what,
                 std::vector<std::unique_ptr<Request>> &requests);
  std::map<std::string, NpyArray> gatherAll();
  /// The gradient compression state of every stage (every dp rank's
  /// residuals) on world rank 0; the others: empty. A collective.
  std::map<std::string, NpyArray> gatherCompression();
  PipelineStats gatherStats();
  void writeTrace();
};

/// Waits for `request`, testing without sleeping for the first 2 ms (a
/// neighbour's message is usually that close), then with the watchdog of
/// Request::wait.
bool waitSoon(Request &request, std::string *error) {
  auto start = Clock::now();
  bool done = false;
  while (Clock::now() - start < std::chrono::milliseconds(2)) {
    if (!request.test(&done, error))
      return false;
    if (done)
      return true;
  }
  return request.wait(error);
}

std::vector<DataInput> PipelineRun::stageInputs(const PlanEntry &forward) {
  PlanEntry view;
  view.name = forward.name;
  int64_t b, i;
  bool grad;
  for (const Binding &in : forward.inputs)
    if (!detail::parseBoundaryName(in.name, &b, &i, &grad))
      view.inputs.push_back(in);
  return dataInputsOf(view);
}

EntryRun PipelineRun::entryRun(const PlanEntry *entry) {
  EntryRun run;
  run.entry = entry;
  if (!entry)
    return run;
  for (const Binding &in : entry->inputs) {
    int64_t b, i;
    bool grad;
    Feed feed{Source::State, 0};
    if (isStateKind(in.kind)) {
      feed.source = Source::State;
    } else if (in.name == "step") {
      feed.source = Source::Step;
    } else if (in.name == "seed") {
      feed.source = Source::Seed;
    } else if (detail::parseBoundaryName(in.name, &b, &i, &grad)) {
      feed = {grad ? Source::BoundaryGrad : Source::Boundary, size_t(i)};
    } else {
      size_t k = 0;
      while (k < localInputs.size() && localInputs[k].name != in.name)
        ++k;
      feed = {Source::Data, k};
    }
    run.feeds.push_back(feed);
  }
  for (const Binding &out : entry->outputs) {
    int64_t b, i;
    bool grad;
    if (out.kind == BindingKind::Grad)
      run.places.push_back({Sink::ParamGrad, 0});
    else if (detail::parseBoundaryName(out.name, &b, &i, &grad))
      run.places.push_back(
          {grad ? Sink::BoundaryGrad : Sink::Boundary, size_t(i)});
    else
      run.places.push_back({Sink::Loss, 0}); // parsePlan: the only other
  }
  return run;
}

void PipelineRun::setUp() {
  if (plan.target != "cpu")
    fail("pipeline-parallel training runs cpu artifacts for now; this "
         "artifact's target is " +
             quoteName(plan.target) +
             " (moving the stages' activations between GPUs, over NCCL "
             "point to point, is not implemented yet)",
         ErrorCode::Unsupported);
  checkTrainOptions(opt);
  if (!opt.evalDataPath.empty() || opt.evalData)
    fail("--eval-data with a pipeline-parallel artifact: its stages have "
         "no entry 'predict' or 'forward' to evaluate with (evaluate the "
         "trained parameters with an artifact of the model compiled "
         "without --pp)",
         ErrorCode::Unsupported);
  if (opt.accumulate != 1 && opt.accumulate != M)
    fail("--accumulate " + std::to_string(opt.accumulate) +
         ": the artifact's pipeline runs " + std::to_string(M) +
         " micro-batches per step (loomc --microbatches); leave "
         "--accumulate out or give " +
         std::to_string(M));
  comm = opt.collectives;
  lead = !comm || comm->rank() == 0;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!checkMeshWorld(plan, comm, "the artifact", &error, &code))
    fail(error, code);
  meshComm.emplace(artifact, comm);
  if (!(comms = artifact.meshComms(&error, &code)))
    fail(error, code);
  ppIndex = meshIndex(plan, pipe.axisIndex, comm);
  dp = dataParallelPlace(plan, comm);
  if (P > 1)
    ppComm = comms->axis(pipe.axisIndex);
  int dpAxis = plan.mesh->axisIndex("dp");
  for (uint32_t a = 0; a < plan.mesh->axes.size(); ++a) {
    if (a == pipe.axisIndex)
      continue;
    bool zero = meshIndex(plan, a, comm) == 0;
    rowZero &= zero;
    if (int(a) != dpAxis)
      lossRank &= zero;
  }
  lossRank &= ppIndex == (S - 1) % P;

  // Which tensors each coordinate holds, and this rank's stages.
  owned.resize(size_t(P));
  localOf.assign(size_t(S), -1);
  auto addInputs = [](std::vector<DataInput> &into,
                      const std::vector<DataInput> &from,
                      const std::string &entry) {
    for (const DataInput &d : from) {
      auto it = std::find_if(into.begin(), into.end(), [&](const DataInput &x) {
        return x.name == d.name;
      });
      if (it == into.end())
        into.push_back(d);
      else if (it->dtype != d.dtype || it->sampleShape != d.sampleShape)
        fail("entry " + quoteName(entry) + " takes data input " +
                 quoteName(d.name) + " as " + describe(d.dtype, d.sampleShape) +
                 " per sample, another stage's forward as " +
                 describe(it->dtype, it->sampleShape),
             ErrorCode::Unsupported);
    }
  };
  inputsOf.resize(size_t(S));
  for (int64_t s = 0; s < S; ++s) {
    const PlanEntry &fwd = *plan.findEntry(pipelineEntryName(s, "forward"));
    inputsOf[size_t(s)] = stageInputs(fwd);
    if (!inputsOf[size_t(s)].empty()) {
      int64_t b = compiledBatch(fwd, inputsOf[size_t(s)]);
      if (batch != 0 && b != batch)
        fail("entries " + quoteName(batchEntry) + " and " +
                 quoteName(fwd.name) + " take batches of " +
                 std::to_string(batch) + " and " + std::to_string(b) +
                 " samples",
             ErrorCode::Unsupported);
      batch = b;
      batchEntry = fwd.name;
    }
    addInputs(allInputs, inputsOf[size_t(s)], fwd.name);
    for (const char *kind : {"forward", "backward", "backward_input",
                             "backward_weight", "apply_gradients"})
      if (const PlanEntry *e = plan.findEntry(pipelineEntryName(s, kind)))
        for (const Binding &in : e->inputs)
          if (isStateKind(in.kind))
            owned[size_t(s % P)].insert(in.name);
    if (s % P == ppIndex)
      addInputs(localInputs, inputsOf[size_t(s)], fwd.name);
  }
  gathered = owned;
  for (const PlanPipeline::SharedParam &p : pipe.shared)
    for (int64_t s : p.stages)
      if (s % P != p.owner() % P)
        gathered[size_t(s % P)].erase(p.name);
  if (batch == 0)
    compiledBatch(*plan.findEntry(pipelineEntryName(0, "forward")), {});
  if (opt.batchSize != 0 && opt.batchSize != batch)
    fail("--batch-size " + std::to_string(opt.batchSize) +
         " does not match the compiled batch size " + std::to_string(batch) +
         " of entry " + quoteName(batchEntry) +
         " (shapes are static: recompile for another batch size)");
  for (const std::vector<pp::BoundaryTensor> &b : pipe.boundaries)
    maxTensors = std::max(maxTensors, b.size());

  for (int64_t s = ppIndex; s < S; s += P) {
    StageState st;
    st.stage = s;
    auto entry = [&](const char *kind) {
      return plan.findEntry(pipelineEntryName(s, kind));
    };
    st.forward = entryRun(entry("forward"));
    if (pipe.fullBackward[size_t(s)])
      st.backward = entryRun(entry("backward"));
    if (pipe.splitBackward[size_t(s)]) {
      st.backwardInput = entryRun(entry("backward_input"));
      st.backwardWeight = entryRun(entry("backward_weight"));
    }
    st.apply = entry("apply_gradients");
    for (const Binding &in : st.apply->inputs)
      if (in.kind == BindingKind::Input && in.name != "step" &&
          in.name != "seed")
        st.gradOf.emplace_back(in.name, in.name.substr(0, in.name.size() - 5));
    for (const Binding &in : st.forward.entry->inputs)
      if (!isStateKind(in.kind))
        st.stashBytes += in.bytes;
    st.received.resize(size_t(M));
    st.outputs.resize(size_t(M));
    st.outGrads.resize(size_t(M));
    st.inGrads.resize(size_t(M));
    localOf[size_t(s)] = int(stages.size());
    stages.push_back(std::move(st));
  }
}

std::vector<NpyArray> PipelineRun::runEntry(const EntryRun &run, StageState &st,
                                            int64_t m, const pp::Action &a) {
  const PlanEntry &entry = *run.entry;
  std::vector<TensorRef> refs;
  refs.reserve(entry.inputs.size());
  for (size_t k = 0; k < entry.inputs.size(); ++k) {
    const Binding &in = entry.inputs[k];
    const Feed &feed = run.feeds[k];
    const NpyArray *value = nullptr;
    switch (feed.source) {
    case Source::State: {
      auto it = tensors.find(in.name);
      if (it == tensors.end())
        fail("no value for " + std::string(bindingKindName(in.kind)) + " " +
             quoteName(in.name) + " of entry " + quoteName(entry.name));
      value = &it->second;
      break;
    }
    case Source::Step:
      value = &stepArray;
      break;
    case Source::Seed:
      value = &seeds[size_t(m)];
      break;
    case Source::Boundary:
      value = &st.received[size_t(m)].at(feed.index);
      break;
    case Source::BoundaryGrad:
      value = &st.outGrads[size_t(m)].at(feed.index);
      break;
    case Source::Data:
      value = &batches[size_t(m)].arrays.at(feed.index);
      break;
    }
    refs.push_back(tensorRef(in.name, *value));
  }
  std::vector<NpyArray> outs;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!artifact.run(entry.name, refs, &outs, &error, &code))
    fail(where(a) + ": " + error, code);
  return outs;
}

void PipelineRun::place(const EntryRun &run, StageState &st, int64_t m,
                        std::vector<NpyArray> &outs) {
  const PlanEntry &entry = *run.entry;
  for (size_t k = 0; k < outs.size(); ++k) {
    const Place &p = run.places[k];
    switch (p.sink) {
    case Sink::Boundary: {
      std::vector<NpyArray> &to = st.outputs[size_t(m)];
      to.resize(pipe.boundaries[size_t(st.stage)].size());
      to[p.index] = std::move(outs[k]);
      break;
    }
    case Sink::BoundaryGrad: {
      std::vector<NpyArray> &to = st.inGrads[size_t(m)];
      to.resize(pipe.boundaries[size_t(st.stage - 1)].size());
      to[p.index] = std::move(outs[k]);
      break;
    }
    case Sink::ParamGrad: {
      // In the order the actions run: micro-batch order in every
      // generated schedule, as --accumulate sums them.
      const std::string &name = entry.outputs[k].name;
      auto it = st.grads.find(name);
      if (it == st.grads.end())
        st.grads.emplace(name, std::move(outs[k]));
      else
        addInto(it->second, outs[k]);
      break;
    }
    case Sink::Loss:
      lossSum += scalarValue(outs[k]);
      break;
    }
  }
}

/// The stage's B (or W) of micro-batch m ran: its stash goes.
void PipelineRun::release(StageState &st, int64_t m) {
  st.received[size_t(m)] = std::vector<NpyArray>();
  st.outGrads[size_t(m)] = std::vector<NpyArray>();
  st.held -= st.stashBytes;
  --st.inFlight;
}

void PipelineRun::postBytes(Collectives &c,
                            std::shared_ptr<const std::vector<NpyArray>> keep,
                            const NpyArray &a, int to, int tag,
                            const std::string &what) {
  size_t offset = 0;
  do {
    size_t n = std::min(kChunkBytes, a.data.size() - offset);
    std::string error;
    std::unique_ptr<Request> request =
        c.send(a.data.data() + offset, n, DType::U8, to, tag, &error);
    if (!request)
      fail(what + ": " + error, ErrorCode::IO);
    pending.push_back({std::move(request), keep});
    offset += n;
  } while (offset < a.data.size());
}

void PipelineRun::recvBytes(Collectives &c, NpyArray &a, int from, int tag,
                            const std::string &what,
                            std::vector<std::unique_ptr<Request>> &requests) {
  size_t offset = 0;
  do {
    size_t n = std::min(kChunkBytes, a.data.size() - offset);
    std::string error;
    std::unique_ptr<Request> request =
        c.recv(a.data.data() + offset, n, DType::U8, from, tag, &error);
    if (!request)
      fail(what + ": " + error, ErrorCode::IO);
    requests.push_back(std::move(request));
    offset += n;
  } while (offset < a.data.size());
}

/// Sends boundary b's tensors (kind kActivation) or their gradients
/// (kGradient) to the rank of `toStage`.
void PipelineRun::send(const pp::Action &a, std::vector<NpyArray> arrays,
                       int64_t b, TagKind kind, int64_t toStage) {
  auto keep = std::make_shared<const std::vector<NpyArray>>(std::move(arrays));
  const std::vector<pp::BoundaryTensor> &list = pipe.boundaries[size_t(b)];
  for (size_t i = 0; i < list.size(); ++i) {
    if (kind == kGradient && !list[i].grad)
      continue;
    const uint64_t unique =
        (uint64_t(b) * uint64_t(M) + uint64_t(a.microbatch)) * maxTensors + i;
    postBytes(*ppComm, keep, keep->at(i), int(toStage % P), tagOf(kind, unique),
              where(a) + ": sending " +
                  quoteName(list[i].name + (kind == kGradient ? ".grad" : "")) +
                  " to pipeline rank " + std::to_string(toStage % P));
  }
}

void PipelineRun::receive(const pp::Action &a, std::vector<NpyArray> &arrays,
                          int64_t b, TagKind kind, int64_t fromStage) {
  const std::vector<pp::BoundaryTensor> &list = pipe.boundaries[size_t(b)];
  arrays.assign(list.size(), NpyArray());
  std::vector<std::unique_ptr<Request>> requests;
  std::vector<std::string> whats;
  for (size_t i = 0; i < list.size(); ++i) {
    if (kind == kGradient && !list[i].grad)
      continue;
    NpyArray &x = arrays[i];
    x.dtype = *dtypeFromShortName(list[i].dtype);
    x.shape = list[i].shape;
    x.data.resize(*checkedByteSize(x.dtype, x.shape));
    const uint64_t unique =
        (uint64_t(b) * uint64_t(M) + uint64_t(a.microbatch)) * maxTensors + i;
    std::string what =
        where(a) + ": receiving " +
        quoteName(list[i].name + (kind == kGradient ? ".grad" : "")) +
        " from pipeline rank " + std::to_string(fromStage % P);
    recvBytes(*ppComm, x, int(fromStage % P), tagOf(kind, unique), what,
              requests);
    whats.resize(requests.size(), what);
  }
  for (size_t k = 0; k < requests.size(); ++k) {
    std::string error;
    if (!waitSoon(*requests[k], &error))
      fail(whats[k] + ": " + error, ErrorCode::IO);
  }
}

void PipelineRun::progressSends() {
  for (size_t k = 0; k < pending.size();) {
    bool done = false;
    std::string error;
    if (!pending[k].request->test(&done, &error))
      fail("step " + std::to_string(step) +
               ": a send to a pipeline "
               "neighbour: " +
               error,
           ErrorCode::IO);
    if (done)
      pending.erase(pending.begin() + std::ptrdiff_t(k));
    else
      ++k;
  }
}

void PipelineRun::finishSends() {
  for (PendingSend &p : pending) {
    std::string error;
    if (!p.request->wait(&error))
      fail("step " + std::to_string(step) +
               ": a send to a pipeline "
               "neighbour: " +
               error,
           ErrorCode::IO);
  }
  pending.clear();
}

void PipelineRun::waitAll(std::vector<std::unique_ptr<Request>> &requests,
                          const std::vector<std::string> &whats) {
  for (size_t k = 0; k < requests.size(); ++k) {
    std::string error;
    if (!requests[k]->wait(&error))
      fail(whats[k] + ": " + error, ErrorCode::IO);
  }
  requests.clear();
}

// The shared params' messages: tag kind kGather (whole tensors moved
// between steps), (param, stage) modulo 8192. Both sides post them in the
// same order (params in the plan's order, stages increasing) and finish
// them before the next phase, so they pair up in order even where the
// tags wrap or meet a checkpoint's gather.
void PipelineRun::reduceSharedGradients() {
  std::vector<std::unique_ptr<Request>> requests;
  std::vector<std::string> whats;
  // others[i][j]: the sum of param i's j-th stage, from that stage's rank.
  std::vector<std::vector<NpyArray>> others(pipe.shared.size());
  auto sumOf = [&](int64_t s, const std::string &name) -> NpyArray & {
    auto it = local(s).grads.find(name);
    if (it == local(s).grads.end())
      fail("step " + std::to_string(step) + ": stage " + std::to_string(s) +
           " computed no gradient of the shared param " + quoteName(name));
    return it->second;
  };
  for (size_t i = 0; i < pipe.shared.size(); ++i) {
    const PlanPipeline::SharedParam &p = pipe.shared[i];
    const int64_t ownerRank = p.owner() % P;
    others[i].resize(p.stages.size());
    for (size_t j = 1; j < p.stages.size(); ++j) {
      const int64_t s = p.stages[j], rank = s % P;
      if (rank == ownerRank)
        continue; // the same rank: added below
      const int tag = tagOf(kGather, uint64_t(i) * uint64_t(S) + uint64_t(s));
      if (ppIndex == rank) {
        postBytes(*ppComm, nullptr, sumOf(s, p.name), int(ownerRank), tag,
                  "step " + std::to_string(step) + ": sending stage " +
                      std::to_string(s) + "'s gradient of the shared param " +
                      quoteName(p.name) + " to pipeline rank " +
                      std::to_string(ownerRank));
      } else if (ppIndex == ownerRank) {
        const NpyArray &own = sumOf(p.owner(), p.name);
        NpyArray &x = others[i][j];
        x.dtype = own.dtype;
        x.shape = own.shape;
        x.data.resize(own.data.size());
        std::string what =
            "step " + std::to_string(step) + ": receiving stage " +
            std::to_string(s) + "'s gradient of the shared param " +
            quoteName(p.name) + " from pipeline rank " + std::to_string(rank);
        recvBytes(*ppComm, x, int(rank), tag, what, requests);
        whats.resize(requests.size(), what);
      }
    }
  }
  waitAll(requests, whats);
  finishSends();
  // The owner's total: its own sum, then the others' in stage order.
  for (size_t i = 0; i < pipe.shared.size(); ++i) {
    const PlanPipeline::SharedParam &p = pipe.shared[i];
    const int64_t ownerRank = p.owner() % P;
    if (ppIndex != ownerRank)
      continue;
    NpyArray &total = sumOf(p.owner(), p.name);
    for (size_t j = 1; j < p.stages.size(); ++j) {
      const int64_t s = p.stages[j];
      addInto(total, s % P == ownerRank ? sumOf(s, p.name) : others[i][j]);
    }
  }
}

void PipelineRun::copySharedParams() {
  std::vector<std::unique_ptr<Request>> requests;
  std::vector<std::string> whats;
  for (size_t i = 0; i < pipe.shared.size(); ++i) {
    const PlanPipeline::SharedParam &p = pipe.shared[i];
    const int64_t ownerRank = p.owner() % P;
    std::set<int64_t> ranks; // the other ranks that hold a copy
    for (int64_t s : p.stages)
      if (s % P != ownerRank)
        ranks.insert(s % P);
    if (ppIndex != ownerRank && !ranks.count(ppIndex))
      continue;
    NpyArray &value = tensors.at(p.name);
    for (int64_t rank : ranks) {
      const int tag =
          tagOf(kGather, uint64_t(i) * uint64_t(S) + uint64_t(rank));
      if (ppIndex == ownerRank) {
        postBytes(*ppComm, nullptr, value, int(rank), tag,
                  "step " + std::to_string(step) +
                      ": sending the shared param " + quoteName(p.name) +
                      " to pipeline rank " + std::to_string(rank));
      } else if (ppIndex == rank) {
        std::string what = "step " + std::to_string(step) +
                           ": receiving the shared param " + quoteName(p.name) +
                           " from pipeline rank " + std::to_string(ownerRank);
        recvBytes(*ppComm, value, int(ownerRank), tag, what, requests);
        whats.resize(requests.size(), what);
      }
    }
  }
  waitAll(requests, whats);
  finishSends();
}

void PipelineRun::act(const pp::Action &a) {
  const int64_t s = a.stage, m = a.microbatch;
  StageState &st = local(s);
  switch (a.kind) {
  case pp::ActionKind::Forward: {
    // Stage s - 1 on this rank (one pipeline rank): its outputs.
    if (s > 0 && localOf[size_t(s - 1)] >= 0)
      st.received[size_t(m)] = std::move(local(s - 1).outputs[size_t(m)]);
    std::vector<NpyArray> outs = runEntry(st.forward, st, m, a);
    place(st.forward, st, m, outs);
    st.held += st.stashBytes;
    st.peakBytes = std::max(st.peakBytes, st.held);
    st.peakInFlight = std::max(st.peakInFlight, ++st.inFlight);
    break;
  }
  case pp::ActionKind::Backward:
  case pp::ActionKind::BackwardInput: {
    if (s < S - 1 && localOf[size_t(s + 1)] >= 0)
      st.outGrads[size_t(m)] = std::move(local(s + 1).inGrads[size_t(m)]);
    const EntryRun &run =
        a.kind == pp::ActionKind::Backward ? st.backward : st.backwardInput;
    // Stage 0's I, without an entry, has nothing to compute.
    if (run.entry) {
      std::vector<NpyArray> outs = runEntry(run, st, m, a);
      place(run, st, m, outs);
    }
    if (a.kind == pp::ActionKind::Backward)
      release(st, m);
    break;
  }
  case pp::ActionKind::BackwardWeight: {
    std::vector<NpyArray> outs = runEntry(st.backwardWeight, st, m, a);
    place(st.backwardWeight, st, m, outs);
    release(st, m);
    break;
  }
  case pp::ActionKind::SendActivation:
    send(a, std::move(st.outputs[size_t(m)]), s, kActivation, s + 1);
    st.outputs[size_t(m)] = std::vector<NpyArray>();
    break;
  case pp::ActionKind::SendGradient:
    send(a, std::move(st.inGrads[size_t(m)]), s - 1, kGradient, s - 1);
    st.inGrads[size_t(m)] = std::vector<NpyArray>();
    break;
  case pp::ActionKind::RecvActivation:
    receive(a, st.received[size_t(m)], s - 1, kActivation, s - 1);
    break;
  case pp::ActionKind::RecvGradient:
    receive(a, st.outGrads[size_t(m)], s, kGradient, s + 1);
    break;
  }
}

/// Tensors as bytes (name, dtype, shape, data) to move between ranks.
NpyArray packTensors(const std::map<std::string, NpyArray> &tensors) {
  NpyArray out;
  out.dtype = DType::U8;
  auto put = [&](const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out.data.insert(out.data.end(), b, b + n);
  };
  auto putU64 = [&](uint64_t v) { put(&v, 8); };
  putU64(tensors.size());
  for (const auto &[name, a] : tensors) {
    putU64(name.size());
    put(name.data(), name.size());
    putU64(uint64_t(a.dtype));
    putU64(a.shape.size());
    for (int64_t d : a.shape)
      putU64(uint64_t(d));
    putU64(a.data.size());
    put(a.data.data(), a.data.size());
  }
  out.shape = {int64_t(out.data.size())};
  return out;
}

void unpackTensors(const NpyArray &bytes,
                   std::map<std::string, NpyArray> &into) {
  size_t at = 0;
  auto take = [&](void *p, size_t n) {
    if (bytes.data.size() - at < n)
      fail("gathering the gradient compression state: a truncated message",
           ErrorCode::IO);
    std::memcpy(p, bytes.data.data() + at, n);
    at += n;
  };
  auto takeU64 = [&] {
    uint64_t v;
    take(&v, 8);
    return v;
  };
  for (uint64_t count = takeU64(); count > 0; --count) {
    std::string name(size_t(takeU64()), '\0');
    take(name.data(), name.size());
    NpyArray a;
    a.dtype = DType(takeU64());
    a.shape.resize(size_t(takeU64()));
    for (int64_t &d : a.shape)
      d = int64_t(takeU64());
    a.data.resize(size_t(takeU64()));
    take(a.data.data(), a.data.size());
    into[name] = std::move(a);
  }
}

/// Every tensor of every stage, whole, on world rank 0 (the others: their
/// own stages' whole tensors). A collective: every rank calls it.
std::map<std::string, NpyArray> PipelineRun::gatherAll() {
  std::map<std::string, NpyArray> whole =
      hasShards(plan) ? wholeTensors(plan, *comms, tensors) : tensors;
  if (P == 1 || !rowZero)
    return whole;
  std::map<std::string, const Binding *> bindings = stateBindings(plan);
  std::string error;
  if (ppIndex == 0) {
    std::vector<std::unique_ptr<Request>> requests;
    for (int64_t q = 1; q < P; ++q) {
      uint64_t index = 0;
      for (const std::string &name : gathered[size_t(q)]) {
        const Binding &b = *bindings.at(name);
        NpyArray &a = whole[name];
        a.dtype = b.dtype;
        a.shape = b.wholeShape();
        a.data.resize(b.wholeBytes());
        recvBytes(*ppComm, a, int(q), tagOf(kGather, index++),
                  "gathering " + quoteName(name) + " from pipeline rank " +
                      std::to_string(q),
                  requests);
      }
    }
    for (std::unique_ptr<Request> &r : requests)
      if (!r->wait(&error))
        fail("gathering the tensors of the pipeline's stages: " + error,
             ErrorCode::IO);
  } else {
    auto keep = std::make_shared<const std::vector<NpyArray>>();
    uint64_t index = 0;
    for (const std::string &name : gathered[size_t(ppIndex)])
      postBytes(*ppComm, keep, whole.at(name), 0, tagOf(kGather, index++),
                "sending " + quoteName(name) + " to pipeline rank 0");
    finishSends();
  }
  return whole;
}

PipelineStats PipelineRun::gatherStats() {
  const int64_t V = pipe.virtualStages;
  const size_t width = size_t(3 + 2 * V);
  std::vector<double> mine(width, 0);
  mine[0] = double(ppIndex);
  mine[1] = bubbleSum;
  mine[2] = double(bubbleSteps);
  for (size_t v = 0; v < stages.size(); ++v) {
    mine[3 + v] = double(stages[v].peakBytes);
    mine[3 + size_t(V) + v] = double(stages[v].peakInFlight);
  }
  int world = comm ? comm->size() : 1;
  std::vector<double> all(width * size_t(world));
  if (comm) {
    std::string error;
    if (!waitFor(
            comm->allGather(mine.data(), all.data(), width, DType::F64, &error),
            &error))
      fail("gathering the pipeline's measurements: " + error, ErrorCode::IO);
  } else {
    all = mine;
  }
  PipelineStats stats;
  stats.schedule = pipe.schedule.name;
  stats.ranks = P;
  stats.virtualStages = V;
  stats.microbatches = M;
  stats.idealBubble = pp::idealBubble(pipe.schedule.name, P, V, M);
  for (int64_t q = 0; q < P; ++q) {
    PipelineRankStats r;
    r.rank = q;
    for (int64_t s = q; s < S; s += P)
      r.stages.push_back(s);
    r.peakStashBytes.assign(size_t(V), 0);
    r.peakInFlight.assign(size_t(V), 0);
    double bubbles = 0;
    int64_t counted = 0;
    for (int w = 0; w < world; ++w) {
      const double *x = all.data() + size_t(w) * width;
      if (int64_t(x[0]) != q)
        continue;
      if (x[2] > 0) {
        bubbles += x[1] / x[2];
        ++counted;
      }
      for (int64_t v = 0; v < V; ++v) {
        r.peakStashBytes[size_t(v)] =
            std::max(r.peakStashBytes[size_t(v)], uint64_t(x[3 + v]));
        r.peakInFlight[size_t(v)] =
            std::max(r.peakInFlight[size_t(v)], int64_t(x[3 + V + v]));
      }
    }
    r.bubble = counted ? bubbles / double(counted) : std::nan("");
    stats.ranksStats.push_back(std::move(r));
  }
  return stats;
}

std::map<std::string, NpyArray> PipelineRun::gatherCompression() {
  if (!compression || !compression->on())
    return {};
  // Over dp first (every rank), then the rows' first ranks to rank 0.
  std::map<std::string, NpyArray> mine = compression->checkpointTensors();
  if (P == 1 || !rowZero)
    return mine;
  std::string error;
  if (ppIndex != 0) {
    auto keep = std::make_shared<std::vector<NpyArray>>();
    keep->push_back(packTensors(mine));
    keep->push_back(scalarI64(int64_t(keep->front().data.size())));
    postBytes(*ppComm, keep, (*keep)[1], 0, tagOf(kReport, 2),
              "sending the gradient compression state to pipeline rank 0");
    postBytes(*ppComm, keep, (*keep)[0], 0, tagOf(kReport, 3),
              "sending the gradient compression state to pipeline rank 0");
    finishSends();
    return {};
  }
  for (int64_t q = 1; q < P; ++q) {
    std::string what = "receiving the gradient compression state of "
                       "pipeline rank " +
                       std::to_string(q);
    NpyArray size = scalarI64(0);
    std::vector<std::unique_ptr<Request>> requests;
    recvBytes(*ppComm, size, int(q), tagOf(kReport, 2), what, requests);
    for (std::unique_ptr<Request> &r : requests)
      if (!r->wait(&error))
        fail(what + ": " + error, ErrorCode::IO);
    requests.clear();
    NpyArray bytes;
    bytes.dtype = DType::U8;
    bytes.data.resize(size_t(readI64(size)));
    bytes.shape = {int64_t(bytes.data.size())};
    recvBytes(*ppComm, bytes, int(q), tagOf(kReport, 3), what, requests);
    for (std::unique_ptr<Request> &r : requests)
      if (!r->wait(&error))
        fail(what + ": " + error, ErrorCode::IO);
    unpackTensors(bytes, mine);
  }
  return mine;
}

/// Rank 0 writes every rank's action records as JSON lines, rank by rank.
void PipelineRun::writeTrace() {
  std::string lines;
  const int me = comm ? comm->rank() : 0;
  char buf[320];
  for (const ActionRecord &r : records) {
    std::snprintf(
        buf, sizeof buf,
        "{\"rank\": %d, \"pp\": %lld, \"step\": %lld, \"action\": "
        "\"%s\", \"start\": %.9f, \"end\": %.9f}\n",
        me, (long long)ppIndex, (long long)r.step,
        pp::formatAction(pipe.schedule.actions[size_t(ppIndex)][r.action])
            .c_str(),
        r.start, r.end);
    lines += buf;
  }
  std::string error;
  if (comm && me != 0) {
    NpyArray size = scalarI64(int64_t(lines.size()));
    NpyArray text;
    text.dtype = DType::U8;
    text.shape = {int64_t(lines.size())};
    text.data.assign(lines.begin(), lines.end());
    auto keep = std::make_shared<const std::vector<NpyArray>>();
    postBytes(*comm, keep, size, 0, tagOf(kReport, 0), "sending the trace");
    postBytes(*comm, keep, text, 0, tagOf(kReport, 1), "sending the trace");
    finishSends();
    return;
  }
  std::vector<std::string> parts = {std::move(lines)};
  for (int r = 1; comm && r < comm->size(); ++r) {
    NpyArray size = scalarI64(0);
    std::vector<std::unique_ptr<Request>> requests;
    recvBytes(*comm, size, r, tagOf(kReport, 0), "receiving the trace",
              requests);
    if (!requests[0]->wait(&error))
      fail("receiving rank " + std::to_string(r) + "'s trace: " + error,
           ErrorCode::IO);
    requests.clear();
    NpyArray text;
    text.data.resize(size_t(readI64(size)));
    recvBytes(*comm, text, r, tagOf(kReport, 1), "receiving the trace",
              requests);
    for (std::unique_ptr<Request> &q : requests)
      if (!q->wait(&error))
        fail("receiving rank " + std::to_string(r) + "'s trace: " + error,
             ErrorCode::IO);
    parts.emplace_back(text.data.begin(), text.data.end());
  }
  std::vector<detail::ByteSpan> spans;
  for (const std::string &p : parts)
    spans.push_back({reinterpret_cast<const uint8_t *>(p.data()), p.size()});
  ErrorCode code = ErrorCode::Ok;
  if (!detail::writeFileAtomically(opt.pipelineTracePath, spans,
                                   detail::ErrorSink{&error, &code}))
    fail(error, code);
}

void PipelineRun::run() {
  setUp();
  const int64_t micros = M * dp.ranks;
  Progress progress(lead ? opt.progress : ProgressMode::None,
                    opt.log ? opt.log : stderr, 0, opt.steps);
  const std::set<std::string> &mine = owned[size_t(ppIndex)];

  std::map<std::string, NpyArray> whole, compressionSaved;
  CheckpointInfo start;
  bool resumed = startingPoint(artifact, opt, batch, micros, progress, &mine,
                               whole, start, &compressionSaved);
  tensors = std::move(whole);
  step = start.step;
  result.startStep = step;
  const uint64_t seed = start.seed;
  compression =
      std::make_unique<CompressionRun>(artifact, opt, comms, seed, progress);
  {
    std::vector<const PlanEntry *> applies;
    for (const StageState &st : stages)
      applies.push_back(st.apply);
    compression->addEntries(applies, progress);
  }
  compression->restore(resumed, start, compressionSaved, progress);

  // The data: every rank checks every stage's inputs (so that all fail
  // alike) and assembles its own stages'.
  const DataSource source{opt.dataPath, opt.data, "the training data",
                          &opt.tokens};
  Dataset file, data;
  if (opt.tokens.format != TokenFormat::None) {
    // A token stream gives each input its role from the whole list.
    loadDataset(source, allInputs, batchEntry, data);
  } else {
    loadDataset(source, {}, "", file);
    const DataSource view{"", &file.arrays, file.path};
    for (int64_t s = 0; s < S; ++s)
      if (!inputsOf[size_t(s)].empty()) {
        Dataset check;
        loadDataset(view, inputsOf[size_t(s)],
                    pipelineEntryName(s, "forward"), check);
      }
    loadDataset(view, allInputs, batchEntry, data);
  }
  if (data.samples < uint64_t(batch))
    fail(data.path + ": " + std::to_string(data.samples) +
             " samples, fewer than one batch of " + std::to_string(batch),
         ErrorCode::Format);
  if (resumed && start.dataSamples != 0 && start.dataSamples != data.samples)
    progress.note("warning: the checkpoint was written for " +
                  std::to_string(start.dataSamples) + " samples, " + data.path +
                  " has " + std::to_string(data.samples) +
                  "; the data order will differ from the original run");

  if (!opt.checkpointDir.empty() && lead)
    prepareCheckpointDir(opt.checkpointDir);
  Metrics metrics, trace;
  if (lead) {
    metrics.open(opt.metricsPath, resumed);
    trace.open(opt.dataTracePath, resumed);
  }
  bool stopRequested = false;
  auto report = [&](const std::string &body) {
    metrics.line(body);
    if (lead && opt.onMetrics && !opt.onMetrics("{" + body + "}"))
      stopRequested = true;
  };
  if (hasShards(plan)) {
    std::string error;
    if (!shardTensors(plan, comm, tensors, &error))
      fail(error);
  }

  BatchLoader loader(data, localInputs, batch, seed, start.dataEpoch,
                     start.dataBatch, opt.prefetch);
  uint64_t posEpoch = start.dataEpoch, posBatch = start.dataBatch;
  if (posBatch >= loader.perEpoch()) {
    posBatch = 0;
    ++posEpoch;
  }
  auto checkpointInfo = [&] {
    CheckpointInfo info;
    info.step = step;
    info.seed = seed;
    info.dataEpoch = posEpoch;
    info.dataBatch = posBatch;
    info.dataSamples = data.samples;
    info.batchSize = batch;
    info.accumulate = micros;
    compression->stamp(info);
    return info;
  };
  int64_t lastSaved = resumed ? step : -1;
  // `all` from gatherAll; the compression state gathered here (every rank
  // takes part).
  auto save = [&](const std::map<std::string, NpyArray> &all) {
    std::map<std::string, NpyArray> residuals = gatherCompression();
    lastSaved = step;
    if (!lead)
      return;
    std::string name = checkpointFileName(step);
    writeCheckpoint(opt.checkpointDir + "/" + name, all, &residuals,
                    checkpointInfo());
    writeLatest(opt.checkpointDir, name);
    pruneCheckpoints(opt.checkpointDir, opt.keepCheckpoints);
  };

  // lr: from the lead's first stage's update, when it reports one.
  const Binding *lrOut = stages.front().apply->findOutput("lr");
  if (lrOut &&
      (!isFloat(lrOut->dtype) || lrOut->bytes != dtypeSize(lrOut->dtype)))
    lrOut = nullptr;
  tracing = !opt.pipelineTracePath.empty();
  const std::vector<pp::Action> &actions =
      pipe.schedule.actions[size_t(ppIndex)];
  if (comm) {
    std::string error;
    if (!comm->barrier(&error))
      fail("starting the pipeline: " + error, ErrorCode::IO);
  }
  t0 = Clock::now();
  auto begin = t0;
  double lastLoss = std::nan("");
  bool warnedNaN = false;
  int64_t samplesDone = 0, firstStep = step;

  while (step < opt.steps) {
    auto stepBegin = Clock::now();
    stepArray = scalarI64(step);
    compression->beginStep(step);
    batches.clear();
    seeds.clear();
    for (int64_t micro = 0; micro < micros; ++micro) {
      Batch b = loader.next();
      trace.traceLine(step + 1, micro, micro / M, b.samples);
      posEpoch = b.epoch;
      posBatch = b.index;
      loader.advance(posEpoch, posBatch);
      if (micro / M == dp.index) {
        batches.push_back(std::move(b));
        seeds.push_back(scalarI64(dropoutSeed(seed, step, micro)));
      }
    }
    lossSum = 0;
    double listStart = now(), computed = 0;
    for (size_t k = 0; k < actions.size(); ++k) {
      const pp::Action &a = actions[k];
      double t = now();
      act(a);
      double e = now();
      if (pp::isCompute(a.kind))
        computed += e - t;
      if (tracing)
        records.push_back({step, uint32_t(k), t, e});
      progressSends();
    }
    finishSends();
    // Every row's loss on every rank; and the end of every rank's list.
    double total = lossRank ? lossSum : 0;
    if (comm) {
      std::string error;
      if (!waitFor(
              comm->allReduce(&total, 1, DType::F64, ReduceOp::Sum, &error),
              &error))
        fail("step " + std::to_string(step) + ": summing the loss: " + error,
             ErrorCode::IO);
    }
    double window = now() - listStart;
    double bubble = window > 0 ? 1 - computed / window : 0;
    if (step == firstStep) {
      bubbleSum = bubble; // kept only when it stays the one step
      bubbleSteps = 1;
    } else {
      if (step == firstStep + 1)
        bubbleSum = bubbleSteps = 0;
      bubbleSum += bubble;
      ++bubbleSteps;
    }
    double loss = total / double(micros);
    reduceSharedGradients();

    // The updates, stage by stage: each sum divided by M, as --accumulate
    // divides it (a dp row's; apply_gradients averages over the rows).
    NpyArray applySeed = scalarI64(dropoutSeed(seed, step, micros));
    double lr = std::nan("");
    for (StageState &st : stages) {
      for (auto &[name, g] : st.grads)
        divideBy(g, M);
      std::vector<TensorRef> refs;
      addTensorInputs(*st.apply, tensors, refs);
      addScalarInputs(*st.apply, stepArray, applySeed, refs);
      for (const auto &[input, param] : st.gradOf) {
        auto it = st.grads.find(param);
        if (it == st.grads.end())
          fail("step " + std::to_string(step) + ": stage " +
               std::to_string(st.stage) + " computed no gradient of " +
               quoteName(param));
        refs.push_back(tensorRef(input, it->second));
      }
      std::vector<NpyArray> outs;
      std::string error;
      ErrorCode code = ErrorCode::Ok;
      if (!artifact.run(st.apply->name, refs, &outs, &error, &code))
        fail("step " + std::to_string(step) + ": " + error, code);
      for (size_t i = 0; i < st.apply->outputs.size(); ++i) {
        const Binding &out = st.apply->outputs[i];
        if (out.name == "step") {
          if (readI64(outs[i]) != step + 1)
            fail("entry " + quoteName(st.apply->name) + " returned step " +
                     std::to_string(readI64(outs[i])) + ", expected " +
                     std::to_string(step + 1),
                 ErrorCode::Format);
        } else if (&out == lrOut) {
          lr = scalarValue(outs[i]);
        } else if (out.kind == BindingKind::Output && tensors.count(out.name)) {
          tensors[out.name] = std::move(outs[i]);
        }
      }
      st.grads.clear();
    }
    copySharedParams();

    ++step;
    double stepSeconds = secondsSince(stepBegin);
    int64_t stepSamples = batch * micros;
    samplesDone += stepSamples;
    lastLoss = loss;
    if (!std::isfinite(loss) && !warnedNaN) {
      std::string warning = "warning: loss is " + formatNumber(loss) +
                            " at step " + std::to_string(step) +
                            " (loom-run --check-numerics stops at the op "
                            "where it first becomes inf or NaN)";
      if (opt.progress != ProgressMode::None)
        progress.note(warning);
      else if (opt.warnings && lead)
        std::fprintf(opt.log ? opt.log : stderr, "%s\n", warning.c_str());
      warnedNaN = true;
    }
    double elapsed = secondsSince(begin);
    double sps = stepSeconds > 0 ? stepSamples / stepSeconds : 0;
    std::string body = "\"step\": " + std::to_string(step) +
                       ", \"loss\": " + jsonNumber(loss) +
                       ", \"samples_per_sec\": " + jsonNumber(sps) +
                       ", \"epoch\": " + std::to_string(posEpoch);
    if (lrOut)
      body += ", \"lr\": " + jsonNumber(lr);
    report(body);
    progress.update(step, loss, elapsed > 0 ? samplesDone / elapsed : 0,
                    elapsed);
    if (comm && opt.onMetrics) {
      // The caller asked rank 0 to stop: every rank stops.
      int64_t stop = stopRequested;
      std::string error;
      if (!waitFor(comm->allReduce(&stop, 1, DType::I64, ReduceOp::Max, &error),
                   &error))
        fail(error, ErrorCode::IO);
      stopRequested = stop != 0;
    }
    if (opt.saveEvery > 0 && step % opt.saveEvery == 0)
      save(gatherAll());
    if (stopRequested)
      break;
  }
  double seconds = secondsSince(begin);
  progress.endBar();

  // Whole tensors: every stage's on rank 0, for the last checkpoint,
  // --save-params and the caller.
  std::map<std::string, NpyArray> all = gatherAll();
  if (!opt.checkpointDir.empty() && lastSaved != step)
    save(all);
  int dpAxis = plan.mesh->axisIndex("dp");
  if (dpAxis >= 0 && comms->axis(uint32_t(dpAxis))) {
    std::map<std::string, NpyArray> mineWhole;
    for (const std::string &name : mine)
      mineWhole.emplace(name, all.at(name));
    std::string error;
    bool agree = false;
    if (!ranksAgree(*comms->axis(uint32_t(dpAxis)), mineWhole, &agree, &error))
      fail(error);
    if (!agree)
      fail("after step " + std::to_string(step) +
           ", the data-parallel ranks of a pipeline stage hold different "
           "parameters or optimizer state");
  }
  if (!opt.saveParamsPath.empty() && lead) {
    SafetensorsWriter writer;
    for (const auto &[name, binding] : stateBindings(plan))
      if (isModelKind(binding->kind)) {
        const NpyArray &a = all.at(name);
        writer.addBorrowed(name, a.dtype, a.shape, a.data.data(),
                           a.data.size());
      }
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!writer.write(opt.saveParamsPath, &error, &code))
      fail(error, code);
  }
  result.pipeline = gatherStats();
  if (tracing)
    writeTrace();
  compression->report(result, ppComm);

  result.finalStep = step;
  result.stopped = stopRequested;
  result.position = checkpointInfo();
  result.lastLoss = lastLoss;
  result.seconds = seconds;
  result.samplesPerSecond = seconds > 0 ? samplesDone / seconds : 0;
  const PipelineStats &ps = result.pipeline;
  const bool ran = step > result.startStep;
  if (lead && ran) {
    std::string body =
        "\"step\": " + std::to_string(step) +
        ", \"pipeline\": {\"schedule\": \"" + ps.schedule +
        "\", \"ranks\": " + std::to_string(P) +
        ", \"virtual_stages\": " + std::to_string(ps.virtualStages) +
        ", \"microbatches\": " + std::to_string(M) + ", \"ideal_bubble\": " +
        (ps.idealBubble < 0 ? std::string("null")
                            : jsonNumber(ps.idealBubble)) +
        ", \"per_rank\": [";
    for (const PipelineRankStats &r : ps.ranksStats) {
      body += std::string(r.rank ? ", " : "") +
              "{\"rank\": " + std::to_string(r.rank) +
              ", \"bubble\": " + jsonNumber(r.bubble) + ", \"stages\": [";
      for (size_t v = 0; v < r.stages.size(); ++v)
        body +=
            std::string(v ? ", " : "") +
            "{\"stage\": " + std::to_string(r.stages[v]) +
            ", \"peak_stash_bytes\": " + std::to_string(r.peakStashBytes[v]) +
            ", \"peak_in_flight\": " + std::to_string(r.peakInFlight[v]) + "}";
      body += "]}";
    }
    metrics.line(body + "]}");
    if (compression->on())
      metrics.line(
          CompressionRun::metricsLine(result, step, step - result.startStep));
  }
  if (!progress.quiet()) {
    if (step == result.startStep)
      progress.note("nothing to train: already at step " +
                    std::to_string(step) + " of " + std::to_string(opt.steps));
    else
      progress.note("trained steps " + std::to_string(result.startStep) + ".." +
                    std::to_string(step) + " in " + formatSeconds(seconds) +
                    ": " + formatNumber(result.samplesPerSecond) +
                    " samples/s, loss " + formatNumber(lastLoss));
  }
  if (!progress.quiet() && ran) {
    progress.note("pipeline: schedule " + ps.schedule + ", " +
                  std::to_string(P) + " rank(s) x " +
                  std::to_string(ps.virtualStages) + " stage(s), " +
                  std::to_string(M) + " micro-batches per step; ideal bubble " +
                  (ps.idealBubble < 0 ? std::string("unknown")
                                      : formatNumber(ps.idealBubble)));
    for (const PipelineRankStats &r : ps.ranksStats) {
      std::string line = "  pipeline rank " + std::to_string(r.rank) +
                         ": bubble " + formatNumber(r.bubble) +
                         " measured; peak stash";
      for (size_t v = 0; v < r.stages.size(); ++v)
        line += std::string(v ? "," : "") + " stage " +
                std::to_string(r.stages[v]) + " " +
                describeBytes(r.peakStashBytes[v]) + " (" +
                std::to_string(r.peakInFlight[v]) + " micro-batch" +
                (r.peakInFlight[v] == 1 ? "" : "es") + " in flight)";
      progress.note(line);
    }
    if (tracing)
      progress.note("pipeline trace: " + opt.pipelineTracePath);
    if (std::string c =
            CompressionRun::summary(result, step - result.startStep);
        !c.empty())
      progress.note(c);
  }
  result.tensors = std::move(all);
}

} // namespace

void trainPipeline(Artifact &artifact, const TrainOptions &options,
                   TrainResult &result) {
  PipelineRun(artifact, options, result).run();
}

} // namespace loomrt::training
