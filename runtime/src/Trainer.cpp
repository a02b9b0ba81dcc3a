//===- Trainer.cpp - Training loop: data, steps, eval, checkpoints --------===//
//
// Determinism is the design constraint: the batches a step sees are a pure
// function of (seed, epoch, batch index), so a checkpoint that records the
// next (epoch, batch index) and the step counter lets a resumed run feed
// exactly the batches, dropout seeds and parameters an uninterrupted run
// would. The prefetch thread only moves work earlier; it never changes what a
// batch holds.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Trainer.h"
#include "loomrt/Collectives.h"

#include "loomrt/Mesh.h"
#include "loomrt/Safetensors.h"

#include "DataParallel.h"
#include "GradientBuckets.h"
#include "LeadHeartbeat.h"
#include "PipelineTrainer.h"
#include "Support.h"
#include "TrainerSupport.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <signal.h>
#include <thread>
#include <unistd.h>

namespace loomrt {

using detail::ErrorSink;
using detail::quoteName;
namespace fs = std::filesystem;
using namespace training;

namespace {

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

/// A view of rows [first, first + count) of a data-set array.
TensorRef rowsOf(const std::string &name, const DataArray &array,
                 const std::vector<int64_t> &batchShape, uint64_t rowBytes,
                 uint64_t first, uint64_t count) {
  TensorRef ref;
  ref.name = name;
  ref.dtype = array.dtype;
  ref.shape = batchShape.data();
  ref.rank = batchShape.size();
  ref.data = array.data + first * rowBytes;
  ref.nbytes = count * rowBytes;
  return ref;
}

template <typename T>
int64_t argmaxStrided(const uint8_t *base, int64_t n, int64_t stride) {
  int64_t best = 0;
  T bestValue;
  std::memcpy(&bestValue, base, sizeof(T));
  for (int64_t c = 1; c < n; ++c) {
    T v;
    std::memcpy(&v, base + c * stride * sizeof(T), sizeof(T));
    // NaN never wins, like numpy's argmax would not; first maximum kept.
    if (v > bestValue || (std::isnan(bestValue) && !std::isnan(v))) {
      bestValue = v;
      best = c;
    }
  }
  return best;
}

bool labelValue(const DataArray &labels, size_t i, int64_t &out) {
  const uint8_t *p = labels.data;
  switch (labels.dtype) {
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p + i * 8, 8);
    out = v;
    return true;
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p + i * 4, 4);
    out = v;
    return true;
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p + i * 2, 2);
    out = v;
    return true;
  }
  case DType::I8:
    out = static_cast<int8_t>(p[i]);
    return true;
  case DType::U8:
    out = p[i];
    return true;
  default:
    return false;
  }
}

/// `afterBatch`, if any, is called after every batch (a heartbeat).
void evaluateImpl(Artifact &artifact,
                  const std::map<std::string, NpyArray> &tensors,
                  const DataSource &source, int64_t step, EvalResult &result,
                  const std::function<void()> &afterBatch = {}) {
  const PlanEntry *predict = artifact.entry("predict");
  const PlanEntry *forward = artifact.entry("forward");
  if (!predict && !forward)
    fail("evaluation needs an entry 'predict' (accuracy) or 'forward' "
         "(loss); the artifact has neither",
         ErrorCode::Unsupported);
  if (forward && !forward->findOutput("loss"))
    forward = nullptr; // a forward without a loss has nothing to report
  if (predict && predict->outputs.empty())
    fail("entry 'predict' has no outputs", ErrorCode::Unsupported);
  std::vector<DataInput> predictInputs, forwardInputs;
  if (predict)
    predictInputs = dataInputsOf(*predict);
  if (forward)
    forwardInputs = dataInputsOf(*forward);

  // The labels: forward's data input that predict does not take, if exactly
  // one; else an input named "labels".
  std::string labelName = "labels";
  {
    std::vector<std::string> extra;
    for (const DataInput &d : forwardInputs)
      if (std::none_of(predictInputs.begin(), predictInputs.end(),
                       [&](const DataInput &p) { return p.name == d.name; }))
        extra.push_back(d.name);
    if (extra.size() == 1)
      labelName = extra[0];
  }
  std::vector<DataInput> all = forwardInputs;
  for (const DataInput &d : predictInputs)
    if (std::none_of(all.begin(), all.end(),
                     [&](const DataInput &p) { return p.name == d.name; }))
      all.push_back(d);
  Dataset data;
  loadDataset(source, all, predict ? "predict" : "forward", data);
  const std::string &path = data.path;
  NpyArray stepArray = scalarI64(step);
  NpyArray seedArray = scalarI64(0);
  result = EvalResult();

  if (predict) {
    int64_t batch = compiledBatch(*predict, predictInputs);
    auto labelsIt = data.arrays.find(labelName);
    if (labelsIt == data.arrays.end())
      fail(path + ": no array " + quoteName(labelName) +
               " with the labels for accuracy",
           ErrorCode::Format);
    const DataArray &labels = labelsIt->second;
    if (labels.shape.empty() ||
        static_cast<uint64_t>(labels.shape[0]) != data.samples)
      fail(path + ": labels " + quoteName(labelName) + " are " +
               describe(labels.dtype, labels.shape) + ", expected " +
               std::to_string(data.samples) + " samples",
           ErrorCode::Format);
    const Binding &pred = predict->outputs[0];
    if (!isFloat(pred.dtype))
      fail("entry 'predict': output " + quoteName(pred.name) + " is " +
               describe(pred.dtype, pred.shape) +
               "; accuracy needs f32 or f64 predictions",
           ErrorCode::Unsupported);
    std::vector<int64_t> labelShape = labels.shape;
    labelShape[0] = batch;
    // Class axis: last if labels are predictions without their last dim,
    // else dim 1 if that fits ([N, C, ...] layouts).
    int axis = -1;
    const std::vector<int64_t> &p = pred.shape;
    if (!p.empty() &&
        labelShape == std::vector<int64_t>(p.begin(), p.end() - 1))
      axis = static_cast<int>(p.size()) - 1;
    else if (p.size() >= 2) {
      std::vector<int64_t> without = p;
      without.erase(without.begin() + 1);
      if (labelShape == without)
        axis = 1;
    }
    if (axis < 0)
      fail("cannot compute accuracy: labels " + quoteName(labelName) + " " +
               detail::formatShape(labelShape) +
               " are neither the predictions' shape " + detail::formatShape(p) +
               " without its last dimension nor without dimension 1",
           ErrorCode::Unsupported);
    int64_t outer = 1, classes = p[axis], inner = 1;
    for (int i = 0; i < axis; ++i)
      outer *= p[i];
    for (size_t i = axis + 1; i < p.size(); ++i)
      inner *= p[i];
    uint64_t batches = data.samples / static_cast<uint64_t>(batch);
    int64_t correct = 0, counted = 0;
    uint64_t labelRow = labels.nbytes / std::max<uint64_t>(data.samples, 1);
    size_t labelsPerRow = labelRow / dtypeSize(labels.dtype);
    for (uint64_t b = 0; b < batches; ++b) {
      std::vector<TensorRef> refs;
      std::vector<std::vector<int64_t>> shapes(predictInputs.size());
      for (size_t i = 0; i < predictInputs.size(); ++i) {
        const DataInput &d = predictInputs[i];
        shapes[i] = {batch};
        shapes[i].insert(shapes[i].end(), d.sampleShape.begin(),
                         d.sampleShape.end());
        refs.push_back(rowsOf(d.name, data.arrays.at(d.name), shapes[i],
                              d.rowBytes, b * batch, batch));
      }
      addTensorInputs(*predict, tensors, refs);
      addScalarInputs(*predict, stepArray, seedArray, refs);
      std::vector<NpyArray> outs;
      std::string error;
      ErrorCode code;
      if (!artifact.run("predict", refs, &outs, &error, &code))
        fail(error, code);
      if (afterBatch)
        afterBatch();
      const NpyArray &pr = outs[0];
      size_t esize = dtypeSize(pr.dtype);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          const uint8_t *base =
              pr.data.data() + (o * classes * inner + in) * esize;
          int64_t guess = pr.dtype == DType::F32
                              ? argmaxStrided<float>(base, classes, inner)
                              : argmaxStrided<double>(base, classes, inner);
          int64_t label;
          size_t li = b * batch * labelsPerRow + o * inner + in;
          if (!labelValue(labels, li, label))
            fail(path + ": labels " + quoteName(labelName) + " are " +
                     std::string(dtypeToShortName(labels.dtype)) +
                     "; accuracy needs integer class labels",
                 ErrorCode::Format);
          // Out-of-range labels (PyTorch's ignore index -100) do not count.
          if (label < 0 || label >= classes)
            continue;
          ++counted;
          correct += guess == label;
        }
    }
    result.samples = static_cast<int64_t>(batches) * batch;
    result.counted = counted;
    if (counted > 0) {
      result.haveAccuracy = true;
      result.accuracy = static_cast<double>(correct) / counted;
    }
  }

  if (forward) {
    int64_t batch = compiledBatch(*forward, forwardInputs);
    uint64_t batches = data.samples / static_cast<uint64_t>(batch);
    size_t lossIndex = 0;
    while (forward->outputs[lossIndex].name != "loss")
      ++lossIndex;
    double sum = 0;
    for (uint64_t b = 0; b < batches; ++b) {
      std::vector<TensorRef> refs;
      std::vector<std::vector<int64_t>> shapes(forwardInputs.size());
      for (size_t i = 0; i < forwardInputs.size(); ++i) {
        const DataInput &d = forwardInputs[i];
        shapes[i] = {batch};
        shapes[i].insert(shapes[i].end(), d.sampleShape.begin(),
                         d.sampleShape.end());
        refs.push_back(rowsOf(d.name, data.arrays.at(d.name), shapes[i],
                              d.rowBytes, b * batch, batch));
      }
      addTensorInputs(*forward, tensors, refs);
      addScalarInputs(*forward, stepArray, seedArray, refs);
      std::vector<NpyArray> outs;
      std::string error;
      ErrorCode code;
      if (!artifact.run("forward", refs, &outs, &error, &code))
        fail(error, code);
      if (afterBatch)
        afterBatch();
      sum += scalarValue(outs[lossIndex]);
    }
    if (batches > 0) {
      result.haveLoss = true;
      result.loss = sum / static_cast<double>(batches);
    }
    if (!predict)
      result.samples = static_cast<int64_t>(batches) * batch;
  }
  if (result.samples == 0)
    fail(path + ": " + std::to_string(data.samples) +
             " samples, fewer than one full batch",
         ErrorCode::Format);
}

/// What training a plan compiled for a mesh needs: one rank per place on
/// the mesh; with --accumulate, the entry that reduces and applies a
/// rank's accumulated gradients (apply_gradients).
void checkMeshTraining(const Plan &plan, const Collectives *comm,
                       int64_t accumulate) {
  if (accumulate > 1 && !plan.findEntry("apply_gradients"))
    fail("--accumulate " + std::to_string(accumulate) +
             " with an artifact compiled for a mesh (mesh " +
             plan.mesh->describe() +
             ") needs its entry 'apply_gradients', which this artifact "
             "lacks (compiled by an older loomc?): train with --accumulate "
             "1, or recompile",
         ErrorCode::Unsupported);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!checkMeshWorld(plan, comm, "the artifact", &error, &code))
    fail(error, code);
}

void trainImpl(Artifact &artifact, const TrainOptions &opt,
               TrainResult &result) {
  std::FILE *log = opt.log ? opt.log : stderr;
  checkTrainOptions(opt);
  const bool haveEval = !opt.evalDataPath.empty() || opt.evalData;
  const DataSource trainSource{opt.dataPath, opt.data, "the training data",
                               &opt.tokens};
  const DataSource evalSource{opt.evalDataPath, opt.evalData,
                              "the evaluation data", &opt.tokens,
                              /*materialize=*/true};

  // Data parallelism: every rank runs `opt.accumulate` micro-batches of
  // the step's `micros`, and the gradients are summed over the ranks.
  Collectives *comm = opt.collectives;
  const int world = comm ? comm->size() : 1;
  const int rank = comm ? comm->rank() : 0;
  const bool lead = rank == 0; // writes metrics, checkpoints, progress
  // A plan compiled for a mesh (loomc --dp, --tp) reduces its gradients
  // itself: only its axis "dp" splits the batch, so the ranks that share
  // a dp coordinate (a tensor-parallel group) take the same micro-batches
  // and dropout seeds. Without a mesh every rank is a data-parallel one.
  const Plan &plan = artifact.plan();
  const bool meshPlan = plan.mesh.has_value();
  MeshCollectives meshComm(artifact, meshPlan ? comm : artifact.collectives());
  const CollectiveTimes collectivesBefore = artifact.collectiveTimes();
  const MeshComms *comms = nullptr;
  DataParallelPlace dp{world, rank};
  if (meshPlan) {
    checkMeshTraining(plan, comm, opt.accumulate);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!(comms = artifact.meshComms(&error, &code)))
      fail(error, code);
    dp = dataParallelPlace(plan, comm);
  }
  // Data-parallel rank i runs micro-batches [i * accumulate, (i + 1) *
  // accumulate) of the step's `micros`, with or without a mesh plan. A
  // mesh plan's apply_gradients averages the ranks' gradients itself;
  // otherwise the trainer sums them over the ranks and applies
  // apply_optimizer.
  const int64_t micros = opt.accumulate * dp.ranks;
  bool accumulating = meshPlan ? opt.accumulate > 1 : micros > 1;
  const char *applyName = meshPlan ? "apply_gradients" : "apply_optimizer";
  const char *stepName = accumulating ? "forward_backward" : "train_step";
  const PlanEntry *stepEntry = artifact.entry(stepName);
  // The gradients summed while the backward runs (one micro-batch per rank
  // and a backend whose arenas the host reads), or after it.
  std::unique_ptr<GradientBuckets> buckets;
  if (comm && world > 1 && !meshPlan && opt.accumulate == 1 &&
      opt.bucketBytes > 0 && stepEntry && artifact.canObserveRuns())
    buckets = std::make_unique<GradientBuckets>(*comm, *stepEntry,
                                                opt.bucketBytes);
  ReductionTimes afterBackward; // without buckets
  const PlanEntry *applyEntry =
      accumulating ? artifact.entry(applyName) : nullptr;
  if (!stepEntry || (accumulating && !applyEntry))
    fail(std::string("training") +
             (accumulating ? std::string(" with --accumulate or several ranks "
                                         "needs the entries "
                                         "'forward_backward' and ") +
                                 quoteName(applyName)
                           : std::string(" needs an entry 'train_step'")) +
             "; the artifact has " + joinNames(artifact.entryNames()) +
             " (compile with loomc --train)",
         ErrorCode::Unsupported);

  std::vector<DataInput> dataInputs = dataInputsOf(*stepEntry);
  int64_t batch = compiledBatch(*stepEntry, dataInputs);
  if (opt.batchSize != 0 && opt.batchSize != batch)
    fail("--batch-size " + std::to_string(opt.batchSize) +
         " does not match the compiled batch size " + std::to_string(batch) +
         " of entry " + quoteName(stepName) +
         " (shapes are static: recompile for another batch size)");

  const Binding *lossOut = stepEntry->findOutput("loss");
  if (lossOut &&
      (!isFloat(lossOut->dtype) || lossOut->bytes != dtypeSize(lossOut->dtype)))
    fail("entry " + quoteName(stepName) + ": output 'loss' is " +
             describe(lossOut->dtype, lossOut->shape) +
             ", expected one f32 or f64 value",
         ErrorCode::Unsupported);
  const PlanEntry *updater = accumulating ? applyEntry : stepEntry;
  const Binding *lrOut = updater->findOutput("lr");
  if (lrOut &&
      (!isFloat(lrOut->dtype) || lrOut->bytes != dtypeSize(lrOut->dtype)))
    lrOut = nullptr;
  // Dynamic loss scaling (loomc --precision=fp16): the scale each step used
  // and the steps skipped so far, reported in the metrics.
  const Binding *scaleOut = updater->findOutput("loss_scale_used");
  const Binding *skippedOut = updater->findOutput("skipped_steps");
  if (!scaleOut || !skippedOut || !isFloat(scaleOut->dtype) ||
      !scaleOut->shape.empty() || skippedOut->dtype != DType::I64 ||
      !skippedOut->shape.empty())
    scaleOut = skippedOut = nullptr;

  // With accumulation: apply_optimizer's `<param>.grad` inputs come from
  // forward_backward's grad outputs; nothing else may be left unfed.
  std::map<std::string, std::string> gradOf; // apply input → param
  if (accumulating) {
    for (const Binding &in : applyEntry->inputs) {
      if (!isDataInput(in))
        continue;
      const std::string suffix = ".grad";
      std::string param =
          in.name.size() > suffix.size() &&
                  in.name.compare(in.name.size() - suffix.size(), suffix.size(),
                                  suffix) == 0
              ? in.name.substr(0, in.name.size() - suffix.size())
              : std::string();
      const Binding *g = param.empty() ? nullptr : stepEntry->findOutput(param);
      if (!g || g->kind != BindingKind::Grad)
        fail("entry " + quoteName(applyName) + ": input " + quoteName(in.name) +
                 " is neither step, seed nor '<param>.grad' for a grad output "
                 "of 'forward_backward'",
             ErrorCode::Unsupported);
      if (g->dtype != in.dtype || g->shape != in.shape || !isFloat(in.dtype))
        fail("entry " + quoteName(applyName) + ": input " + quoteName(in.name) + " is " +
                 describe(in.dtype, in.shape) +
                 " but forward_backward's gradient is " +
                 describe(g->dtype, g->shape) + " (f32 or f64 needed)",
             ErrorCode::Unsupported);
      gradOf.emplace(in.name, param);
    }
  }

  Progress progress(lead ? opt.progress : ProgressMode::None, log, 0,
                    opt.steps);

  // Starting point: a checkpoint, a params file, or the artifact's params.
  std::map<std::string, NpyArray> tensors, compressionSaved;
  CheckpointInfo start;
  bool resumed = startingPoint(artifact, opt, batch, micros, progress, nullptr,
                               tensors, start, &compressionSaved);
  int64_t step = start.step;
  result.startStep = step;
  uint64_t seed = start.seed;
  // Gradient compression of the plan's dp reductions (GradCompression.h).
  CompressionRun compression(artifact, opt, comms, seed, progress);
  compression.addEntries({accumulating ? applyEntry : stepEntry}, progress);
  compression.restore(resumed, start, compressionSaved, progress);
  int64_t skippedSteps = 0;
  if (auto it = tensors.find("loss_scale.skipped");
      skippedOut && it != tensors.end() && it->second.dtype == DType::I64 &&
      it->second.data.size() == 8)
    skippedSteps = readI64(it->second);
  int64_t skipNotes = 0;

  Dataset data;
  loadDataset(trainSource, dataInputs, stepName, data);
  if (data.samples < static_cast<uint64_t>(batch))
    fail(data.path + ": " + std::to_string(data.samples) +
             " samples, fewer than one batch of " + std::to_string(batch),
         ErrorCode::Format);
  if (resumed && start.dataSamples != 0 && start.dataSamples != data.samples)
    progress.note("warning: the checkpoint was written for " +
                  std::to_string(start.dataSamples) + " samples, " + data.path +
                  " has " + std::to_string(data.samples) +
                  "; the data order will differ from the original run");

  if (haveEval) {
    // Fail before training rather than at the first evaluation.
    if (!artifact.entry("predict") && !artifact.entry("forward"))
      fail("--eval-data needs an entry 'predict' or 'forward'; the artifact "
           "has " +
               joinNames(artifact.entryNames()),
           ErrorCode::Unsupported);
  }

  if (!opt.checkpointDir.empty() && lead)
    prepareCheckpointDir(opt.checkpointDir);

  Metrics metrics, trace;
  if (lead) {
    metrics.open(opt.metricsPath, resumed);
    trace.open(opt.dataTracePath, resumed);
  }
  // A metrics line to the file and to the caller; false once the caller
  // asked to stop.
  bool stopRequested = false;
  auto report = [&](const std::string &body) {
    metrics.line(body);
    if (lead && opt.onMetrics && !opt.onMetrics("{" + body + "}"))
      stopRequested = true;
  };

  // Every rank starts from rank 0's tensors (the same file gives the same
  // values, but a --params on one machine only must not split the run).
  if (comm) {
    std::string error;
    if (!broadcastFromRank0(*comm, tensors, &error))
      fail(error);
  }
  // Whole tensors so far (a file's, the caller's); the entries take this
  // rank's shard of those the plan shards.
  const bool sharded = hasShards(plan);
  if (sharded) {
    std::string error;
    if (!shardTensors(plan, comm, tensors, &error))
      fail(error);
  }
  // Evaluation runs on rank 0 alone, unless its entries communicate
  // (ZeRO-3's forward gathers its params): then on every rank.
  bool evalEveryRank = false;
  for (const char *name : {"predict", "forward"})
    if (const PlanEntry *e = artifact.entry(name))
      evalEveryRank |= world > 1 && entryUsesMesh(plan, *e);

  // The params and state live in the backend between steps (on a GPU, in
  // device memory): each step reads and updates them there, and `tensors`
  // is refreshed from the device only when a checkpoint, an evaluation or
  // the end of training needs the values.
  {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!artifact.setResidentState(tensors, &error, &code))
      fail(error, code);
  }
  bool tensorsStale = false;
  auto refreshTensors = [&] {
    if (!tensorsStale)
      return;
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!artifact.readResidentState(&tensors, &error, &code))
      fail(error, code);
    tensorsStale = false;
  };
  // Between the uses that read them back, the host holds no copy of what
  // the backend holds: a model's params and optimizer state would
  // otherwise be in memory twice for the whole run.
  auto releaseTensors = [&] {
    tensors.clear();
    tensorsStale = true;
  };
  releaseTensors();

  BatchLoader loader(data, dataInputs, batch, seed, start.dataEpoch,
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
    compression.stamp(info);
    return info;
  };
  int64_t lastSaved = resumed ? step : -1;
  // Checkpoints hold whole tensors: sharded ones are gathered first, by
  // every rank (a collective), so every rank goes through every save; so
  // are the compression residuals, every dp rank's.
  auto save = [&] {
    if (!lead && !sharded && !compression.on()) {
      lastSaved = step;
      return;
    }
    if (lead || sharded)
      refreshTensors();
    std::map<std::string, NpyArray> gathered;
    if (sharded)
      gathered = wholeTensors(plan, *comms, tensors);
    std::map<std::string, NpyArray> residuals = compression.checkpointTensors();
    lastSaved = step;
    if (!lead) {
      releaseTensors();
      return;
    }
    std::string name = checkpointFileName(step);
    writeCheckpoint(opt.checkpointDir + "/" + name,
                    sharded ? gathered : tensors, &residuals, checkpointInfo());
    writeLatest(opt.checkpointDir, name);
    pruneCheckpoints(opt.checkpointDir, opt.keepCheckpoints);
    releaseTensors();
  };
  int64_t lastEval = -1;
  EvalResult lastEvalResult;
  // Evaluation on rank 0 alone: the others wait for it with a heartbeat
  // (LeadHeartbeat.h), not in their next collective.
  const bool evalAlone = comm && world > 1 && !evalEveryRank;
  auto runEval = [&] {
    std::string beatError;
    std::optional<LeadHeartbeat> heartbeat;
    if (evalAlone)
      heartbeat.emplace(*comm, opt.collectiveTimeoutSeconds,
                        "its evaluation at step " + std::to_string(step));
    if (evalAlone && !lead) {
      if (!heartbeat->waitForLead(&beatError))
        fail(beatError);
      return;
    }
    if (!lead && !evalEveryRank)
      return;
    // Fault injection for the tests: seconds of delay per batch.
    static const double testDelay = [] {
      const char *v = std::getenv("LOOMRT_TEST_EVAL_BATCH_SECONDS");
      return v ? std::atof(v) : 0.0;
    }();
    EvalResult r;
    refreshTensors();
    evaluateImpl(artifact, tensors, evalSource, step, r, [&] {
      if (testDelay > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(testDelay));
      if (heartbeat && !heartbeat->beat(&beatError))
        fail(beatError);
    });
    releaseTensors();
    if (heartbeat && !heartbeat->finish(&beatError))
      fail(beatError);
    std::string body = "\"step\": " + std::to_string(step) +
                       ", \"eval_samples\": " + std::to_string(r.samples);
    std::string text = "eval at step " + std::to_string(step) + ":";
    if (r.haveLoss) {
      body += ", \"eval_loss\": " + jsonNumber(r.loss);
      text += " loss " + formatNumber(r.loss);
    }
    if (r.haveAccuracy) {
      body += ", \"eval_accuracy\": " + jsonNumber(r.accuracy);
      text += " accuracy " + formatNumber(r.accuracy);
    }
    text += " (" + std::to_string(r.samples) + " samples)";
    report(body);
    progress.note(text);
    lastEval = step;
    lastEvalResult = r;
  };

  NpyArray stepArray, seedArray;
  double lastLoss = std::nan("");
  bool warnedNaN = false;
  auto begin = Clock::now();
  int64_t samplesDone = 0;
  // Outputs that carry the new training state, by output index.
  auto absorb = [&](const PlanEntry &entry, std::vector<NpyArray> &outs,
                    double *lr, double *scale, int64_t *skipped) {
    for (size_t i = 0; i < entry.outputs.size(); ++i) {
      const Binding &out = entry.outputs[i];
      if (out.name == "step") {
        if (readI64(outs[i]) != step + 1)
          fail("entry " + quoteName(entry.name) + " returned step " +
                   std::to_string(readI64(outs[i])) + ", expected " +
                   std::to_string(step + 1),
               ErrorCode::Format);
      } else if (lr && lrOut && &out == lrOut) {
        *lr = scalarValue(outs[i]);
      } else if (&out == scaleOut) {
        *scale = scalarValue(outs[i]);
      } else if (&out == skippedOut) {
        *skipped = readI64(outs[i]);
      } else if (out.kind == BindingKind::Output && tensors.count(out.name)) {
        // Updated in the resident state; `tensors` is behind until the next
        // refresh.
        tensorsStale = true;
      }
    }
  };

  std::vector<std::string> stepErrors;
  while (step < opt.steps) {
    auto stepBegin = Clock::now();
    double loss = std::nan("");
    double lr = std::nan("");
    double scale = std::nan("");
    int64_t skippedNow = skippedSteps;
    stepArray = scalarI64(step);
    compression.beginStep(step);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!accumulating) {
      // One micro-batch, or with a mesh plan data-parallel rank i's of the
      // step's `micros` (the plan averages the loss and gradients over
      // them).
      Batch b;
      for (int64_t micro = 0; micro < micros; ++micro) {
        Batch next = loader.next();
        trace.traceLine(step + 1, micro, micro, next.samples);
        posEpoch = next.epoch;
        posBatch = next.index;
        loader.advance(posEpoch, posBatch);
        if (micro == dp.index)
          b = std::move(next);
      }
      std::vector<TensorRef> refs;
      for (size_t i = 0; i < dataInputs.size(); ++i)
        refs.push_back(tensorRef(dataInputs[i].name, b.arrays[i]));
      seedArray = scalarI64(dropoutSeed(seed, step, dp.index));
      addScalarInputs(*stepEntry, stepArray, seedArray, refs);
      std::vector<NpyArray> outs;
      if (!artifact.runResident(stepName, refs, &outs, &error, &code))
        fail("step " + std::to_string(step) + ": " + error, code);
      if (lossOut)
        loss = scalarValue(outs[lossOut - stepEntry->outputs.data()]);
      absorb(*stepEntry, outs, &lr, &scale, &skippedNow);
    } else {
      std::map<std::string, NpyArray> grads; // by param name
      double lossSum = 0;
      for (int64_t micro = 0; micro < micros; ++micro) {
        Batch b = loader.next();
        trace.traceLine(step + 1, micro, micro / opt.accumulate, b.samples);
        // Another data-parallel rank's micro-batch.
        if (micro / opt.accumulate != dp.index) {
          posEpoch = b.epoch;
          posBatch = b.index;
          loader.advance(posEpoch, posBatch);
          continue;
        }
        std::vector<TensorRef> refs;
        for (size_t i = 0; i < dataInputs.size(); ++i)
          refs.push_back(tensorRef(dataInputs[i].name, b.arrays[i]));
        seedArray = scalarI64(dropoutSeed(seed, step, micro));
        addScalarInputs(*stepEntry, stepArray, seedArray, refs);
        std::vector<NpyArray> outs;
        bool ran = buckets ? artifact.runResident(stepName, refs, &outs,
                                                  buckets->observer(), &error,
                                                  &code)
                           : artifact.runResident(stepName, refs, &outs,
                                                  &error, &code);
        if (!ran)
          fail("step " + std::to_string(step) + " micro-batch " +
                   std::to_string(micro) + ": " + error,
               code);
        if (lossOut)
          lossSum += scalarValue(outs[lossOut - stepEntry->outputs.data()]);
        for (size_t i = 0; i < stepEntry->outputs.size(); ++i) {
          const Binding &out = stepEntry->outputs[i];
          if (out.kind != BindingKind::Grad)
            continue;
          auto it = grads.find(out.name);
          if (it == grads.end())
            grads.emplace(out.name, std::move(outs[i]));
          else
            addInto(it->second, outs[i]);
        }
        posEpoch = b.epoch;
        posBatch = b.index;
        loader.advance(posEpoch, posBatch);
      }
      if (comm) {
        // With buckets the gradients are summed already; a mesh plan's
        // apply_gradients averages them over the ranks (the loss alone is
        // summed here, for the report).
        auto reduceBegin = Clock::now();
        bool here = !buckets && !meshPlan;
        if (!sumOverRanks(*comm, here ? &grads : nullptr,
                          lossOut ? &lossSum : nullptr, &error))
          fail("step " + std::to_string(step) + ": " + error);
        if (here) {
          double s = secondsSince(reduceBegin);
          afterBackward.seconds += s;
          afterBackward.exposedSeconds += s;
          afterBackward.buckets += int64_t(grads.size());
        }
      }
      // This rank's mean (mesh plans), or the mean over every rank's.
      for (auto &[name, g] : grads)
        divideBy(g, meshPlan ? opt.accumulate : micros);
      // The loss is summed over every rank: a mesh plan's ranks that
      // share a dp coordinate report the same micro-batches' loss.
      if (lossOut)
        loss = lossSum / static_cast<double>(opt.accumulate * world);
      std::vector<TensorRef> refs;
      seedArray = scalarI64(dropoutSeed(seed, step, micros));
      addScalarInputs(*applyEntry, stepArray, seedArray, refs);
      for (const auto &[input, param] : gradOf) {
        auto it = grads.find(param);
        if (it == grads.end())
          fail("forward_backward returned no gradient for " + quoteName(param));
        refs.push_back(tensorRef(input, it->second));
      }
      std::vector<NpyArray> outs;
      if (!artifact.runResident(applyName, refs, &outs, &error, &code))
        fail("step " + std::to_string(step) + ": " + error, code);
      absorb(*applyEntry, outs, &lr, &scale, &skippedNow);
    }
    ++step;
    double stepSeconds = secondsSince(stepBegin);
    int64_t stepSamples = batch * micros;
    samplesDone += stepSamples;
    lastLoss = loss;
    bool skipped = skippedNow > skippedSteps;
    skippedSteps = skippedNow;
    if (skipped && skipNotes < 10) {
      // A skipped step is loss scaling at work, not an error: said on the
      // progress stream only.
      ++skipNotes;
      progress.note("step " + std::to_string(step) +
                    ": a gradient was not finite at loss scale " +
                    formatNumber(scale) +
                    "; the update was skipped and the scale lowered" +
                    (skipNotes == 10 ? " (further skips are counted in the "
                                       "metrics, not shown)"
                                     : ""));
    }
    if (lossOut && !std::isfinite(loss) && !warnedNaN && !skipped) {
      std::string warning =
          "warning: loss is " + formatNumber(loss) + " at step " +
          std::to_string(step) +
          " (loom-run --check-numerics stops at the op where it first "
          "becomes inf or NaN)";
      if (opt.progress != ProgressMode::None)
        progress.note(warning);
      else if (opt.warnings)
        std::fprintf(log, "%s\n", warning.c_str());
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
    if (scaleOut)
      body += ", \"loss_scale\": " + jsonNumber(scale) +
              ", \"skipped\": " + (skipped ? "true" : "false") +
              ", \"skipped_steps\": " + std::to_string(skippedSteps);
    report(body);
    progress.update(step, loss, elapsed > 0 ? samplesDone / elapsed : 0,
                    elapsed);
    if (opt.evalEvery > 0 && step % opt.evalEvery == 0)
      runEval();
    if (opt.saveEvery > 0 && step % opt.saveEvery == 0)
      save();
    if (stopRequested)
      break;
  }
  double seconds = secondsSince(begin);
  if (haveEval && lastEval != step && !stopRequested)
    runEval();
  if (!opt.checkpointDir.empty() && lastSaved != step)
    save();
  progress.endBar();
  refreshTensors();
  // From here on whole tensors: what --save-params and the caller get.
  if (sharded)
    tensors = wholeTensors(plan, *comms, tensors);

  if (comm) {
    std::string error;
    bool agree = false;
    if (!ranksAgree(*comm, tensors, &agree, &error))
      fail(error);
    if (!agree)
      fail("after step " + std::to_string(step) +
           ", the ranks hold different parameters or optimizer state "
           "(ranks started from different files, or a reduction is not "
           "deterministic)");
  }
  if (!opt.saveParamsPath.empty() && lead) {
    SafetensorsWriter writer;
    for (const auto &[name, binding] : stateBindings(artifact.plan()))
      if (isModelKind(binding->kind)) {
        const NpyArray &a = tensors.at(name);
        writer.addBorrowed(name, a.dtype, a.shape, a.data.data(),
                           a.data.size());
      }
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!writer.write(opt.saveParamsPath, &error, &code))
      fail(error, code);
  }

  result.finalStep = step;
  result.stopped = stopRequested;
  result.position = checkpointInfo();
  result.lastLoss = lastLoss;
  result.skippedSteps = skippedSteps;
  result.seconds = seconds;
  result.samplesPerSecond = seconds > 0 ? samplesDone / seconds : 0;
  const ReductionTimes &reduced = buckets ? buckets->times() : afterBackward;
  result.reduceSeconds = reduced.seconds;
  result.reduceExposedSeconds = reduced.exposedSeconds;
  result.reduceBuckets = reduced.buckets;
  CollectiveTimes collectivesNow = artifact.collectiveTimes();
  result.planCollectives.calls =
      collectivesNow.calls - collectivesBefore.calls;
  result.planCollectives.inFlightSeconds =
      collectivesNow.inFlightSeconds - collectivesBefore.inFlightSeconds;
  result.planCollectives.waitedSeconds =
      collectivesNow.waitedSeconds - collectivesBefore.waitedSeconds;
  compression.report(result, nullptr);
  if (lead && step > result.startStep && compression.on())
    metrics.line(
        CompressionRun::metricsLine(result, step, step - result.startStep));
  if (!progress.quiet()) {
    std::string line;
    if (step == result.startStep)
      line = "nothing to train: already at step " + std::to_string(step) +
             " of " + std::to_string(opt.steps);
    else
      line = "trained steps " + std::to_string(result.startStep) + ".." +
             std::to_string(step) + " in " + formatSeconds(seconds) + ": " +
             formatNumber(result.samplesPerSecond) + " samples/s, loss " +
             formatNumber(lastLoss);
    if (scaleOut && skippedSteps > 0)
      line += ", " + std::to_string(skippedSteps) +
              " step(s) skipped by loss scaling";
    int64_t ran = step - result.startStep;
    if (comm && ran > 0 && result.reduceBuckets > 0)
      line += "; gradient all-reduce: " +
              std::to_string(result.reduceBuckets / ran) +
              " call(s) per step, " +
              formatNumber(1000.0 * result.reduceExposedSeconds /
                           double(ran)) +
              " ms per step waited for after the backward";
    const CollectiveTimes &pc = result.planCollectives;
    if (ran > 0 && pc.calls > 0)
      line += "; plan collectives: " + std::to_string(pc.calls / ran) +
              " per step, " +
              formatNumber(1000.0 * pc.inFlightSeconds / double(ran)) +
              " ms per step in flight, " +
              formatNumber(1000.0 * pc.waitedSeconds / double(ran)) +
              " ms waited for";
    if (std::string c = CompressionRun::summary(result, ran); !c.empty())
      line += "; " + c;
    if (lastEval == step) {
      if (lastEvalResult.haveLoss)
        line += ", eval loss " + formatNumber(lastEvalResult.loss);
      if (lastEvalResult.haveAccuracy)
        line += ", eval accuracy " + formatNumber(lastEvalResult.accuracy);
    }
    progress.note(line);
  }
  result.tensors = std::move(tensors);
}

/// evaluateImpl on whole tensors (the public API's): the entries take this
/// rank's shard of those the plan shards.
void evaluateWhole(Artifact &artifact,
                   const std::map<std::string, NpyArray> &tensors,
                   const DataSource &source, int64_t step, EvalResult &result) {
  if (!hasShards(artifact.plan()))
    return evaluateImpl(artifact, tensors, source, step, result);
  std::map<std::string, NpyArray> local = tensors;
  std::string error;
  if (!shardTensors(artifact.plan(), artifact.collectives(), local, &error))
    fail(error);
  evaluateImpl(artifact, local, source, step, result);
}

template <typename Fn>
bool guarded(const ErrorSink &sink, const char *what, Fn &&fn) noexcept {
  try {
    fn();
    sink.ok();
    return true;
  } catch (const TrainError &e) {
    sink.set(e.code, e.message);
  } catch (const std::bad_alloc &) {
    sink.outOfMemory(what);
  } catch (const std::exception &e) {
    sink.set(ErrorCode::IO, std::string(what) + ": " + e.what());
  } catch (...) {
    sink.set(ErrorCode::IO, std::string(what) + ": unexpected error");
  }
  return false;
}

} // namespace

int64_t dropoutSeed(uint64_t seed, int64_t step, int64_t micro) noexcept {
  uint64_t x = splitmix64(splitmix64(seed) + static_cast<uint64_t>(step));
  x = splitmix64(x + static_cast<uint64_t>(micro));
  return static_cast<int64_t>(x & 0x7fffffffffffffffull);
}

std::string checkpointFileName(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "ckpt-%08lld.safetensors",
                static_cast<long long>(step));
  return buf;
}

std::string findLatestCheckpoint(const std::string &dir, std::string *error) {
  try {
    std::error_code ec;
    int64_t best = -1;
    std::string bestName;
    for (const auto &entry : fs::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      int64_t step = checkpointStep(name);
      if (step > best) {
        best = step;
        bestName = name;
      }
    }
    if (ec) {
      if (error)
        *error = dir + ": cannot list checkpoint directory: " + ec.message();
      return std::string();
    }
    if (best < 0) {
      if (error)
        *error = dir + ": no checkpoint (ckpt-<step>.safetensors) to resume "
                       "from";
      return std::string();
    }
    return dir + "/" + bestName;
  } catch (...) {
    if (error)
      *error = dir + ": cannot list checkpoint directory";
  }
  return std::string();
}

bool saveCheckpoint(const std::string &path,
                    const std::map<std::string, NpyArray> &tensors,
                    const CheckpointInfo &info, std::string *error,
                    ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  return guarded(sink, path.c_str(),
                 [&] { writeCheckpoint(path, tensors, nullptr, info); });
}

bool loadCheckpoint(const std::string &path, const Artifact &artifact,
                    std::map<std::string, NpyArray> *tensors,
                    CheckpointInfo *info, std::string *error,
                    ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  return guarded(sink, path.c_str(), [&] {
    std::map<std::string, NpyArray> t;
    CheckpointInfo i;
    loadCheckpointImpl(path, artifact, t, i);
    if (tensors)
      *tensors = std::move(t);
    if (info)
      *info = i;
  });
}

bool train(Artifact &artifact, const TrainOptions &options, TrainResult *result,
           std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  return guarded(sink, "training", [&] {
    TrainResult r;
    if (artifact.plan().pipeline)
      trainPipeline(artifact, options, r);
    else
      trainImpl(artifact, options, r);
    if (result)
      *result = std::move(r);
  });
}

bool evaluate(Artifact &artifact,
              const std::map<std::string, NpyArray> &tensors,
              const std::string &dataPath, int64_t step, EvalResult *result,
              std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  return guarded(sink, "evaluation", [&] {
    EvalResult r;
    evaluateWhole(artifact, tensors, DataSource{dataPath, nullptr, ""}, step,
                  r);
    if (result)
      *result = r;
  });
}

bool evaluate(Artifact &artifact,
              const std::map<std::string, NpyArray> &tensors,
              const DataArrays &data, int64_t step, EvalResult *result,
              std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  return guarded(sink, "evaluation", [&] {
    EvalResult r;
    evaluateWhole(artifact, tensors,
                  DataSource{"", &data, "the evaluation data"}, step, r);
    if (result)
      *result = r;
  });
}

} // namespace loomrt
