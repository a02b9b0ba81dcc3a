//===- Trainer.h - The training loop that loom-run drives -----------------===//
//
// Runs a training artifact (docs/plan-format.md, training convention) over an
// .npz data set: shuffled batches from a seeded, resumable loader with a
// prefetch thread, `train_step` (or `forward_backward` x N + `apply_optimizer`
// for gradient accumulation), held-out evaluation through `predict` and
// `forward`, atomic checkpoints that resume bitwise, JSON-lines metrics.
// docs/loom-run.md describes the behaviour from the user's side.
//
// Nothing here throws; every failure is `false` plus a message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TRAINER_H
#define LOOMRT_TRAINER_H

#include "loomrt/Artifact.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/Npy.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loomrt {

class Collectives;

/// How the trainer reports progress on its log stream.
enum class ProgressMode {
  Auto,  ///< a bar if the log stream is a terminal, else Lines
  Bar,   ///< one line redrawn in place (step/N, loss, samples/s, ETA)
  Lines, ///< a plain line every 10% of the steps
  None,  ///< nothing but errors and warnings
};

/// An array of a data set held by the caller (the Python bindings' numpy
/// arrays): dense, row-major, little-endian, `nbytes` bytes at `data`.
/// Borrowed: it must stay valid and unchanged while train() runs.
struct DataArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< [N, <the input's shape without dim 0>]
  const uint8_t *data = nullptr;
  uint64_t nbytes = 0;
};

/// A data set in memory, by array name (the names an .npz would hold).
using DataArrays = std::map<std::string, DataArray>;

/// What a checkpoint holds besides its tensors.
struct CheckpointInfo {
  int64_t step = 0;
  uint64_t seed = 0;
  uint64_t dataEpoch = 0;   ///< the loader's epoch of the next batch
  uint64_t dataBatch = 0;   ///< the index of the next batch in that epoch
  uint64_t dataSamples = 0; ///< samples in the training data set
  int64_t batchSize = 0;
  int64_t accumulate = 1;
  /// Gradient compression (TrainOptions::gradCompression): the spec of
  /// the run that wrote it and its data-parallel ranks; "" and 0 when it
  /// compressed nothing (its checkpoints then hold no compression state).
  std::string gradCompression;
  int64_t gradCompressionRanks = 0;
};

/// The format of a token-stream data file (TokenStreamOptions): flat
/// little-endian uint16 or uint32 ids, or a Megatron indexed dataset
/// (PREFIX.bin with PREFIX.idx, uint16 or int32 ids, documents from the
/// index).
enum class TokenFormat : uint8_t { None, U16, U32, Megatron };

/// Training data as a flat file of token ids instead of an .npz
/// (loom-run --tokens; docs/loom-run.md, "Token streams"): read window by
/// window, never whole. With the data inputs' sample shape [T], sample s is
/// the T + 1 tokens from s * T: the token input gets the first T, the
/// `labels` input the last T. Every data input must be i64 or i32 [B, T].
struct TokenStreamOptions {
  TokenFormat format = TokenFormat::None; ///< None: the data is an .npz
  std::string labels = "labels"; ///< the input that gets the next tokens
  /// The token that ends a document in packed sequences; < 0: none.
  int64_t docSeparator = -1;
  /// With docSeparator: the input that gets each position's document
  /// index within its window (0, then +1 after each separator), and the
  /// one that gets its position within its document; "" for none.
  std::string documentsInput, positionsInput;
};

struct TrainOptions {
  std::string dataPath;   ///< .npz, arrays named like the data inputs
  /// With a format: dataPath and evalDataPath are token streams.
  TokenStreamOptions tokens;
  /// Where to append one JSON line per micro-batch: step, micro-batch,
  /// the data-parallel rank that runs it and its sample indices (written
  /// by rank 0 for every rank); "" for none.
  std::string dataTracePath;
  /// Instead of dataPath: the training data in memory (not owned).
  const DataArrays *data = nullptr;
  int64_t steps = 0;      ///< train until this many optimizer steps are done
  int64_t batchSize = 0;  ///< 0: the compiled one; else must equal it
  int64_t accumulate = 1; ///< micro-batches per optimizer step
  uint64_t seed = 0;      ///< shuffling and the `seed` input
  bool prefetch = true;   ///< assemble the next batch on a second thread

  std::string evalDataPath; ///< .npz for held-out loss/accuracy
  /// Instead of evalDataPath: the held-out data in memory (not owned).
  const DataArrays *evalData = nullptr;
  int64_t evalEvery = 0;    ///< evaluate every K steps (and at the end)

  std::string resumePath; ///< checkpoint file, or a checkpoint directory
  std::string paramsPath; ///< initial params/state instead of the artifact's
  /// Instead of resumePath or paramsPath: start from these tensors (every
  /// param and state tensor of the plan, as TrainResult::tensors holds them)
  /// at this position (TrainResult::position), as a resumed run would: an
  /// embedder's training that goes on across train() calls. Not owned.
  const std::map<std::string, NpyArray> *startTensors = nullptr;
  CheckpointInfo startPosition; ///< with startTensors (step 0: a fresh run)
  std::string checkpointDir;
  int64_t saveEvery = 0;       ///< checkpoint every K steps (and at the end)
  int64_t keepCheckpoints = 3; ///< ckpt files kept in checkpointDir; 0 = all

  std::string metricsPath;    ///< JSON lines; appended to when resuming
  std::string saveParamsPath; ///< final params as safetensors

  ProgressMode progress = ProgressMode::Auto;
  std::FILE *log = nullptr; ///< progress and notes; null means stderr
  /// Warnings (a non-finite loss) go to `log` even without progress output;
  /// false: only errors (loom-run --quiet).
  bool warnings = true;
  /// Data parallelism (null: one process). Each step takes `accumulate`
  /// micro-batches on every rank, `accumulate * size()` in all (rank r the
  /// r-th run of `accumulate` consecutive ones), and averages the gradients
  /// over all of them: the same update as one process with `--accumulate
  /// accumulate * size()`. Rank 0 alone writes metrics, checkpoints and
  /// progress; every rank must see the same data file.
  ///
  /// A plan with a mesh (loomc --dp, --tp) does that itself: size() must
  /// equal the mesh's ranks, and only its axis "dp" splits the batch: a
  /// rank of dp coordinate i runs `train_step` on micro-batch i of the
  /// step's n_dp (with `accumulate` M, `forward_backward` on micro-batches
  /// [i * M, (i + 1) * M) of M * n_dp, then `apply_gradients`), the ranks
  /// that differ on other axes alone (a tensor-parallel group) taking the
  /// same micro-batches and dropout seeds; n_dp = 1 without such an axis.
  /// Its collective steps go through these Collectives, one communicator
  /// per mesh axis (train() hands them to the artifact,
  /// Artifact::setCollectives, and takes them back at the end). Sharded
  /// tensors are sliced from the whole ones at the start and gathered
  /// whole over their axis for every checkpoint and at the end (every
  /// rank takes part); evaluation runs on every rank when its entries
  /// communicate.
  ///
  /// A plan with a `pipeline` (loomc --pp): size() equals the mesh's
  /// ranks too; each rank runs its pipeline coordinate's action list every
  /// step, `accumulate` being 1 or the plan's micro-batches
  /// (docs/pipeline.md, "Running").
  Collectives *collectives = nullptr;
  /// How long a rank waits for rank 0's sign of life while rank 0
  /// evaluates alone (runtime data parallelism): rank 0 sends one at least
  /// every quarter of it, so a long evaluation is not taken for a hang and
  /// a hung rank 0 is (loom-run --collective-timeout). <= 0: no limit.
  double collectiveTimeoutSeconds = 60;
  /// Data parallelism with one micro-batch per rank and step, on the CPU:
  /// the gradients are summed in buckets of at least this many bytes, each
  /// issued as soon as the backward has written its gradients, while the
  /// backward goes on (PyTorch DDP's 25 MiB by default). 0: every
  /// gradient is summed after the backward (as always with --accumulate).
  uint64_t bucketBytes = 25ull << 20;
  /// Called on the calling thread after every step and every evaluation
  /// with the metrics line as a JSON object (what --metrics writes, one
  /// line of it, without the newline). Returning false stops training:
  /// train() then fails with ErrorCode::Cancelled after the step.
  std::function<bool(const std::string &json)> onMetrics;
  /// A plan with a `pipeline` (docs/pipeline.md): rank 0 writes every
  /// rank's actions of every step here as JSON lines (loom-run
  /// --pp-trace); "" writes none.
  std::string pipelineTracePath;
  /// Gradient compression of a plan's data-parallel gradient reductions
  /// (its collective steps with a `grad`; docs/plan-format.md): "none",
  /// "powersgd:rank=R", "topk:FRACTION" or "int8" (loom-run
  /// --grad-compression). "" (the default): the plan's
  /// `grad_compression`, none without one. CPU artifacts only (a cuda
  /// artifact with compression asked for is refused: Unsupported). The
  /// residuals (every data-parallel rank's) and PowerSGD's Qs go into
  /// checkpoints and resume bitwise with the same spec and ranks.
  std::string gradCompression;
};

/// Pipeline parallelism: what one rank of the pipeline axis measured.
struct PipelineRankStats {
  int64_t rank = 0;            ///< its coordinate on the pipeline axis
  std::vector<int64_t> stages; ///< the stages it runs
  /// The idle share of its steps: 1 - (time in F, B, I, W) / (the step's
  /// wall time from its first action until every rank's list is done),
  /// averaged over the steps after the first (over every step when only
  /// one ran), and over the ranks of its coordinate (dp and tp).
  double bubble = 0;
  /// Per stage: the most bytes of stashed forward inputs (kept from F to
  /// B, or to W) held at once, and the most micro-batches in flight.
  std::vector<uint64_t> peakStashBytes;
  std::vector<int64_t> peakInFlight;
};

/// Pipeline parallelism: the run's measurements, every pipeline rank's
/// (on every process).
struct PipelineStats {
  std::string schedule; ///< the plan's `schedule`
  int64_t ranks = 0, virtualStages = 0, microbatches = 0;
  /// pp::idealBubble of the schedule; -1 for a schedule it does not know.
  double idealBubble = -1;
  std::vector<PipelineRankStats> ranksStats; ///< by coordinate
};

struct TrainResult {
  int64_t startStep = 0; ///< completed steps when the run began (resume)
  int64_t finalStep = 0;
  /// TrainOptions::onMetrics returned false: training stopped early (the
  /// rest of the result holds where it stopped).
  bool stopped = false;
  double lastLoss = 0; ///< NaN if the entry has no `loss` output
  /// Steps whose update dynamic loss scaling skipped (gradients not
  /// finite), since the start of training (a checkpoint's count included).
  int64_t skippedSteps = 0;
  double samplesPerSecond = 0;
  double seconds = 0;
  /// Data parallelism: the time from each step's first gradient
  /// all-reduce to its last completion (during the backward, with buckets),
  /// and the time the steps waited for them once the backward was done (a
  /// slower rank's backward included).
  double reduceSeconds = 0;
  double reduceExposedSeconds = 0;
  int64_t reduceBuckets = 0; ///< all-reduces of gradients issued
  /// A plan compiled for a mesh: what its collective steps that
  /// communicate cost during this training (Artifact::collectiveTimes).
  CollectiveTimes planCollectives;
  /// A plan with a `pipeline`: bubbles and stashed activations.
  PipelineStats pipeline;
  /// Gradient compression ("" when off): its spec, and the bytes one
  /// data-parallel replica (a rank; with a pipeline, the ranks of its
  /// stages together) sent for its gradient reductions during this
  /// training, against what the exact collectives would have sent (the
  /// payload model of docs/loom-run.md).
  std::string gradCompression;
  uint64_t gradBytesSent = 0, gradBytesExact = 0;

  /// Final values of every param and state tensor, by name (whole, also
  /// those the plan shards). A plan with a `pipeline`: every tensor on
  /// world rank 0; on the other ranks those of their own stages.
  std::map<std::string, NpyArray> tensors;
  /// Where training stopped (step, seed, data position): with `tensors`,
  /// what a checkpoint written now would hold (TrainOptions::startTensors).
  CheckpointInfo position;
};

/// Trains `artifact` as `options` say. On failure returns false with a message
/// (and code); files already written (checkpoints, metrics) stay.
bool train(Artifact &artifact, const TrainOptions &options, TrainResult *result,
           std::string *error, ErrorCode *code = nullptr) noexcept;

struct EvalResult {
  int64_t samples = 0; ///< samples in full batches, the rest dropped
  bool haveLoss = false;
  double loss = 0; ///< mean of `forward`'s loss over the batches
  bool haveAccuracy = false;
  double accuracy = 0; ///< argmax(predict) == labels, labels in range
  int64_t counted = 0; ///< labels that took part in accuracy
};

/// Evaluates `tensors` (params, whole) on the .npz at `dataPath` with the
/// entries `predict` (accuracy) and `forward` (loss), whichever exist; `step`
/// feeds an input named `step` if an entry has one.
bool evaluate(Artifact &artifact,
              const std::map<std::string, NpyArray> &tensors,
              const std::string &dataPath, int64_t step, EvalResult *result,
              std::string *error, ErrorCode *code = nullptr) noexcept;
/// The same on a data set in memory.
bool evaluate(Artifact &artifact,
              const std::map<std::string, NpyArray> &tensors,
              const DataArrays &data, int64_t step, EvalResult *result,
              std::string *error, ErrorCode *code = nullptr) noexcept;

/// Writes a checkpoint atomically: every tensor of `tensors` plus `step` (0-D
/// i64), metadata from `info` (docs/loom-run.md).
bool saveCheckpoint(const std::string &path,
                    const std::map<std::string, NpyArray> &tensors,
                    const CheckpointInfo &info, std::string *error,
                    ErrorCode *code = nullptr) noexcept;

/// Reads a checkpoint written by saveCheckpoint. Every param and state input
/// of the artifact's entries must be there with the plan's dtype and shape
/// (the whole shape where the plan shards it: checkpoints never hold
/// shards, so one resumes at any world size, sharded or not), and nothing
/// else (errors name the tensor).
bool loadCheckpoint(const std::string &path, const Artifact &artifact,
                    std::map<std::string, NpyArray> *tensors,
                    CheckpointInfo *info, std::string *error,
                    ErrorCode *code = nullptr) noexcept;

/// The newest complete checkpoint (highest step) "ckpt-<step>.safetensors" in
/// `dir`, or "" with an error if there is none.
std::string findLatestCheckpoint(const std::string &dir, std::string *error);

/// The file name of the checkpoint for `step`: "ckpt-00000120.safetensors".
std::string checkpointFileName(int64_t step);

/// The value fed to an input named `seed`: a fixed function of the run's seed,
/// the step and the micro-batch, so a resumed run draws the same numbers.
int64_t dropoutSeed(uint64_t seed, int64_t step, int64_t micro) noexcept;

} // namespace loomrt

#endif // LOOMRT_TRAINER_H
