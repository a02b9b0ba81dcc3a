//===- TrainerSupport.h - What the trainers share ---------------*- C++ -*-===//
//
// The pieces of train() (Trainer.cpp) that the pipeline-parallel trainer
// (PipelineTrainer.cpp) runs too: option checks, the data set and its
// seeded, resumable batch loader, progress and metrics, the training
// state's tensors and checkpoint files, gradient sums. Internal to
// libloomrt; everything fails by throwing TrainError, which train() turns
// into its message.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_TRAINERSUPPORT_H
#define LOOMRT_SRC_TRAINERSUPPORT_H

#include "loomrt/Artifact.h"
#include "loomrt/Mesh.h"
#include "loomrt/Random.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Trainer.h"

#include "GradCompression.h"
#include "Support.h"
#include "TokenStream.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace loomrt::training {

using detail::quoteName;

/// Thrown inside the trainers, caught at the public functions.

/// Thrown inside this file, caught at the public functions.
struct TrainError {
  ErrorCode code;
  std::string message;
};

[[noreturn]] void fail(std::string message,
                       ErrorCode code = ErrorCode::InvalidArgument);

/// The checks of TrainOptions that need no artifact (counts, paths given
/// twice).
void checkTrainOptions(const TrainOptions &opt);

using loomrt::splitmix64;
/// Uniform in [0, n) from a 64-bit generator, without modulo bias.
uint64_t bounded(std::mt19937_64 &rng, uint64_t n);
std::string describe(DType dtype, const std::vector<int64_t> &shape);
/// Kind input, neither `step` nor `seed`.
bool isDataInput(const Binding &in);
bool isFloat(DType d);
/// One f32 or f64 value as a double; NaN otherwise.
double scalarValue(const NpyArray &a);
NpyArray scalarI64(int64_t value);
int64_t readI64(const NpyArray &a);

//===----------------------------------------------------------------------===//
// Data sets
//===----------------------------------------------------------------------===//

/// One data input of an entry, as the data set must provide it.
struct DataInput {
  std::string name;
  DType dtype;
  std::vector<int64_t> sampleShape; ///< the input's shape without dim 0
  int64_t batch = 0;                ///< the input's dim 0
  uint64_t rowBytes = 0;            ///< bytes of one sample
};

std::vector<DataInput> dataInputsOf(const PlanEntry &entry);
/// The one batch size all data inputs of `entry` share.
int64_t compiledBatch(const PlanEntry &entry,
                      const std::vector<DataInput> &inputs);

/// Where a data set comes from: an .npz file, arrays in memory, or a
/// token stream (TokenStream.h).
struct DataSource {
  std::string path;                   ///< the file, when `arrays` is null
  const DataArrays *arrays = nullptr; ///< borrowed
  std::string label;                  ///< names the in-memory data in errors
  /// Borrowed; with a format, `path` is a token stream.
  const TokenStreamOptions *tokens = nullptr;
  /// A token stream's windows copied into `owned` arrays (evaluation reads
  /// arrays), instead of assembled per batch from the map.
  bool materialize = false;
};

struct Dataset {
  std::string path; ///< the file, or the in-memory data's label, for errors
  std::map<std::string, NpyArray> owned; ///< what was read from a file
  DataArrays arrays;                     ///< views of `owned` or borrowed
  uint64_t samples = 0;
  /// A token stream's map (null for arrays): batches are assembled from
  /// it, each input by its role, windows of `window` tokens.
  std::shared_ptr<const TokenStream> stream;
  int64_t window = 0, separator = -1;
  std::map<std::string, TokenRole> roles;
};

DataArray viewOf(const NpyArray &a);
/// Loads `source` and checks it holds every one of `inputs`: same dtype,
/// shape [N, <sample shape>] with one N for all.
void loadDataset(const DataSource &source, const std::vector<DataInput> &inputs,
                 const std::string &entryName, Dataset &out);
/// loadDataset for a token stream (TokenStream.cpp): maps the file and
/// gives each of `inputs` its role; fails naming the input or the file.
void loadTokenStream(const DataSource &source,
                     const std::vector<DataInput> &inputs,
                     const std::string &entryName, Dataset &out);

//===----------------------------------------------------------------------===//
// The batch loader
//===----------------------------------------------------------------------===//

struct Batch {
  std::vector<NpyArray> arrays; ///< one per DataInput, in order
  uint64_t epoch = 0, index = 0;
  std::vector<uint64_t> samples; ///< the data set's rows, in batch order
};

/// Produces the batches (epoch, index), (epoch, index + 1), ... in order. Epoch
/// e visits the samples in a permutation drawn from mt19937_64 seeded with
/// (seed, e) (a token stream's: its WindowOrder); the last partial batch of
/// an epoch is dropped.
class BatchLoader {
public:
  BatchLoader(const Dataset &data, const std::vector<DataInput> &inputs,
              int64_t batch, uint64_t seed, uint64_t epoch, uint64_t index,
              bool prefetch)
      : data(data), inputs(inputs), batch(static_cast<uint64_t>(batch)),
        seed(seed), nextEpoch(epoch), nextIndex(index) {
    batchesPerEpoch = data.samples / this->batch;
    if (nextIndex >= batchesPerEpoch) {
      nextIndex = 0;
      ++nextEpoch;
    }
    for (const DataInput &d : inputs)
      sources.push_back(data.stream ? nullptr : &data.arrays.at(d.name));
    if (prefetch)
      thread = std::thread([this] { produce(); });
  }

  ~BatchLoader() {
    if (thread.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
      }
      cv.notify_all();
      thread.join();
    }
  }

  uint64_t perEpoch() const { return batchesPerEpoch; }

  /// The next batch in order.
  Batch next() {
    if (!thread.joinable()) {
      Batch b = assemble(nextEpoch, nextIndex);
      advance(nextEpoch, nextIndex);
      return b;
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !queue.empty() || failed; });
    if (queue.empty())
      fail(failure.message, failure.code);
    Batch b = std::move(queue.front());
    queue.pop_front();
    cv.notify_all();
    return b;
  }

  void advance(uint64_t &epoch, uint64_t &index) const {
    if (++index >= batchesPerEpoch) {
      index = 0;
      ++epoch;
    }
  }

private:
  void produce() {
    for (;;) {
      uint64_t epoch, index;
      {
        std::unique_lock<std::mutex> lock(mu);
        // Two batches ahead: one being consumed, one ready.
        cv.wait(lock, [&] { return stopping || queue.size() < 2; });
        if (stopping)
          return;
        epoch = nextEpoch;
        index = nextIndex;
      }
      Batch b;
      TrainError error{ErrorCode::OutOfMemory, "data loader: out of memory"};
      bool made = false;
      try {
        b = assemble(epoch, index);
        made = true;
      } catch (const TrainError &e) {
        error = e; // a read that failed, named
      } catch (...) {
      }
      if (!made) {
        std::lock_guard<std::mutex> lock(mu);
        failed = true;
        failure = error;
        cv.notify_all();
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(std::move(b));
        advance(nextEpoch, nextIndex);
      }
      cv.notify_all();
    }
  }

  /// The samples of batch `index` of `epoch`: a token stream's from its
  /// WindowOrder, an array data set's from its Fisher-Yates permutation.
  std::vector<uint64_t> samplesOf(uint64_t epoch, uint64_t index) {
    std::vector<uint64_t> out(batch);
    if (data.stream) {
      WindowOrder order(data.samples, seed, epoch);
      for (uint64_t j = 0; j < batch; ++j)
        out[j] = order.at(index * batch + j);
      return out;
    }
    const std::vector<uint64_t> &order = permutation(epoch);
    std::copy(order.begin() + index * batch,
              order.begin() + (index + 1) * batch, out.begin());
    return out;
  }

  const std::vector<uint64_t> &permutation(uint64_t epoch) {
    if (permEpoch == epoch && !perm.empty())
      return perm;
    perm.resize(data.samples);
    for (uint64_t i = 0; i < data.samples; ++i)
      perm[i] = i;
    std::mt19937_64 rng(splitmix64(seed) ^ splitmix64(~epoch));
    for (uint64_t i = data.samples; i > 1; --i)
      std::swap(perm[i - 1], perm[bounded(rng, i)]);
    permEpoch = epoch;
    return perm;
  }

  Batch assemble(uint64_t epoch, uint64_t index) {
    Batch b;
    b.epoch = epoch;
    b.index = index;
    b.arrays.resize(inputs.size());
    b.samples = samplesOf(epoch, index);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const DataInput &d = inputs[i];
      NpyArray &out = b.arrays[i];
      out.dtype = d.dtype;
      out.shape = {static_cast<int64_t>(batch)};
      out.shape.insert(out.shape.end(), d.sampleShape.begin(),
                       d.sampleShape.end());
      out.data.resize(batch * d.rowBytes);
    }
    if (data.stream) {
      // One read per window, every input filled from it.
      for (uint64_t j = 0; j < batch; ++j) {
        data.stream->window(b.samples[j], data.window, data.separator,
                            window);
        for (size_t i = 0; i < inputs.size(); ++i)
          TokenStream::fill(data.roles.at(inputs[i].name), window,
                            inputs[i].dtype,
                            b.arrays[i].data.data() + j * inputs[i].rowBytes);
      }
      return b;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const DataInput &d = inputs[i];
      NpyArray &out = b.arrays[i];
      const uint8_t *src = sources[i]->data;
      for (uint64_t j = 0; j < batch; ++j)
        std::memcpy(out.data.data() + j * d.rowBytes,
                    src + b.samples[j] * d.rowBytes, d.rowBytes);
    }
    return b;
  }

  const Dataset &data;
  std::vector<DataInput> inputs;
  std::vector<const DataArray *> sources;
  uint64_t batch, seed, batchesPerEpoch;
  // Producer position (guarded by mu when the thread runs).
  uint64_t nextEpoch, nextIndex;
  // Owned by whichever side assembles.
  std::vector<uint64_t> perm;
  uint64_t permEpoch = std::numeric_limits<uint64_t>::max();
  TokenWindow window;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Batch> queue;
  bool stopping = false;
  bool failed = false;
  TrainError failure; ///< why, once failed
  std::thread thread;
};

//===----------------------------------------------------------------------===//
// Progress and metrics
//===----------------------------------------------------------------------===//

std::string formatDuration(double seconds);
std::string formatNumber(double v);
std::string formatSeconds(double seconds);
/// A JSON number, or null for NaN/infinity (JSON has neither).
std::string jsonNumber(double v);

class Progress {
public:
  Progress(ProgressMode mode, std::FILE *out, int64_t start, int64_t total)
      : out(out), start(start), total(total) {
    if (mode == ProgressMode::Auto)
      mode = ::isatty(::fileno(out)) ? ProgressMode::Bar : ProgressMode::Lines;
    this->mode = mode;
    int64_t todo = std::max<int64_t>(total - start, 1);
    every = std::max<int64_t>(todo / 10, 1);
  }

  void update(int64_t step, double loss, double samplesPerSecond,
              double elapsed) {
    if (mode == ProgressMode::None)
      return;
    double done = static_cast<double>(step - start);
    double eta = done > 0 ? elapsed / done * static_cast<double>(total - step)
                          : std::nan("");
    if (mode == ProgressMode::Bar) {
      // Redraw at most ten times a second: small models run thousands of
      // steps a second, and a terminal should not have to keep up.
      auto now = std::chrono::steady_clock::now();
      if (step != total && barShown && now - lastDraw < kRedraw)
        return;
      lastDraw = now;
      constexpr int kWidth = 24;
      int filled = total > 0 ? static_cast<int>(kWidth * step / total) : kWidth;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::fprintf(out, "\r\033[K[%s] %lld/%lld loss %s  %s samples/s  ETA %s",
                   bar.c_str(), static_cast<long long>(step),
                   static_cast<long long>(total), formatNumber(loss).c_str(),
                   formatNumber(samplesPerSecond).c_str(),
                   formatDuration(eta).c_str());
      std::fflush(out);
      barShown = true;
      return;
    }
    if ((step - start) % every == 0 || step == total) {
      std::fprintf(out, "step %lld/%lld  loss %s  %s samples/s  ETA %s\n",
                   static_cast<long long>(step), static_cast<long long>(total),
                   formatNumber(loss).c_str(),
                   formatNumber(samplesPerSecond).c_str(),
                   formatDuration(eta).c_str());
      std::fflush(out);
    }
  }

  /// A line of its own (an eval result, a note), keeping the bar intact.
  void note(const std::string &line) {
    if (mode == ProgressMode::None)
      return;
    endBar();
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  }

  void endBar() {
    if (barShown) {
      std::fprintf(out, "\n");
      barShown = false;
    }
  }

  bool quiet() const { return mode == ProgressMode::None; }

private:
  std::FILE *out;
  ProgressMode mode;
  int64_t start, total, every;
  bool barShown = false;
  static constexpr std::chrono::milliseconds kRedraw{100};
  std::chrono::steady_clock::time_point lastDraw;
};

/// A JSON-lines file: the metrics, or the data trace.
class Metrics {
public:
  void open(const std::string &path, bool append) {
    if (path.empty())
      return;
    file = std::fopen(path.c_str(), append ? "a" : "w");
    if (!file)
      fail(path + ": cannot open for writing: " + detail::errnoText(errno),
           ErrorCode::IO);
    this->path = path;
  }
  ~Metrics() {
    if (file)
      std::fclose(file);
  }
  /// Writes one JSON object per line, flushed so a crash loses nothing.
  void line(const std::string &body) {
    if (!file)
      return;
    if (std::fprintf(file, "{%s}\n", body.c_str()) < 0 || std::fflush(file))
      fail(path + ": cannot write: " + detail::errnoText(errno),
           ErrorCode::IO);
  }
  /// A --data-trace line: micro-batch `micro` of step `step` (counted from
  /// 1), run by data-parallel rank `rank`, read these samples.
  void traceLine(int64_t step, int64_t micro, int64_t rank,
                 const std::vector<uint64_t> &samples) {
    if (!file)
      return;
    std::string body = "\"step\": " + std::to_string(step) +
                       ", \"micro\": " + std::to_string(micro) +
                       ", \"rank\": " + std::to_string(rank) +
                       ", \"samples\": [";
    for (size_t i = 0; i < samples.size(); ++i)
      body += (i ? ", " : "") + std::to_string(samples[i]);
    line(body + "]");
  }

private:
  std::FILE *file = nullptr;
  std::string path;
};

//===----------------------------------------------------------------------===//
// Tensors of the training state
//===----------------------------------------------------------------------===//

/// Files and the trainer's callers hold whole tensors, sharded or not.
void checkTensor(const std::string &file, const std::string &name, DType dtype,
                 const std::vector<int64_t> &shape, const Binding &expected);
NpyArray copyTensor(const TensorView &view);
/// Every param and state tensor of the artifact from the checkpoint at
/// `path` (whole; all checked, only those of `only` kept when it is not
/// null), and its position. The gradient compression state it holds
/// (isGradCompressionTensorName) goes to `compression` (when not null).
void loadCheckpointImpl(const std::string &path, const Artifact &artifact,
                        std::map<std::string, NpyArray> &tensors,
                        CheckpointInfo &info,
                        const std::set<std::string> *only = nullptr,
                        std::map<std::string, NpyArray> *compression = nullptr);
/// Writes a checkpoint (saveCheckpoint): `tensors`, and `extra` (the
/// gradient compression state) when not null.
void writeCheckpoint(const std::string &path,
                     const std::map<std::string, NpyArray> &tensors,
                     const std::map<std::string, NpyArray> *extra,
                     const CheckpointInfo &info);
/// Initial tensors: the artifact's params file, overridden by `paramsPath`
/// (those of `only` when it is not null).
std::map<std::string, NpyArray>
initialTensors(const Artifact &artifact, const std::string &paramsPath,
               Progress &progress, const std::set<std::string> *only = nullptr);
/// Where training starts: a checkpoint (--resume; notes on `progress`
/// where its seed, batch size or micro-batches per step differ from this
/// run's `batch` and `micros`), the caller's startTensors, or the params
/// file and the artifact's params (whole tensors; only those of `only`
/// when it is not null). True when the run resumes. A checkpoint's
/// gradient compression state goes to `compression`.
bool startingPoint(const Artifact &artifact, const TrainOptions &opt,
                   int64_t batch, int64_t micros, Progress &progress,
                   const std::set<std::string> *only,
                   std::map<std::string, NpyArray> &tensors,
                   CheckpointInfo &start,
                   std::map<std::string, NpyArray> *compression = nullptr);
/// Which scalars an entry takes besides data and tensors.
void addScalarInputs(const PlanEntry &entry, const NpyArray &step,
                     const NpyArray &seed, std::vector<TensorRef> &refs);
/// The entry's param, buffer and state inputs from `tensors`.
void addTensorInputs(const PlanEntry &entry,
                     const std::map<std::string, NpyArray> &tensors,
                     std::vector<TensorRef> &refs);

//===----------------------------------------------------------------------===//
// Checkpoint directory
//===----------------------------------------------------------------------===//

/// "ckpt-<digits>.safetensors" -> the step, else -1.
int64_t checkpointStep(const std::string &name);
/// Removes what a killed writer may have left: "<name>.tmp.<pid>" files of
/// checkpoints and of the `latest` pointer whose writer is gone.
void removeStaleTemporaries(const std::string &dir);
/// Creates the checkpoint directory `dir` (fails with IO when it cannot)
/// and removes the temporaries a killed writer left there.
void prepareCheckpointDir(const std::string &dir);
void writeLatest(const std::string &dir, const std::string &fileName);
void pruneCheckpoints(const std::string &dir, int64_t keep);

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t);
/// sum += g, element by element (f32 or f64).
void addInto(NpyArray &sum, const NpyArray &g);
/// sum /= n, element by element (f32 or f64).
void divideBy(NpyArray &sum, int64_t n);
std::string joinNames(const std::vector<std::string> &names);

/// Hands the run's Collectives to the artifact for the length of train()
/// (a mesh plan's collective steps use them), and takes them back after.
class MeshCollectives {
public:
  MeshCollectives(Artifact &artifact, Collectives *comm)
      : artifact(artifact), previous(artifact.collectives()) {
    artifact.setCollectives(comm);
  }
  ~MeshCollectives() { artifact.setCollectives(previous); }
  MeshCollectives(const MeshCollectives &) = delete;
  MeshCollectives &operator=(const MeshCollectives &) = delete;

private:
  Artifact &artifact;
  Collectives *previous;
};

/// Gradient compression for one train() (GradCompression.h): the spec
/// (TrainOptions::gradCompression over the plan's), the compressor handed
/// to the artifact for the run, its state in checkpoints and its report.
/// Every method is a no-op while it is off.
class CompressionRun {
public:
  /// Off unless the options or the plan ask for it; fails (Unsupported)
  /// where it cannot run: a cuda artifact, a mesh with another axis than
  /// dp and the pipeline's larger than 1. Notes on `progress` where it
  /// asks for compression but there is nothing to compress (no dp axis of
  /// several ranks). `comms`: the artifact's (MeshComms), null without a
  /// mesh; `seed`: the run's (int8's draws).
  CompressionRun(Artifact &artifact, const TrainOptions &opt,
                 const MeshComms *comms, uint64_t seed, Progress &progress);
  ~CompressionRun();
  CompressionRun(const CompressionRun &) = delete;
  CompressionRun &operator=(const CompressionRun &) = delete;

  bool on() const { return compression != nullptr; }
  /// Registers the gradient reductions of `entries` (those this rank
  /// runs), then says on `progress` what stays exact.
  void addEntries(const std::vector<const PlanEntry *> &entries,
                  Progress &progress);
  /// Restores a resumed run's state from the checkpoint's (`saved`) when
  /// its spec and data-parallel ranks are this run's; otherwise (or
  /// without a checkpoint's state) the residuals start at zero, with a
  /// note.
  void restore(bool resumed, const CheckpointInfo &start,
               const std::map<std::string, NpyArray> &saved,
               Progress &progress);
  void beginStep(int64_t step) const;
  /// A checkpoint's tensors of the state, every data-parallel rank's
  /// residual: a collective over the dp axis (every rank calls it).
  std::map<std::string, NpyArray> checkpointTensors() const;
  /// Records the spec and ranks in a checkpoint's position.
  void stamp(CheckpointInfo &info) const;
  /// The bytes into `result`, summed over `sumOver` (a pipeline's axis:
  /// the stages of one replica; null: this rank's) — a collective over it.
  void report(TrainResult &result, Collectives *sumOver) const;
  /// "gradient compression int8: 1028 of 4096 bytes per step (3.98x
  /// less)", and the metrics line's object, from `result`.
  static std::string summary(const TrainResult &result, int64_t steps);
  static std::string metricsLine(const TrainResult &result, int64_t step,
                                 int64_t steps);

private:
  Artifact &artifact;
  GradientCompression *previous;
  std::unique_ptr<GradientCompression> compression;
  Collectives *dpComm = nullptr;
  int64_t dpRank = 0, dpRanks = 1;
};

/// Whether any state tensor of the plan is sharded: then checkpoints and
/// the final tensors are gathered over the ranks (every rank takes part).
bool hasShards(const Plan &plan);
/// `tensors` (this rank's, shards included) made whole, each gathered
/// over its mesh axis's communicator.
std::map<std::string, NpyArray>
wholeTensors(const Plan &plan, const MeshComms &comms,
             const std::map<std::string, NpyArray> &tensors);

} // namespace loomrt::training

#endif // LOOMRT_SRC_TRAINERSUPPORT_H
