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
#include "Support.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <signal.h>
#include <thread>
#include <unistd.h>

namespace loomrt {

using detail::ErrorSink;
using detail::quoteName;
namespace fs = std::filesystem;

namespace {

/// Thrown inside this file, caught at the public functions.
struct TrainError {
  ErrorCode code;
  std::string message;
};

[[noreturn]] void fail(std::string message,
                       ErrorCode code = ErrorCode::InvalidArgument) {
  throw TrainError{code, std::move(message)};
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Uniform in [0, n) from a 64-bit generator, without modulo bias. Written
/// out (not std::uniform_int_distribution) so that every standard library
/// shuffles the same way.
uint64_t bounded(std::mt19937_64 &rng, uint64_t n) {
  uint64_t threshold = (0 - n) % n; // 2^64 mod n
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % n;
  }
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return describeTensorType(dtype, shape);
}

bool isDataInput(const Binding &in) {
  return in.kind == BindingKind::Input && in.name != "step" &&
         in.name != "seed";
}

bool isFloat(DType d) { return d == DType::F32 || d == DType::F64; }

double scalarValue(const NpyArray &a) {
  if (a.dtype == DType::F32 && a.data.size() == 4) {
    float v;
    std::memcpy(&v, a.data.data(), 4);
    return v;
  }
  if (a.dtype == DType::F64 && a.data.size() == 8) {
    double v;
    std::memcpy(&v, a.data.data(), 8);
    return v;
  }
  return std::nan("");
}

NpyArray scalarI64(int64_t value) {
  NpyArray a;
  a.dtype = DType::I64;
  a.data.resize(8);
  std::memcpy(a.data.data(), &value, 8);
  return a;
}

int64_t readI64(const NpyArray &a) {
  int64_t v = 0;
  if (a.data.size() == 8)
    std::memcpy(&v, a.data.data(), 8);
  return v;
}

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

std::vector<DataInput> dataInputsOf(const PlanEntry &entry) {
  std::vector<DataInput> result;
  for (const Binding &in : entry.inputs) {
    if (!isDataInput(in))
      continue;
    if (in.shape.empty())
      fail("entry " + quoteName(entry.name) + ": data input " +
               quoteName(in.name) +
               " is 0-D: it has no batch dimension to feed from a data set",
           ErrorCode::Unsupported);
    if (in.shard)
      fail("entry " + quoteName(entry.name) + ": data input " +
               quoteName(in.name) +
               " is sharded; the trainer feeds each rank whole batches",
           ErrorCode::Unsupported);
    DataInput d;
    d.name = in.name;
    d.dtype = in.dtype;
    d.sampleShape.assign(in.shape.begin() + 1, in.shape.end());
    d.batch = in.shape[0];
    d.rowBytes = *checkedByteSize(in.dtype, d.sampleShape);
    result.push_back(std::move(d));
  }
  return result;
}

/// The one batch size all data inputs of `entry` share.
int64_t compiledBatch(const PlanEntry &entry,
                      const std::vector<DataInput> &inputs) {
  if (inputs.empty())
    fail("entry " + quoteName(entry.name) +
             " has no data inputs (kind 'input' other than step and seed)",
         ErrorCode::Unsupported);
  for (const DataInput &d : inputs)
    if (d.batch != inputs[0].batch)
      fail("entry " + quoteName(entry.name) + ": data inputs " +
               quoteName(inputs[0].name) + " and " + quoteName(d.name) +
               " have different batch sizes (" +
               std::to_string(inputs[0].batch) + " and " +
               std::to_string(d.batch) + ")",
           ErrorCode::Unsupported);
  if (inputs[0].batch < 1)
    fail("entry " + quoteName(entry.name) + ": batch size 0",
         ErrorCode::Unsupported);
  return inputs[0].batch;
}

/// Where a data set comes from: an .npz file, or arrays in memory.
struct DataSource {
  std::string path;                   ///< the .npz, when `arrays` is null
  const DataArrays *arrays = nullptr; ///< borrowed
  std::string label;                  ///< names the in-memory data in errors
};

struct Dataset {
  std::string path; ///< the file, or the in-memory data's label, for errors
  std::map<std::string, NpyArray> owned; ///< what was read from a file
  DataArrays arrays;                     ///< views of `owned` or borrowed
  uint64_t samples = 0;
};

DataArray viewOf(const NpyArray &a) {
  return DataArray{a.dtype, a.shape, a.data.data(), a.data.size()};
}

/// Loads `source` and checks it holds every one of `inputs`: same dtype,
/// shape [N, <sample shape>] with one N for all.
void loadDataset(const DataSource &source, const std::vector<DataInput> &inputs,
                 const std::string &entryName, Dataset &out) {
  if (source.arrays) {
    out.path = source.label;
    out.arrays = *source.arrays;
    for (const auto &[name, a] : out.arrays) {
      std::optional<uint64_t> bytes = checkedByteSize(a.dtype, a.shape);
      if (!bytes || *bytes != a.nbytes || (a.nbytes && !a.data))
        fail(source.label + ": array " + quoteName(name) + " is " +
             describe(a.dtype, a.shape) + " but has " +
             std::to_string(a.nbytes) + " bytes");
    }
  } else {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    auto arrays = readNpz(source.path, &error, &code);
    if (!arrays)
      fail(error, code);
    out.path = source.path;
    out.owned = std::move(*arrays);
    for (const auto &[name, a] : out.owned)
      out.arrays.emplace(name, viewOf(a));
  }
  const std::string &path = out.path;
  bool first = true;
  std::string firstName;
  for (const DataInput &d : inputs) {
    std::vector<int64_t> expected = {-1};
    expected.insert(expected.end(), d.sampleShape.begin(), d.sampleShape.end());
    std::string expectText = std::string(dtypeToShortName(d.dtype)) + " [N";
    for (int64_t dim : d.sampleShape)
      expectText += ", " + std::to_string(dim);
    expectText += "]";
    auto it = out.arrays.find(d.name);
    if (it == out.arrays.end()) {
      std::string have;
      for (const auto &[name, _] : out.arrays)
        have += (have.empty() ? "" : ", ") + quoteName(name);
      fail(path + ": no array " + quoteName(d.name) + " (entry " +
               quoteName(entryName) + " takes input " + quoteName(d.name) +
               ", expected " + expectText +
               (source.arrays ? "; it has " : "; the file has ") +
               (have.empty() ? std::string("no arrays") : have) + ")",
           ErrorCode::Format);
    }
    const DataArray &a = it->second;
    bool shapeOk = a.shape.size() == d.sampleShape.size() + 1 &&
                   std::equal(d.sampleShape.begin(), d.sampleShape.end(),
                              a.shape.begin() + 1);
    if (a.dtype != d.dtype || !shapeOk)
      fail(path + ": array " + quoteName(d.name) + " is " +
               describe(a.dtype, a.shape) + ", expected " + expectText +
               " (N samples; entry " + quoteName(entryName) +
               " takes batches of " +
               describe(d.dtype,
                        [&] {
                          std::vector<int64_t> s = {d.batch};
                          s.insert(s.end(), d.sampleShape.begin(),
                                   d.sampleShape.end());
                          return s;
                        }()) +
               ")",
           ErrorCode::Format);
    auto n = static_cast<uint64_t>(a.shape[0]);
    if (first) {
      out.samples = n;
      firstName = d.name;
      first = false;
    } else if (n != out.samples) {
      fail(path + ": array " + quoteName(d.name) + " has " + std::to_string(n) +
               " samples but " + quoteName(firstName) + " has " +
               std::to_string(out.samples),
           ErrorCode::Format);
    }
  }
}

//===----------------------------------------------------------------------===//
// The batch loader
//===----------------------------------------------------------------------===//

struct Batch {
  std::vector<NpyArray> arrays; ///< one per DataInput, in order
  uint64_t epoch = 0, index = 0;
};

/// Produces the batches (epoch, index), (epoch, index + 1), ... in order. Epoch
/// e visits the samples in a permutation drawn from mt19937_64 seeded with
/// (seed, e); the last partial batch of an epoch is dropped.
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
      sources.push_back(&data.arrays.at(d.name));
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
      fail("data loader: out of memory", ErrorCode::OutOfMemory);
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
      try {
        b = assemble(epoch, index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        failed = true;
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
    const std::vector<uint64_t> &order = permutation(epoch);
    Batch b;
    b.epoch = epoch;
    b.index = index;
    b.arrays.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const DataInput &d = inputs[i];
      NpyArray &out = b.arrays[i];
      out.dtype = d.dtype;
      out.shape = {static_cast<int64_t>(batch)};
      out.shape.insert(out.shape.end(), d.sampleShape.begin(),
                       d.sampleShape.end());
      out.data.resize(batch * d.rowBytes);
      const uint8_t *src = sources[i]->data;
      for (uint64_t j = 0; j < batch; ++j)
        std::memcpy(out.data.data() + j * d.rowBytes,
                    src + order[index * batch + j] * d.rowBytes, d.rowBytes);
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

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Batch> queue;
  bool stopping = false;
  bool failed = false;
  std::thread thread;
};

//===----------------------------------------------------------------------===//
// Progress and metrics
//===----------------------------------------------------------------------===//

std::string formatDuration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8)
    return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(
        buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
        static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld",
                  static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

std::string formatNumber(double v) {
  if (std::isnan(v))
    return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string formatSeconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}

/// A JSON number, or null for NaN/infinity (JSON has neither).
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

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

class Metrics {
public:
  void open(const std::string &path, bool append) {
    if (path.empty())
      return;
    file = std::fopen(path.c_str(), append ? "a" : "w");
    if (!file)
      fail(path + ": cannot open metrics file: " + detail::errnoText(errno),
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
      fail(path + ": cannot write metrics: " + detail::errnoText(errno),
           ErrorCode::IO);
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
                 const std::vector<int64_t> &shape, const Binding &expected) {
  if (dtype != expected.dtype || shape != expected.wholeShape())
    fail(file + ": tensor " + quoteName(name) + " is " +
             describe(dtype, shape) + ", the artifact's " +
             bindingKindName(expected.kind) + " is " +
             describe(expected.dtype, expected.wholeShape()),
         ErrorCode::Format);
}

NpyArray copyTensor(const TensorView &view) {
  NpyArray a;
  a.dtype = view.dtype;
  a.shape = view.shape;
  a.data.assign(view.data, view.data + view.nbytes);
  return a;
}

/// Parses a metadata integer written by saveCheckpoint.
uint64_t metaUint(const SafetensorsFile &file, const char *key, bool required,
                  uint64_t fallback = 0) {
  auto it = file.metadata().find(key);
  if (it == file.metadata().end()) {
    if (required)
      fail(file.path() + ": checkpoint metadata has no '" + key + "'",
           ErrorCode::Format);
    return fallback;
  }
  const std::string &text = it->second;
  uint64_t value = 0;
  bool ok = !text.empty() && text.size() <= 20;
  for (char c : text) {
    if (c < '0' || c > '9' ||
        value > (std::numeric_limits<uint64_t>::max() - (c - '0')) / 10) {
      ok = false;
      break;
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok)
    fail(file.path() + ": checkpoint metadata '" + key +
             "' = " + quoteName(text) + " is not a non-negative integer",
         ErrorCode::Format);
  return value;
}

void loadCheckpointImpl(const std::string &path, const Artifact &artifact,
                        std::map<std::string, NpyArray> &tensors,
                        CheckpointInfo &info) {
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  std::unique_ptr<SafetensorsFile> file =
      SafetensorsFile::open(path, &error, &code);
  if (!file)
    fail("cannot read checkpoint: " + error, code);
  auto format = file->metadata().find("format");
  if (format == file->metadata().end() || format->second != "loom-checkpoint")
    fail(path + ": not a Loom checkpoint (metadata 'format' is not "
                "'loom-checkpoint'); use --params for a plain parameter file",
         ErrorCode::Format);
  uint64_t version = metaUint(*file, "version", true);
  if (version != 1)
    fail(path + ": checkpoint version " + std::to_string(version) +
             " is not supported (this runtime reads version 1)",
         ErrorCode::Unsupported);
  info.step = static_cast<int64_t>(std::min<uint64_t>(
      metaUint(*file, "step", true), std::numeric_limits<int64_t>::max()));
  info.seed = metaUint(*file, "seed", true);
  info.dataEpoch = metaUint(*file, "data_epoch", true);
  info.dataBatch = metaUint(*file, "data_batch", true);
  info.dataSamples = metaUint(*file, "data_samples", false);
  info.batchSize = static_cast<int64_t>(
      std::min<uint64_t>(metaUint(*file, "batch_size", false), 1u << 30));
  info.accumulate = static_cast<int64_t>(
      std::min<uint64_t>(metaUint(*file, "accumulate", false, 1), 1u << 30));

  const TensorView *step = file->find("step");
  if (!step)
    fail(path + ": checkpoint has no tensor 'step'", ErrorCode::Format);
  if (step->dtype != DType::I64 || !step->shape.empty())
    fail(path + ": tensor 'step' is " + describe(step->dtype, step->shape) +
             ", expected i64 []",
         ErrorCode::Format);
  int64_t stepValue;
  std::memcpy(&stepValue, step->data, 8);
  if (stepValue != info.step)
    fail(path + ": tensor 'step' holds " + std::to_string(stepValue) +
             " but the metadata says " + std::to_string(info.step),
         ErrorCode::Format);

  std::map<std::string, const Binding *> expected =
      stateBindings(artifact.plan());
  for (const TensorView &t : file->tensors()) {
    if (t.name == "step")
      continue;
    auto it = expected.find(t.name);
    if (it == expected.end())
      fail(path + ": tensor " + quoteName(t.name) +
               " is not a param or state tensor of this artifact (a "
               "checkpoint of another model?)",
           ErrorCode::Format);
    checkTensor(path, t.name, t.dtype, t.shape, *it->second);
  }
  std::map<std::string, NpyArray> result;
  for (const auto &[name, binding] : expected) {
    const TensorView *t = file->find(name);
    if (!t)
      fail(path + ": checkpoint has no tensor " + quoteName(name) + " (" +
               bindingKindName(binding->kind) + " of the artifact)",
           ErrorCode::Format);
    result.emplace(name, copyTensor(*t));
  }
  tensors = std::move(result);
}

/// Initial tensors: the artifact's params file, overridden by `paramsPath`.
std::map<std::string, NpyArray> initialTensors(const Artifact &artifact,
                                               const std::string &paramsPath,
                                               Progress &progress) {
  std::map<std::string, const Binding *> expected =
      stateBindings(artifact.plan());
  std::unique_ptr<SafetensorsFile> file;
  if (!paramsPath.empty()) {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    file = SafetensorsFile::open(paramsPath, &error, &code);
    if (!file)
      fail(error, code);
    size_t unused = 0;
    for (const TensorView &t : file->tensors())
      if (t.name != "step" && !expected.count(t.name))
        ++unused;
    if (unused)
      progress.note("note: " + paramsPath + ": " + std::to_string(unused) +
                    " tensor(s) are not params or state of this artifact and "
                    "are ignored");
  }
  std::map<std::string, NpyArray> tensors;
  for (const auto &[name, binding] : expected) {
    if (file) {
      if (const TensorView *t = file->find(name)) {
        checkTensor(paramsPath, name, t->dtype, t->shape, *binding);
        tensors.emplace(name, copyTensor(*t));
        continue;
      }
    }
    auto it = artifact.initialState().find(name);
    if (it == artifact.initialState().end())
      fail("no initial value for " +
               std::string(bindingKindName(binding->kind)) + " " +
               quoteName(name) +
               (artifact.plan().params.empty()
                    ? " (the artifact has no params file; pass --params)"
                    : ""),
           ErrorCode::InvalidArgument);
    tensors.emplace(name, it->second);
  }
  return tensors;
}

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

/// Which scalars an entry takes besides data and tensors.
void addScalarInputs(const PlanEntry &entry, const NpyArray &step,
                     const NpyArray &seed, std::vector<TensorRef> &refs) {
  if (entry.findInput("step"))
    refs.push_back(tensorRef("step", step));
  if (entry.findInput("seed"))
    refs.push_back(tensorRef("seed", seed));
}

void addTensorInputs(const PlanEntry &entry,
                     const std::map<std::string, NpyArray> &tensors,
                     std::vector<TensorRef> &refs) {
  for (const Binding &in : entry.inputs)
    if (isStateKind(in.kind)) {
      auto it = tensors.find(in.name);
      if (it == tensors.end())
        fail("no value for " + std::string(bindingKindName(in.kind)) + " " +
             quoteName(in.name) + " of entry " + quoteName(entry.name));
      refs.push_back(tensorRef(in.name, it->second));
    }
}

void evaluateImpl(Artifact &artifact,
                  const std::map<std::string, NpyArray> &tensors,
                  const DataSource &source, int64_t step, EvalResult &result) {
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

//===----------------------------------------------------------------------===//
// Checkpoint directory
//===----------------------------------------------------------------------===//

/// "ckpt-<digits>.safetensors" → the step, else -1.
int64_t checkpointStep(const std::string &name) {
  const std::string prefix = "ckpt-", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

/// Removes what a killed writer may have left: "<name>.tmp.<pid>" files of
/// checkpoints and of the `latest` pointer whose writer is gone.
void removeStaleTemporaries(const std::string &dir) {
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    size_t at = name.rfind(".tmp.");
    if (at == std::string::npos)
      continue;
    std::string base = name.substr(0, at);
    if (checkpointStep(base) < 0 && base != "latest")
      continue;
    std::string pid = name.substr(at + 5);
    if (pid.empty() || pid.size() > 9 ||
        !std::all_of(pid.begin(), pid.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    // A live process (another trainer on the same directory) keeps its file.
    if (std::stol(pid) != ::getpid() && ::kill(std::stol(pid), 0) == 0)
      continue;
    fs::remove(entry.path(), ec);
  }
}

void writeLatest(const std::string &dir, const std::string &fileName) {
  std::string text = fileName + "\n";
  detail::ByteSpan span{reinterpret_cast<const uint8_t *>(text.data()),
                        text.size()};
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!detail::writeFileAtomically(dir + "/latest", {span},
                                   ErrorSink{&error, &code}))
    fail(error, code);
}

void pruneCheckpoints(const std::string &dir, int64_t keep) {
  if (keep <= 0)
    return;
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    int64_t step = checkpointStep(entry.path().filename().string());
    if (step >= 0)
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < found.size(); ++i)
    fs::remove(found[i].second, ec);
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void addInto(NpyArray &sum, const NpyArray &g) {
  if (sum.dtype == DType::F32) {
    auto *s = reinterpret_cast<float *>(sum.data.data());
    const auto *x = reinterpret_cast<const float *>(g.data.data());
    size_t n = sum.data.size() / 4;
    for (size_t i = 0; i < n; ++i)
      s[i] += x[i];
  } else {
    auto *s = reinterpret_cast<double *>(sum.data.data());
    const auto *x = reinterpret_cast<const double *>(g.data.data());
    size_t n = sum.data.size() / 8;
    for (size_t i = 0; i < n; ++i)
      s[i] += x[i];
  }
}

void divideBy(NpyArray &sum, int64_t n) {
  if (sum.dtype == DType::F32) {
    auto *s = reinterpret_cast<float *>(sum.data.data());
    for (size_t i = 0; i < sum.data.size() / 4; ++i)
      s[i] /= static_cast<float>(n);
  } else {
    auto *s = reinterpret_cast<double *>(sum.data.data());
    for (size_t i = 0; i < sum.data.size() / 8; ++i)
      s[i] /= static_cast<double>(n);
  }
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

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

/// Whether any state tensor of the plan is sharded: then checkpoints and
/// the final tensors are gathered over the ranks (every rank takes part).
bool hasShards(const Plan &plan) {
  for (const auto &[name, binding] : stateBindings(plan))
    if (binding->shard)
      return true;
  return false;
}

/// `tensors` (this rank's, shards included) made whole, each gathered
/// over its mesh axis's communicator.
std::map<std::string, NpyArray>
wholeTensors(const Plan &plan, const MeshComms &comms,
             const std::map<std::string, NpyArray> &tensors) {
  std::map<std::string, NpyArray> whole = tensors;
  std::string error;
  if (!gatherTensors(plan, comms, whole, &error))
    fail(error, ErrorCode::IO);
  return whole;
}

void trainImpl(Artifact &artifact, const TrainOptions &opt,
               TrainResult &result) {
  std::FILE *log = opt.log ? opt.log : stderr;
  if (opt.steps < 0)
    fail("--steps must be non-negative");
  if (opt.accumulate < 1)
    fail("--accumulate must be at least 1");
  if (opt.saveEvery < 0 || opt.evalEvery < 0 || opt.keepCheckpoints < 0)
    fail("--save-every, --eval-every and --keep-checkpoints must be "
         "non-negative");
  if (opt.saveEvery > 0 && opt.checkpointDir.empty())
    fail("--save-every needs --checkpoint-dir");
  const bool haveEval = !opt.evalDataPath.empty() || opt.evalData;
  if (opt.evalEvery > 0 && !haveEval)
    fail("--eval-every needs --eval-data");
  if (opt.dataPath.empty() && !opt.data)
    fail("training needs --data FILE.npz");
  if (!opt.dataPath.empty() && opt.data)
    fail("training data given twice: as a file and in memory");
  if (!opt.evalDataPath.empty() && opt.evalData)
    fail("evaluation data given twice: as a file and in memory");
  if (int(!opt.resumePath.empty()) + int(!opt.paramsPath.empty()) +
          int(opt.startTensors != nullptr) >
      1)
    fail(opt.startTensors
             ? "startTensors and --resume or --params all set the starting "
               "tensors; give one"
             : "--resume and --params both set the starting tensors; give "
               "one");
  const DataSource trainSource{opt.dataPath, opt.data, "the training data"};
  const DataSource evalSource{opt.evalDataPath, opt.evalData,
                              "the evaluation data"};

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
  std::map<std::string, NpyArray> tensors;
  CheckpointInfo start;
  start.seed = opt.seed;
  bool resumed = !opt.resumePath.empty();
  if (resumed) {
    std::string path = opt.resumePath;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::string error;
      path = findLatestCheckpoint(opt.resumePath, &error);
      if (path.empty())
        fail(error, ErrorCode::IO);
    }
    loadCheckpointImpl(path, artifact, tensors, start);
    if (start.seed != opt.seed)
      progress.note("note: continuing with the checkpoint's seed " +
                    std::to_string(start.seed) + " (not " +
                    std::to_string(opt.seed) +
                    "), so that the run continues as it began");
    if (start.batchSize != 0 && start.batchSize != batch)
      progress.note("warning: the checkpoint was written with batch size " +
                    std::to_string(start.batchSize) + ", this artifact's is " +
                    std::to_string(batch) +
                    "; the data order will differ from the original run");
    if (start.accumulate != micros)
      progress.note("warning: the checkpoint's steps took " +
                    std::to_string(start.accumulate) +
                    " micro-batches, this run's take " +
                    std::to_string(micros) +
                    " (--accumulate times ranks); the data order will "
                    "differ from the original run");
  } else if (opt.startTensors) {
    // An embedder's run going on from the last one: the same as resuming
    // from a checkpoint, without the file.
    for (const auto &[name, binding] : stateBindings(artifact.plan())) {
      auto it = opt.startTensors->find(name);
      if (it == opt.startTensors->end())
        fail("the starting tensors have no " +
             std::string(bindingKindName(binding->kind)) + " " +
             quoteName(name));
      checkTensor("the starting tensors", name, it->second.dtype,
                  it->second.shape, *binding);
      tensors.emplace(name, it->second);
    }
    if (opt.startPosition.step > 0) {
      start = opt.startPosition;
      resumed = true;
    }
  } else {
    tensors = initialTensors(artifact, opt.paramsPath, progress);
  }
  int64_t step = start.step;
  result.startStep = step;
  uint64_t seed = start.seed;
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

  if (!opt.checkpointDir.empty() && lead) {
    std::error_code ec;
    fs::create_directories(opt.checkpointDir, ec);
    if (ec || !fs::is_directory(opt.checkpointDir, ec))
      fail(opt.checkpointDir +
               ": cannot create checkpoint directory: " + ec.message(),
           ErrorCode::IO);
    removeStaleTemporaries(opt.checkpointDir);
  }

  Metrics metrics;
  if (lead)
    metrics.open(opt.metricsPath, resumed);
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
    return info;
  };
  int64_t lastSaved = resumed ? step : -1;
  // Checkpoints hold whole tensors: sharded ones are gathered first, by
  // every rank (a collective), so every rank goes through every save.
  auto save = [&] {
    if (!lead && !sharded) {
      lastSaved = step;
      return;
    }
    refreshTensors();
    std::map<std::string, NpyArray> gathered;
    if (sharded)
      gathered = wholeTensors(plan, *comms, tensors);
    lastSaved = step;
    if (!lead)
      return;
    std::string name = checkpointFileName(step);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!saveCheckpoint(opt.checkpointDir + "/" + name,
                        sharded ? gathered : tensors, checkpointInfo(), &error,
                        &code))
      fail(error, code);
    writeLatest(opt.checkpointDir, name);
    pruneCheckpoints(opt.checkpointDir, opt.keepCheckpoints);
  };
  int64_t lastEval = -1;
  EvalResult lastEvalResult;
  auto runEval = [&] {
    if (!lead && !evalEveryRank)
      return;
    EvalResult r;
    refreshTensors();
    evaluateImpl(artifact, tensors, evalSource, step, r);
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
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!accumulating) {
      // One micro-batch, or with a mesh plan data-parallel rank i's of the
      // step's `micros` (the plan averages the loss and gradients over
      // them).
      Batch b;
      for (int64_t micro = 0; micro < micros; ++micro) {
        Batch next = loader.next();
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
  return guarded(sink, path.c_str(), [&] {
    SafetensorsWriter writer;
    if (tensors.count("step"))
      fail(path + ": a tensor is named 'step', which checkpoints reserve");
    for (const auto &[name, a] : tensors)
      writer.addBorrowed(name, a.dtype, a.shape, a.data.data(), a.data.size());
    int64_t step = info.step;
    writer.add("step", DType::I64, {}, &step, 8);
    writer.setMetadata("format", "loom-checkpoint");
    writer.setMetadata("version", "1");
    writer.setMetadata("step", std::to_string(info.step));
    writer.setMetadata("seed", std::to_string(info.seed));
    writer.setMetadata("data_epoch", std::to_string(info.dataEpoch));
    writer.setMetadata("data_batch", std::to_string(info.dataBatch));
    writer.setMetadata("data_samples", std::to_string(info.dataSamples));
    writer.setMetadata("batch_size", std::to_string(info.batchSize));
    writer.setMetadata("accumulate", std::to_string(info.accumulate));
    std::string message;
    ErrorCode c = ErrorCode::Ok;
    if (!writer.write(path, &message, &c))
      fail(message, c);
  });
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
