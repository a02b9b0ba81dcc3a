//===- CApi.cpp - C entry points over the C++ runtime ---------------------===//
//
// Each function converts C++ results to a loomrt_status and never lets an
// exception cross the C boundary.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"

#include "CApiSupport.h"

#include "loomrt/Artifact.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifndef LOOMRT_VERSION_STRING
#error "LOOMRT_VERSION_STRING must be defined by the build"
#endif

using loomrt::ErrorCode;

// The C enum mirrors the C++ one; keep them from drifting apart.
static_assert(static_cast<int>(ErrorCode::InvalidArgument) ==
                  LOOMRT_ERROR_INVALID_ARGUMENT,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::IO) == LOOMRT_ERROR_IO,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::Format) == LOOMRT_ERROR_FORMAT,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::Unsupported) ==
                  LOOMRT_ERROR_UNSUPPORTED,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::NoDevice) == LOOMRT_ERROR_NO_DEVICE,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::OutOfMemory) ==
                  LOOMRT_ERROR_OUT_OF_MEMORY,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::NonFinite) ==
                  LOOMRT_ERROR_NON_FINITE,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::Cancelled) == LOOMRT_ERROR_CANCELLED,
              "ErrorCode and loomrt_status differ");

static_assert(
    static_cast<int>(loomrt::BindingKind::Param) == LOOMRT_BINDING_PARAM &&
        static_cast<int>(loomrt::BindingKind::State) == LOOMRT_BINDING_STATE &&
        static_cast<int>(loomrt::BindingKind::Input) == LOOMRT_BINDING_INPUT &&
        static_cast<int>(loomrt::BindingKind::Output) ==
            LOOMRT_BINDING_OUTPUT &&
        static_cast<int>(loomrt::BindingKind::Grad) == LOOMRT_BINDING_GRAD &&
        static_cast<int>(loomrt::BindingKind::Buffer) == LOOMRT_BINDING_BUFFER,
    "BindingKind and loomrt_binding_kind differ");

static_assert(static_cast<int>(loomrt::DType::F64) == LOOMRT_DTYPE_F64 &&
                  static_cast<int>(loomrt::DType::F32) == LOOMRT_DTYPE_F32 &&
                  static_cast<int>(loomrt::DType::F16) == LOOMRT_DTYPE_F16 &&
                  static_cast<int>(loomrt::DType::BF16) == LOOMRT_DTYPE_BF16 &&
                  static_cast<int>(loomrt::DType::I64) == LOOMRT_DTYPE_I64 &&
                  static_cast<int>(loomrt::DType::I32) == LOOMRT_DTYPE_I32 &&
                  static_cast<int>(loomrt::DType::I16) == LOOMRT_DTYPE_I16 &&
                  static_cast<int>(loomrt::DType::I8) == LOOMRT_DTYPE_I8 &&
                  static_cast<int>(loomrt::DType::U8) == LOOMRT_DTYPE_U8 &&
                  static_cast<int>(loomrt::DType::Bool) == LOOMRT_DTYPE_BOOL,
              "DType and loomrt_dtype differ");

namespace loomrt::capi {

namespace {
thread_local std::string lastError;
} // namespace

loomrt_status setError(loomrt_status status, const char *message) noexcept {
  try {
    lastError = message;
  } catch (...) {
    lastError.clear();
    return LOOMRT_ERROR_OUT_OF_MEMORY;
  }
  return status;
}

loomrt_status setError(loomrt_status status,
                       const std::string &message) noexcept {
  return setError(status, message.c_str());
}

loomrt_status clearError() noexcept {
  lastError.clear();
  return LOOMRT_OK;
}

const char *lastErrorText() noexcept { return lastError.c_str(); }

} // namespace loomrt::capi

using namespace loomrt::capi;

namespace {

/// The entry `name` of `artifact`, or null after setting the error.
const loomrt::PlanEntry *findEntry(const loomrt_artifact *artifact,
                                   const char *name, loomrt_status &status,
                                   const char *function) noexcept {
  if (!artifact || !artifact->artifact || !name) {
    status = setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string(function) + ": null argument");
    return nullptr;
  }
  const loomrt::PlanEntry *entry = artifact->artifact->entry(name);
  if (!entry)
    status = setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string(function) + ": no entry '" + name + "'");
  return entry;
}

void describe(const loomrt::Binding &b, loomrt_tensor *info) {
  info->name = b.name.c_str();
  info->dtype = static_cast<loomrt_dtype>(b.dtype);
  info->rank = b.shape.size();
  info->shape = b.shape.data();
  info->data = nullptr;
  info->nbytes = static_cast<size_t>(b.bytes);
}

/// Binding `index` of `entry`'s inputs or outputs, or null after setting
/// the error (`status`). `out` is the caller's result pointer, checked too.
const loomrt::Binding *findBinding(const loomrt_artifact *artifact,
                                   const char *entry, size_t index,
                                   const void *out, bool output,
                                   loomrt_status &status,
                                   const char *function) noexcept {
  const loomrt::PlanEntry *e = findEntry(artifact, entry, status, function);
  if (!e)
    return nullptr;
  const auto &list = output ? e->outputs : e->inputs;
  if (!out || index >= list.size()) {
    status = setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string(function) + ": index " +
                          std::to_string(index) + " out of range (entry '" +
                          entry + "' has " + std::to_string(list.size()) + ")");
    return nullptr;
  }
  return &list[index];
}

loomrt_status bindingInfo(const loomrt_artifact *artifact, const char *entry,
                          size_t index, loomrt_tensor *info, bool output,
                          const char *function) noexcept {
  loomrt_status status = LOOMRT_OK;
  const loomrt::Binding *b =
      findBinding(artifact, entry, index, info, output, status, function);
  if (!b)
    return status;
  describe(*b, info);
  return clearError();
}

loomrt_status bindingKind(const loomrt_artifact *artifact, const char *entry,
                          size_t index, loomrt_binding_kind *kind, bool output,
                          const char *function) noexcept {
  loomrt_status status = LOOMRT_OK;
  const loomrt::Binding *b =
      findBinding(artifact, entry, index, kind, output, status, function);
  if (!b)
    return status;
  *kind = static_cast<loomrt_binding_kind>(b->kind);
  return clearError();
}

} // namespace

extern "C" {

const char *loomrt_version(void) { return LOOMRT_VERSION_STRING; }

const char *loomrt_status_string(loomrt_status status) {
  switch (status) {
  case LOOMRT_OK:
    return "LOOMRT_OK";
  case LOOMRT_ERROR_INVALID_ARGUMENT:
    return "LOOMRT_ERROR_INVALID_ARGUMENT";
  case LOOMRT_ERROR_IO:
    return "LOOMRT_ERROR_IO";
  case LOOMRT_ERROR_FORMAT:
    return "LOOMRT_ERROR_FORMAT";
  case LOOMRT_ERROR_UNSUPPORTED:
    return "LOOMRT_ERROR_UNSUPPORTED";
  case LOOMRT_ERROR_NO_DEVICE:
    return "LOOMRT_ERROR_NO_DEVICE";
  case LOOMRT_ERROR_OUT_OF_MEMORY:
    return "LOOMRT_ERROR_OUT_OF_MEMORY";
  case LOOMRT_ERROR_NON_FINITE:
    return "LOOMRT_ERROR_NON_FINITE";
  case LOOMRT_ERROR_CANCELLED:
    return "LOOMRT_ERROR_CANCELLED";
  }
  return "LOOMRT_UNKNOWN_STATUS";
}

const char *loomrt_last_error(void) { return lastErrorText(); }

loomrt_status loomrt_safetensors_inspect(const char *path, char *buf,
                                         size_t buflen) {
  if (!path || !buf || buflen == 0)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_safetensors_inspect: path and buf must be non-null "
                    "and buflen positive");
  buf[0] = '\0';
  try {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    std::unique_ptr<loomrt::SafetensorsFile> file =
        loomrt::SafetensorsFile::open(path, &error, &code);
    if (!file)
      return setError(static_cast<loomrt_status>(code), error);
    std::string summary = loomrt::formatSafetensorsSummary(*file);
    size_t copied = std::min(summary.size(), buflen - 1);
    std::memcpy(buf, summary.data(), copied);
    buf[copied] = '\0';
    if (copied < summary.size())
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string(path) + ": summary needs " +
                          std::to_string(summary.size() + 1) +
                          " bytes, buffer has " + std::to_string(buflen));
    return clearError();
  } catch (...) {
    // Only allocation can throw above.
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_safetensors_inspect: out of memory");
  }
}

loomrt_status loomrt_artifact_load(const char *dir, loomrt_artifact **out) {
  if (!dir || !out)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_load: null argument");
  *out = nullptr;
  try {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    std::unique_ptr<loomrt::Artifact> artifact =
        loomrt::Artifact::load(dir, &error, &code);
    if (!artifact)
      return setError(static_cast<loomrt_status>(code), error);
    *out = new loomrt_artifact{std::move(artifact)};
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_artifact_load: out of memory");
  }
}

void loomrt_artifact_free(loomrt_artifact *artifact) { delete artifact; }

loomrt_status loomrt_artifact_num_entries(const loomrt_artifact *artifact,
                                          size_t *count) {
  if (!artifact || !count)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_num_entries: null argument");
  *count = artifact->artifact->plan().entries.size();
  return clearError();
}

loomrt_status loomrt_artifact_entry_name(const loomrt_artifact *artifact,
                                         size_t index, const char **name) {
  if (!artifact || !name)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_entry_name: null argument");
  const auto &entries = artifact->artifact->plan().entries;
  if (index >= entries.size())
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_entry_name: index out of range");
  *name = entries[index].name.c_str();
  return clearError();
}

loomrt_status loomrt_artifact_num_inputs(const loomrt_artifact *artifact,
                                         const char *entry, size_t *count) {
  loomrt_status status = LOOMRT_OK;
  const loomrt::PlanEntry *e =
      findEntry(artifact, entry, status, "loomrt_artifact_num_inputs");
  if (!e)
    return status;
  if (!count)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_num_inputs: null count");
  *count = e->inputs.size();
  return clearError();
}

loomrt_status loomrt_artifact_num_outputs(const loomrt_artifact *artifact,
                                          const char *entry, size_t *count) {
  loomrt_status status = LOOMRT_OK;
  const loomrt::PlanEntry *e =
      findEntry(artifact, entry, status, "loomrt_artifact_num_outputs");
  if (!e)
    return status;
  if (!count)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_num_outputs: null count");
  *count = e->outputs.size();
  return clearError();
}

loomrt_status loomrt_artifact_input_info(const loomrt_artifact *artifact,
                                         const char *entry, size_t index,
                                         loomrt_tensor *info) {
  return bindingInfo(artifact, entry, index, info, false,
                     "loomrt_artifact_input_info");
}

loomrt_status loomrt_artifact_output_info(const loomrt_artifact *artifact,
                                          const char *entry, size_t index,
                                          loomrt_tensor *info) {
  return bindingInfo(artifact, entry, index, info, true,
                     "loomrt_artifact_output_info");
}

loomrt_status loomrt_artifact_input_kind(const loomrt_artifact *artifact,
                                         const char *entry, size_t index,
                                         loomrt_binding_kind *kind) {
  return bindingKind(artifact, entry, index, kind, false,
                     "loomrt_artifact_input_kind");
}

loomrt_status loomrt_artifact_output_kind(const loomrt_artifact *artifact,
                                          const char *entry, size_t index,
                                          loomrt_binding_kind *kind) {
  return bindingKind(artifact, entry, index, kind, true,
                     "loomrt_artifact_output_kind");
}

loomrt_status loomrt_artifact_initial_value(const loomrt_artifact *artifact,
                                            const char *name,
                                            loomrt_tensor *out) {
  if (!artifact || !name || !out)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_initial_value: null argument");
  try {
    const auto &state = artifact->artifact->initialState();
    auto it = state.find(name);
    if (it == state.end())
      return setError(
          LOOMRT_ERROR_INVALID_ARGUMENT,
          std::string("loomrt_artifact_initial_value: no tensor '") + name +
              "' in the params file");
    describeTensor(it->first, it->second, out);
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_artifact_initial_value: out of memory");
  }
}

loomrt_status loomrt_artifact_run(loomrt_artifact *artifact, const char *entry,
                                  const loomrt_tensor *inputs,
                                  size_t num_inputs, loomrt_tensor *outputs,
                                  size_t num_outputs) {
  loomrt_status status = LOOMRT_OK;
  const loomrt::PlanEntry *e =
      findEntry(artifact, entry, status, "loomrt_artifact_run");
  if (!e)
    return status;
  if ((num_inputs && !inputs) || (num_outputs && !outputs))
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_artifact_run: null inputs or outputs");
  try {
    if (num_outputs != e->outputs.size())
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string("loomrt_artifact_run: entry '") + entry +
                          "' has " + std::to_string(e->outputs.size()) +
                          " outputs, num_outputs is " +
                          std::to_string(num_outputs));
    for (size_t i = 0; i < num_outputs; ++i)
      if (outputs[i].nbytes < e->outputs[i].bytes ||
          (!outputs[i].data && e->outputs[i].bytes))
        return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                        std::string("loomrt_artifact_run: output ") +
                            std::to_string(i) + " ('" + e->outputs[i].name +
                            "') needs " + std::to_string(e->outputs[i].bytes) +
                            " bytes, the buffer has " +
                            std::to_string(outputs[i].nbytes));
    std::vector<loomrt::TensorRef> refs(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) {
      if (!inputs[i].name)
        return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                        "loomrt_artifact_run: input " + std::to_string(i) +
                            " has no name");
      refs[i].name = inputs[i].name;
      refs[i].dtype = static_cast<loomrt::DType>(inputs[i].dtype);
      refs[i].shape = inputs[i].shape;
      refs[i].rank = inputs[i].rank;
      refs[i].data = inputs[i].data;
      refs[i].nbytes = inputs[i].nbytes;
    }
    std::vector<loomrt::NpyArray> results;
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    if (!artifact->artifact->run(entry, refs, &results, &error, &code))
      return setError(static_cast<loomrt_status>(code), error);
    for (size_t i = 0; i < num_outputs; ++i) {
      void *data = outputs[i].data;
      describe(e->outputs[i], &outputs[i]);
      outputs[i].data = data;
      if (!results[i].data.empty())
        std::memcpy(data, results[i].data.data(), results[i].data.size());
    }
    return clearError();
  } catch (...) {
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_artifact_run: out of memory");
  }
}

} // extern "C"
