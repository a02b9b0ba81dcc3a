//===- CApiTrain.cpp - The C API's training calls (loomrt_train_*) --------===//
//
// A loomrt_trainer is the state loom-run keeps in memory between steps
// (tensors and data position) kept between calls instead, so that an
// embedder (the Python package) trains in several runs, reads and replaces
// parameters in between, and gets the same steps as one uninterrupted run.
// Options arrive as text and are parsed here, once, with loom-run's names.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"

#include "CApiSupport.h"

#include "loomrt/Trainer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>

using namespace loomrt;
using namespace loomrt::capi;

struct loomrt_trainer {
  Artifact *artifact = nullptr;
  TrainOptions options;
  DataArrays data, evalData;
  std::map<std::string, NpyArray> tensors;
  std::map<std::string, BindingKind> kinds; ///< every state tensor's kind
  CheckpointInfo position;
  loomrt_metrics_callback callback = nullptr;
  void *userData = nullptr;
  loomrt_train_summary summary{};
};

namespace {

loomrt_status nullArgument(const char *function) {
  return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                  std::string(function) + ": null argument");
}

/// `text` as a whole signed decimal number in [low, high].
bool parseInt(const char *text, int64_t low, int64_t high, int64_t &out) {
  if (!*text)
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno || *end || v < low || v > high)
    return false;
  out = v;
  return true;
}

loomrt_status badValue(const char *key, const char *value,
                       const char *expected) {
  return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                  std::string("loomrt_train_set_option: ") + key + "='" +
                      value + "': expected " + expected);
}

/// A view of the caller's tensor as a data-set array.
loomrt_status toDataArray(const loomrt_tensor &t, DataArray &out) {
  if (!t.name || (t.rank && !t.shape) || (t.nbytes && !t.data))
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_train_add_array: null name, shape or data");
  if (static_cast<int>(t.dtype) < 0 ||
      static_cast<int>(t.dtype) > LOOMRT_DTYPE_BOOL)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    std::string("loomrt_train_add_array: array '") + t.name +
                        "' has an unknown dtype");
  out.dtype = static_cast<DType>(t.dtype);
  out.shape.assign(t.shape, t.shape + t.rank);
  out.data = static_cast<const uint8_t *>(t.data);
  out.nbytes = t.nbytes;
  std::optional<uint64_t> bytes = checkedByteSize(out.dtype, out.shape);
  if (!bytes || *bytes != t.nbytes)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    std::string("loomrt_train_add_array: array '") + t.name +
                        "' is " + describeTensorType(out.dtype, out.shape) +
                        " but has " + std::to_string(t.nbytes) + " bytes");
  return LOOMRT_OK;
}

/// Sets `field` to the value named `value`; false if none is.
template <typename T>
bool choose(std::initializer_list<std::pair<const char *, T>> names,
            const char *value, T &field) {
  for (const auto &[name, v] : names)
    if (!std::strcmp(name, value))
      return field = v, true;
  return false;
}

} // namespace

extern "C" {

loomrt_status loomrt_train_create(loomrt_artifact *artifact,
                                  loomrt_trainer **out) {
  if (!artifact || !artifact->artifact || !out)
    return nullArgument("loomrt_train_create");
  *out = nullptr;
  try {
    auto trainer = std::make_unique<loomrt_trainer>();
    trainer->artifact = artifact->artifact.get();
    trainer->options.progress = ProgressMode::None;
    trainer->summary.last_loss = std::nan("");
    // Every param, buffer and optimizer-state input of any entry, at the
    // artifact's initial value (a tensor without one stays missing, and
    // training says so unless loomrt_train_set_tensor gives it).
    const auto &initial = trainer->artifact->initialState();
    for (const PlanEntry &entry : trainer->artifact->plan().entries)
      for (const Binding &in : entry.inputs) {
        if (!isStateKind(in.kind) || trainer->kinds.count(in.name))
          continue;
        trainer->kinds.emplace(in.name, in.kind);
        auto it = initial.find(in.name);
        if (it != initial.end())
          trainer->tensors.emplace(in.name, it->second);
      }
    *out = trainer.release();
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_create: out of memory");
  }
}

void loomrt_train_free(loomrt_trainer *trainer) { delete trainer; }

loomrt_status loomrt_train_set_option(loomrt_trainer *trainer, const char *key,
                                      const char *value) {
  if (!trainer || !key || !value)
    return nullArgument("loomrt_train_set_option");
  try {
    TrainOptions &o = trainer->options;
    std::string k = key;
    const int64_t kMax = std::numeric_limits<int64_t>::max();
    auto integer = [&](int64_t low, int64_t &field) {
      int64_t v;
      if (!parseInt(value, low, kMax, v))
        return badValue(key, value,
                        low > 0 ? "a positive integer"
                                : "a non-negative integer");
      field = v;
      return clearError();
    };
    auto flag = [&](bool &field) {
      if (std::strcmp(value, "0") && std::strcmp(value, "1"))
        return badValue(key, value, "0 or 1");
      field = value[0] == '1';
      return clearError();
    };
    if (k == "steps")
      return integer(0, o.steps);
    if (k == "batch_size")
      return integer(0, o.batchSize);
    if (k == "accumulate")
      return integer(1, o.accumulate);
    if (k == "eval_every")
      return integer(0, o.evalEvery);
    if (k == "save_every")
      return integer(0, o.saveEvery);
    if (k == "keep_checkpoints")
      return integer(0, o.keepCheckpoints);
    if (k == "seed") {
      int64_t v;
      if (!parseInt(value, 0, kMax, v))
        return badValue(key, value, "a non-negative integer");
      o.seed = static_cast<uint64_t>(v);
      return clearError();
    }
    if (k == "data")
      return o.dataPath = value, clearError();
    if (k == "eval_data")
      return o.evalDataPath = value, clearError();
    if (k == "checkpoint_dir")
      return o.checkpointDir = value, clearError();
    if (k == "metrics")
      return o.metricsPath = value, clearError();
    if (k == "save_params")
      return o.saveParamsPath = value, clearError();
    if (k == "tokens")
      return choose<TokenFormat>({{"", TokenFormat::None},
                                  {"uint16", TokenFormat::U16},
                                  {"uint32", TokenFormat::U32},
                                  {"megatron", TokenFormat::Megatron}},
                                 value, o.tokens.format)
                 ? clearError()
                 : badValue(key, value,
                            "uint16, uint32, megatron or empty (an .npz)");
    if (k == "labels_input")
      return o.tokens.labels = value, clearError();
    if (k == "documents_input")
      return o.tokens.documentsInput = value, clearError();
    if (k == "positions_input")
      return o.tokens.positionsInput = value, clearError();
    if (k == "doc_separator") {
      if (!std::strcmp(value, "") || !std::strcmp(value, "-1"))
        return o.tokens.docSeparator = -1, clearError();
      return integer(0, o.tokens.docSeparator);
    }
    if (k == "data_trace")
      return o.dataTracePath = value, clearError();
    if (k == "prefetch")
      return flag(o.prefetch);
    if (k == "warnings")
      return flag(o.warnings);
    if (k == "progress")
      return choose<ProgressMode>({{"auto", ProgressMode::Auto},
                                   {"bar", ProgressMode::Bar},
                                   {"lines", ProgressMode::Lines},
                                   {"none", ProgressMode::None}},
                                  value, o.progress)
                 ? clearError()
                 : badValue(key, value, "auto, bar, lines or none");
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_train_set_option: unknown option '" + k +
                        "' (steps, batch_size, accumulate, seed, data, "
                        "eval_data, eval_every, checkpoint_dir, save_every, "
                        "keep_checkpoints, metrics, save_params, progress, "
                        "prefetch, warnings, tokens, labels_input, "
                        "doc_separator, documents_input, positions_input, "
                        "data_trace)");
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_set_option: out of memory");
  }
}

loomrt_status loomrt_train_add_array(loomrt_trainer *trainer, int eval,
                                     const loomrt_tensor *array) {
  if (!trainer || !array)
    return nullArgument("loomrt_train_add_array");
  try {
    DataArray view;
    if (loomrt_status s = toDataArray(*array, view))
      return s;
    (eval ? trainer->evalData : trainer->data)[array->name] = std::move(view);
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_add_array: out of memory");
  }
}

loomrt_status loomrt_train_clear_data(loomrt_trainer *trainer) {
  if (!trainer)
    return nullArgument("loomrt_train_clear_data");
  trainer->data.clear();
  trainer->evalData.clear();
  return clearError();
}

loomrt_status loomrt_train_set_callback(loomrt_trainer *trainer,
                                        loomrt_metrics_callback callback,
                                        void *user_data) {
  if (!trainer)
    return nullArgument("loomrt_train_set_callback");
  trainer->callback = callback;
  trainer->userData = user_data;
  return clearError();
}

loomrt_status loomrt_train_run(loomrt_trainer *trainer) {
  if (!trainer)
    return nullArgument("loomrt_train_run");
  try {
    TrainOptions o = trainer->options;
    if (!trainer->data.empty()) {
      o.dataPath.clear();
      o.data = &trainer->data;
    }
    if (!trainer->evalData.empty()) {
      o.evalDataPath.clear();
      o.evalData = &trainer->evalData;
    }
    o.startTensors = &trainer->tensors;
    o.startPosition = trainer->position;
    if (trainer->callback) {
      loomrt_metrics_callback callback = trainer->callback;
      void *user = trainer->userData;
      o.onMetrics = [callback, user](const std::string &json) {
        return callback(user, json.c_str()) == 0;
      };
    }
    TrainResult result;
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!train(*trainer->artifact, o, &result, &error, &code))
      return setError(static_cast<loomrt_status>(code), error);
    trainer->tensors = std::move(result.tensors);
    trainer->position = result.position;
    loomrt_train_summary &s = trainer->summary;
    s.start_step = result.startStep;
    s.step = result.finalStep;
    s.last_loss = result.lastLoss;
    s.samples_per_second = result.samplesPerSecond;
    s.seconds = result.seconds;
    s.skipped_steps = result.skippedSteps;
    if (result.stopped)
      return setError(LOOMRT_ERROR_CANCELLED,
                      "loomrt_train_run: the metrics callback stopped "
                      "training at step " +
                          std::to_string(result.finalStep));
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_run: out of memory");
  }
}

loomrt_status loomrt_train_summary_get(const loomrt_trainer *trainer,
                                       loomrt_train_summary *out) {
  if (!trainer || !out)
    return nullArgument("loomrt_train_summary_get");
  *out = trainer->summary;
  out->step = trainer->position.step;
  return clearError();
}

loomrt_status loomrt_train_num_tensors(const loomrt_trainer *trainer,
                                       size_t *count) {
  if (!trainer || !count)
    return nullArgument("loomrt_train_num_tensors");
  *count = trainer->tensors.size();
  return clearError();
}

loomrt_status loomrt_train_tensor(const loomrt_trainer *trainer, size_t index,
                                  loomrt_tensor *out,
                                  loomrt_binding_kind *kind) {
  if (!trainer || !out)
    return nullArgument("loomrt_train_tensor");
  if (index >= trainer->tensors.size())
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_train_tensor: index " + std::to_string(index) +
                        " out of range (" +
                        std::to_string(trainer->tensors.size()) + " tensors)");
  auto it = std::next(trainer->tensors.begin(), static_cast<long>(index));
  describeTensor(it->first, it->second, out);
  if (kind)
    *kind = static_cast<loomrt_binding_kind>(trainer->kinds.at(it->first));
  return clearError();
}

loomrt_status loomrt_train_set_tensor(loomrt_trainer *trainer,
                                      const loomrt_tensor *value) {
  if (!trainer || !value || !value->name || (value->rank && !value->shape) ||
      (value->nbytes && !value->data))
    return nullArgument("loomrt_train_set_tensor");
  try {
    auto kind = trainer->kinds.find(value->name);
    if (kind == trainer->kinds.end())
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string("loomrt_train_set_tensor: '") + value->name +
                          "' is not a param, buffer or optimizer state of "
                          "the artifact");
    // The plan's type of the tensor: that of any entry input of this name.
    const Binding *binding = nullptr;
    for (const PlanEntry &entry : trainer->artifact->plan().entries)
      if ((binding = entry.findInput(value->name)))
        break;
    // The whole tensor, also where the plan shards it (the trainer takes
    // this rank's part).
    std::vector<int64_t> shape(value->shape, value->shape + value->rank);
    DType dtype = static_cast<DType>(value->dtype);
    if (dtype != binding->dtype || shape != binding->wholeShape())
      return setError(
          LOOMRT_ERROR_INVALID_ARGUMENT,
          std::string("loomrt_train_set_tensor: '") + value->name + "' is " +
              describeTensorType(dtype, shape) + ", the artifact's " +
              bindingKindName(binding->kind) + " is " +
              describeTensorType(binding->dtype, binding->wholeShape()));
    if (value->nbytes != binding->wholeBytes())
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string("loomrt_train_set_tensor: '") + value->name +
                          "' has " + std::to_string(value->nbytes) +
                          " bytes, expected " +
                          std::to_string(binding->wholeBytes()));
    NpyArray a;
    a.dtype = dtype;
    a.shape = std::move(shape);
    const auto *bytes = static_cast<const uint8_t *>(value->data);
    a.data.assign(bytes, bytes + value->nbytes);
    trainer->tensors[value->name] = std::move(a);
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_set_tensor: out of memory");
  }
}

loomrt_status loomrt_train_evaluate(loomrt_trainer *trainer, double *loss,
                                    double *accuracy, int64_t *samples) {
  if (!trainer)
    return nullArgument("loomrt_train_evaluate");
  try {
    EvalResult r;
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    bool ok;
    if (!trainer->evalData.empty())
      ok = evaluate(*trainer->artifact, trainer->tensors, trainer->evalData,
                    trainer->position.step, &r, &error, &code);
    else if (!trainer->options.evalDataPath.empty())
      ok = evaluate(*trainer->artifact, trainer->tensors,
                    trainer->options.evalDataPath, trainer->position.step, &r,
                    &error, &code);
    else
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      "loomrt_train_evaluate: no evaluation data (add arrays "
                      "with eval = 1, or set the option eval_data)");
    if (!ok)
      return setError(static_cast<loomrt_status>(code), error);
    if (loss)
      *loss = r.haveLoss ? r.loss : std::nan("");
    if (accuracy)
      *accuracy = r.haveAccuracy ? r.accuracy : std::nan("");
    if (samples)
      *samples = r.samples;
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_evaluate: out of memory");
  }
}

loomrt_status loomrt_train_save_checkpoint(const loomrt_trainer *trainer,
                                           const char *path) {
  if (!trainer || !path)
    return nullArgument("loomrt_train_save_checkpoint");
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  if (!saveCheckpoint(path, trainer->tensors, trainer->position, &error, &code))
    return setError(static_cast<loomrt_status>(code), error);
  return clearError();
}

loomrt_status loomrt_train_load_checkpoint(loomrt_trainer *trainer,
                                           const char *path) {
  if (!trainer || !path)
    return nullArgument("loomrt_train_load_checkpoint");
  try {
    std::string file = path, error;
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
      file = findLatestCheckpoint(path, &error);
      if (file.empty())
        return setError(LOOMRT_ERROR_IO, error);
    }
    std::map<std::string, NpyArray> tensors;
    CheckpointInfo info;
    ErrorCode code = ErrorCode::Ok;
    if (!loadCheckpoint(file, *trainer->artifact, &tensors, &info, &error,
                        &code))
      return setError(static_cast<loomrt_status>(code), error);
    trainer->tensors = std::move(tensors);
    trainer->position = info;
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_train_load_checkpoint: out of memory");
  }
}

} // extern "C"
