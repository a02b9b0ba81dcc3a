//===- TrainerSupport.cpp - What the trainers share -----------------------===//
//
// Moved out of Trainer.cpp so that PipelineTrainer.cpp runs the same code
// (TrainerSupport.h).
//
//===----------------------------------------------------------------------===//

#include "TrainerSupport.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <signal.h>

namespace loomrt::training {

using detail::ErrorSink;
namespace fs = std::filesystem;

void checkTrainOptions(const TrainOptions &opt) {
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
  const TokenStreamOptions &t = opt.tokens;
  if (t.format == TokenFormat::None) {
    if (t.docSeparator >= 0 || !t.documentsInput.empty() ||
        !t.positionsInput.empty())
      fail("--doc-separator, --documents-input and --positions-input need "
           "--tokens (a token-stream data file)");
  } else {
    if (opt.data || opt.evalData)
      fail("--tokens reads token files; the data was given in memory");
    uint64_t most = t.format == TokenFormat::U16 ? 0xffff : 0xffffffffu;
    if (t.format == TokenFormat::Megatron && t.docSeparator >= 0)
      fail("--doc-separator is not used with --tokens=megatron: the "
           "documents are those of its .idx");
    if (t.docSeparator > int64_t(most))
      fail("--doc-separator " + std::to_string(t.docSeparator) +
           " cannot occur in " + tokenFormatName(t.format) + " tokens");
    if ((!t.documentsInput.empty() || !t.positionsInput.empty()) &&
        t.docSeparator < 0 && t.format != TokenFormat::Megatron)
      fail("--documents-input and --positions-input need --doc-separator "
           "(the token that ends a document) or --tokens=megatron");
    const std::string *names[] = {&t.labels, &t.documentsInput,
                                  &t.positionsInput};
    for (int i = 0; i < 3; ++i)
      for (int j = i + 1; j < 3; ++j)
        if (!names[i]->empty() && *names[i] == *names[j])
          fail("--labels-input, --documents-input and --positions-input "
               "name one input twice: " + quoteName(*names[i]));
  }
  if (int(!opt.resumePath.empty()) + int(!opt.paramsPath.empty()) +
          int(opt.startTensors != nullptr) >
      1)
    fail(opt.startTensors
             ? "startTensors and --resume or --params all set the starting "
               "tensors; give one"
             : "--resume and --params both set the starting tensors; give "
               "one");
}

[[noreturn]] void fail(std::string message, ErrorCode code) {
  throw TrainError{code, std::move(message)};
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

DataArray viewOf(const NpyArray &a) {
  return DataArray{a.dtype, a.shape, a.data.data(), a.data.size()};
}

/// Loads `source` and checks it holds every one of `inputs`: same dtype,
/// shape [N, <sample shape>] with one N for all.
void loadDataset(const DataSource &source, const std::vector<DataInput> &inputs,
                 const std::string &entryName, Dataset &out) {
  if (source.tokens && source.tokens->format != TokenFormat::None)
    return loadTokenStream(source, inputs, entryName, out);
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
                        CheckpointInfo &info, const std::set<std::string> *only,
                        std::map<std::string, NpyArray> *compression) {
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
  if (auto it = file->metadata().find("grad_compression");
      it != file->metadata().end()) {
    info.gradCompression = it->second;
    info.gradCompressionRanks = static_cast<int64_t>(std::min<uint64_t>(
        metaUint(*file, "grad_compression_ranks", false), 1u << 30));
  }

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
  std::map<std::string, NpyArray> compressionState;
  for (const TensorView &t : file->tensors()) {
    if (t.name == "step")
      continue;
    auto it = expected.find(t.name);
    // Gradient compression's residuals and Qs (CompressionRun): whoever
    // asks takes them; they are no param or state of the artifact.
    if (it == expected.end() && isGradCompressionTensorName(t.name)) {
      if (compression)
        compressionState.emplace(t.name, copyTensor(t));
      continue;
    }
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
    if (!only || only->count(name))
      result.emplace(name, copyTensor(*t));
  }
  tensors = std::move(result);
  if (compression)
    *compression = std::move(compressionState);
}

void writeCheckpoint(const std::string &path,
                     const std::map<std::string, NpyArray> &tensors,
                     const std::map<std::string, NpyArray> *extra,
                     const CheckpointInfo &info) {
  SafetensorsWriter writer;
  if (tensors.count("step"))
    fail(path + ": a tensor is named 'step', which checkpoints reserve");
  for (const auto &[name, a] : tensors)
    writer.addBorrowed(name, a.dtype, a.shape, a.data.data(), a.data.size());
  if (extra)
    for (const auto &[name, a] : *extra) {
      if (tensors.count(name) || name == "step")
        fail(path + ": gradient compression state " + quoteName(name) +
             " has the name of a tensor of the artifact");
      writer.addBorrowed(name, a.dtype, a.shape, a.data.data(), a.data.size());
    }
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
  // Only runs that compress say so: a plain run's checkpoint is what it
  // always was.
  if (!info.gradCompression.empty()) {
    writer.setMetadata("grad_compression", info.gradCompression);
    writer.setMetadata("grad_compression_ranks",
                       std::to_string(info.gradCompressionRanks));
  }
  std::string message;
  ErrorCode c = ErrorCode::Ok;
  if (!writer.write(path, &message, &c))
    fail(message, c);
}

/// Initial tensors: the artifact's params file, overridden by `paramsPath`.
std::map<std::string, NpyArray>
initialTensors(const Artifact &artifact, const std::string &paramsPath,
               Progress &progress, const std::set<std::string> *only) {
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
    if (only && !only->count(name))
      continue;
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

bool startingPoint(const Artifact &artifact, const TrainOptions &opt,
                   int64_t batch, int64_t micros, Progress &progress,
                   const std::set<std::string> *only,
                   std::map<std::string, NpyArray> &tensors,
                   CheckpointInfo &start,
                   std::map<std::string, NpyArray> *compression) {
  tensors.clear();
  start = CheckpointInfo();
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
    loadCheckpointImpl(path, artifact, tensors, start, only, compression);
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
      if (only && !only->count(name))
        continue;
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
      // The caller's tensors carry no gradient compression state.
      start.gradCompression.clear();
      start.gradCompressionRanks = 0;
      resumed = true;
    }
  } else {
    tensors = initialTensors(artifact, opt.paramsPath, progress, only);
  }
  return resumed;
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

void prepareCheckpointDir(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    fail(dir + ": cannot create checkpoint directory: " + ec.message(),
         ErrorCode::IO);
  removeStaleTemporaries(dir);
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

//===----------------------------------------------------------------------===//
// Gradient compression
//===----------------------------------------------------------------------===//

CompressionRun::CompressionRun(Artifact &artifact, const TrainOptions &opt,
                               const MeshComms *comms, uint64_t seed,
                               Progress &progress)
    : artifact(artifact), previous(artifact.gradientCompression()) {
  const Plan &plan = artifact.plan();
  const bool asked = !opt.gradCompression.empty();
  const std::string &text = asked ? opt.gradCompression : plan.gradCompression;
  if (text.empty())
    return;
  GradCompressionSpec spec;
  std::string error;
  if (!parseGradCompression(text, &spec, &error))
    fail(error);
  if (!spec.enabled())
    return;
  const std::string what = "gradient compression " + quoteName(spec.text) +
                           (asked ? "" : " (the plan's grad_compression)");
  if (plan.target != "cpu")
    fail(what + " runs on cpu artifacts only; this artifact's target is " +
             quoteName(plan.target) +
             " (compressing on the GPU, between NCCL calls, is not "
             "implemented): train without it (--grad-compression=none)",
         ErrorCode::Unsupported);
  int dpAxis = plan.mesh ? plan.mesh->axisIndex("dp") : -1;
  if (plan.mesh)
    for (uint32_t a = 0; a < plan.mesh->axes.size(); ++a)
      if (plan.mesh->shape[a] > 1 && int(a) != dpAxis &&
          !(plan.pipeline && plan.pipeline->axisIndex == a))
        fail(what + " with mesh axis " + quoteName(plan.mesh->axes[a]) +
                 " of " + std::to_string(plan.mesh->shape[a]) +
                 " ranks (mesh " + plan.mesh->describe() +
                 ") is not implemented: the residuals of gradients that "
                 "differ across that axis would not be checkpointed; "
                 "train without it (--grad-compression=none)",
             ErrorCode::Unsupported);
  if (dpAxis < 0 || plan.mesh->shape[size_t(dpAxis)] < 2) {
    progress.note("note: " + what +
                  ": the artifact has no data-parallel mesh axis 'dp' of "
                  "several ranks (compile with loomc --dp=N): nothing to "
                  "compress");
    return;
  }
  dpRanks = plan.mesh->shape[size_t(dpAxis)];
  if (comms) {
    dpComm = comms->axis(uint32_t(dpAxis));
    dpRank = comms->index(uint32_t(dpAxis));
  }
  compression = std::make_unique<GradientCompression>(spec, seed);
  artifact.setGradientCompression(compression.get());
}

CompressionRun::~CompressionRun() {
  if (compression)
    artifact.setGradientCompression(previous);
}

void CompressionRun::addEntries(const std::vector<const PlanEntry *> &entries,
                                Progress &progress) {
  if (!compression)
    return;
  for (const PlanEntry *entry : entries) {
    std::string error;
    if (entry && !compression->addEntry(artifact.plan(), *entry, &error))
      fail(error, ErrorCode::Format);
  }
  const std::string what = "gradient compression " + compression->spec().text;
  if (compression->registeredCount() == 0) {
    progress.note("warning: " + what +
                  ": the plan marks none of its gradient reductions (no "
                  "collective step has a 'grad': compiled by an older "
                  "loomc?): every reduction stays exact");
    return;
  }
  std::vector<std::string> other = compression->notF32();
  if (!other.empty())
    progress.note("note: " + what + ": " + std::to_string(other.size()) +
                  " gradient(s) are not f32 (" + quoteName(other[0]) +
                  (other.size() > 1 ? ", ..." : "") +
                  "): their reductions stay exact (only f32 gradients are "
                  "compressed)");
  size_t compressed = compression->compressedCount();
  progress.note(
      what + ": " + std::to_string(compressed) + " of " +
      std::to_string(compression->registeredCount()) +
      " gradient reduction(s) compressed, over " + std::to_string(dpRanks) +
      " data-parallel ranks" +
      (compression->spec().method == GradCompressionSpec::Method::PowerSgd &&
               compressed < compression->registeredCount()
           ? " (PowerSGD leaves vectors, and matrices too small "
             "for the rank, exact)"
           : ""));
}

void CompressionRun::restore(bool resumed, const CheckpointInfo &start,
                             const std::map<std::string, NpyArray> &saved,
                             Progress &progress) {
  if (!resumed)
    return;
  const std::string ckpt =
      start.gradCompression.empty()
          ? std::string()
          : quoteName(start.gradCompression) + " over " +
                std::to_string(start.gradCompressionRanks) +
                " data-parallel ranks";
  if (!compression) {
    if (!ckpt.empty())
      progress.note("note: the checkpoint holds gradient compression state "
                    "(" +
                    ckpt +
                    "); this run compresses nothing and "
                    "ignores it");
    return;
  }
  const GradCompressionSpec &spec = compression->spec();
  if (ckpt.empty()) {
    progress.note("note: the checkpoint holds no gradient compression "
                  "state: the residuals start at zero");
    return;
  }
  if (start.gradCompression != spec.text ||
      start.gradCompressionRanks != dpRanks) {
    progress.note("warning: the checkpoint's gradient compression state is "
                  "for " +
                  ckpt + ", this run's " + quoteName(spec.text) + " over " +
                  std::to_string(dpRanks) +
                  ": it is not used, the residuals start at zero");
    return;
  }
  std::vector<std::string> notes;
  compression->restore(saved, dpRank, &notes);
  for (const std::string &n : notes)
    progress.note("warning: " + n);
}

void CompressionRun::beginStep(int64_t step) const {
  if (compression)
    compression->beginStep(step);
}

std::map<std::string, NpyArray> CompressionRun::checkpointTensors() const {
  std::map<std::string, NpyArray> out;
  std::string error;
  if (compression && !compression->gatherState(dpComm, dpRank, &out, &error))
    fail(error, ErrorCode::IO);
  return out;
}

void CompressionRun::stamp(CheckpointInfo &info) const {
  if (!compression)
    return;
  info.gradCompression = compression->spec().text;
  info.gradCompressionRanks = dpRanks;
}

void CompressionRun::report(TrainResult &result, Collectives *sumOver) const {
  if (!compression)
    return;
  GradCompressionBytes b = compression->bytes();
  int64_t sums[2] = {int64_t(b.sent), int64_t(b.exact)};
  std::string error;
  if (sumOver && sumOver->size() > 1 &&
      !waitFor(sumOver->allReduce(sums, 2, DType::I64, ReduceOp::Sum, &error),
               &error))
    fail("summing the gradient bytes over the pipeline: " + error,
         ErrorCode::IO);
  result.gradCompression = compression->spec().text;
  result.gradBytesSent = uint64_t(sums[0]);
  result.gradBytesExact = uint64_t(sums[1]);
}

std::string CompressionRun::summary(const TrainResult &r, int64_t steps) {
  if (r.gradCompression.empty() || steps <= 0 || r.gradBytesSent == 0)
    return std::string();
  return "gradient compression " + r.gradCompression + ": " +
         formatNumber(double(r.gradBytesSent) / double(steps)) + " of " +
         formatNumber(double(r.gradBytesExact) / double(steps)) +
         " bytes per step sent (" +
         formatNumber(double(r.gradBytesExact) / double(r.gradBytesSent)) +
         "x less)";
}

std::string CompressionRun::metricsLine(const TrainResult &r, int64_t step,
                                        int64_t steps) {
  if (r.gradCompression.empty() || steps <= 0)
    return std::string();
  return "\"step\": " + std::to_string(step) +
         ", \"grad_compression\": {\"spec\": \"" + r.gradCompression +
         "\", \"steps\": " + std::to_string(steps) +
         ", \"bytes_sent\": " + std::to_string(r.gradBytesSent) +
         ", \"bytes_exact\": " + std::to_string(r.gradBytesExact) +
         ", \"ratio\": " +
         jsonNumber(r.gradBytesSent
                        ? double(r.gradBytesExact) / double(r.gradBytesSent)
                        : std::nan("")) +
         "}";
}

} // namespace loomrt::training
