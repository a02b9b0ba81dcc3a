//===- Runtime.cpp - Artifacts and training through the C API -------------===//
//
// loom.Artifact's native half: thin classes over the runtime's C API
// (loomrt/loomrt.h), so that Python drives the same calls any other
// embedder would. Inputs are passed to the runtime without a copy when
// they are C-contiguous with the entry's dtype (the Python side makes them
// so), outputs are written straight into new numpy arrays, training data is
// borrowed (the arrays are kept alive here), and the GIL is released while
// the runtime works. The metrics callback takes the GIL back only when
// there is Python to call, or every 0.1 s to let Ctrl-C through.
//
// ONNX export is the runtime tool library's (loomrt/OnnxExport.h): the C API
// has no call for it, since libloomrt itself does not link protobuf.
//
//===----------------------------------------------------------------------===//

#include "Module.h"

#include "loomrt/OnnxExport.h"
#include "loomrt/loomrt.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

/// Raises loom.RunError(message, status) for a failed C API call.
[[noreturn]] void raiseRunError(loomrt_status status,
                                const std::string &message) {
  py::object cls = py::module_::import("loom._errors").attr("RunError");
  py::object error = cls(message, loomrt_status_string(status));
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

/// Raises for `status` unless it is LOOMRT_OK; the message is the
/// thread's last error (read before anything else can change it).
void check(loomrt_status status) {
  if (status != LOOMRT_OK)
    raiseRunError(status, loomrt_last_error());
}

/// The numpy dtype names of loomrt_dtype, in enum order. bf16 has no numpy
/// type: it travels as 2-byte void ("V2", what ml_dtypes' bfloat16 views).
const char *const kDtypeNames[] = {"float64", "float32", "float16", "V2",
                                   "int64",   "int32",   "int16",   "int8",
                                   "uint8",   "bool"};
const char *const kDtypeShortNames[] = {"f64", "f32", "f16", "bf16", "i64",
                                        "i32", "i16", "i8",  "u8",   "bool"};
// Element sizes, kept here rather than asked of numpy: pybind11 2.10 reads
// them from numpy's dtype struct, whose layout numpy 2 changed.
const size_t kDtypeSizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
const char *const kKindNames[] = {"param",  "state", "input",
                                  "output", "grad",  "buffer"};

py::dtype numpyDtype(loomrt_dtype d) { return py::dtype(kDtypeNames[d]); }

/// A new C-contiguous array of `dtype` and `shape` (strides computed here,
/// see kDtypeSizes).
py::array newArray(loomrt_dtype dtype, const int64_t *dims, size_t rank) {
  std::vector<py::ssize_t> shape(dims, dims + rank), strides(rank);
  py::ssize_t stride = static_cast<py::ssize_t>(kDtypeSizes[dtype]);
  for (size_t i = rank; i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return py::array(numpyDtype(dtype), shape, strides);
}

/// loomrt_dtype of a numpy dtype, or -1.
int loomrtDtype(const py::dtype &dtype) {
  for (int d = 0; d <= LOOMRT_DTYPE_BOOL; ++d)
    if (dtype.is(py::dtype(kDtypeNames[d])) ||
        dtype.equal(py::dtype(kDtypeNames[d])))
      return d;
  return -1;
}

std::vector<int64_t> shapeOf(const py::array &a) {
  std::vector<int64_t> shape(a.ndim());
  for (py::ssize_t i = 0; i < a.ndim(); ++i)
    shape[i] = a.shape(i);
  return shape;
}

py::dict describe(const loomrt_tensor &t, int kind) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = kDtypeShortNames[t.dtype];
  py::tuple shape(t.rank);
  for (size_t i = 0; i < t.rank; ++i)
    shape[i] = t.shape[i];
  d["shape"] = shape;
  d["kind"] = kind >= 0 ? kKindNames[kind] : "";
  d["nbytes"] = t.nbytes;
  return d;
}

/// A C tensor viewing a C-contiguous numpy array (which must outlive it).
loomrt_tensor viewOf(const char *name, const py::array &a,
                     std::vector<int64_t> &shape) {
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string("array '") + name +
                          "' is not C-contiguous");
  int d = loomrtDtype(a.dtype());
  if (d < 0)
    throw py::type_error(std::string("array '") + name + "' has dtype " +
                         py::str(a.dtype()).cast<std::string>() +
                         ", which Loom does not handle");
  shape = shapeOf(a);
  size_t nbytes = kDtypeSizes[d];
  for (int64_t dim : shape)
    nbytes *= static_cast<size_t>(dim);
  return loomrt_tensor{name,         static_cast<loomrt_dtype>(d), shape.size(),
                       shape.data(), const_cast<void *>(a.data()), nbytes};
}

class NativeArtifact {
public:
  explicit NativeArtifact(const std::string &dir) {
    loomrt_status s;
    {
      py::gil_scoped_release release;
      s = loomrt_artifact_load(dir.c_str(), &handle);
    }
    check(s);
  }
  ~NativeArtifact() { loomrt_artifact_free(handle); }
  NativeArtifact(const NativeArtifact &) = delete;
  NativeArtifact &operator=(const NativeArtifact &) = delete;

  loomrt_artifact *get() { return handle; }

  std::vector<std::string> entries() const {
    size_t n = 0;
    check(loomrt_artifact_num_entries(handle, &n));
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) {
      const char *name = nullptr;
      check(loomrt_artifact_entry_name(handle, i, &name));
      names.push_back(name);
    }
    return names;
  }

  py::list bindings(const std::string &entry, bool outputs) const {
    size_t n = 0;
    check(outputs ? loomrt_artifact_num_outputs(handle, entry.c_str(), &n)
                  : loomrt_artifact_num_inputs(handle, entry.c_str(), &n));
    py::list result;
    for (size_t i = 0; i < n; ++i) {
      loomrt_tensor info;
      loomrt_binding_kind kind;
      check(outputs
                ? loomrt_artifact_output_info(handle, entry.c_str(), i, &info)
                : loomrt_artifact_input_info(handle, entry.c_str(), i, &info));
      check(outputs
                ? loomrt_artifact_output_kind(handle, entry.c_str(), i, &kind)
                : loomrt_artifact_input_kind(handle, entry.c_str(), i, &kind));
      result.append(describe(info, kind));
    }
    return result;
  }

  /// Runs `entry` on `inputs` (name -> C-contiguous array of the entry's
  /// dtype); returns the outputs in plan order.
  py::list run(const std::string &entry, const py::dict &inputs) {
    std::vector<std::string> names;
    std::vector<py::array> arrays;
    for (auto item : inputs) {
      names.push_back(py::str(item.first));
      arrays.push_back(py::reinterpret_borrow<py::array>(item.second));
    }
    std::vector<std::vector<int64_t>> shapes(arrays.size());
    std::vector<loomrt_tensor> in(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i)
      in[i] = viewOf(names[i].c_str(), arrays[i], shapes[i]);

    size_t n = 0;
    check(loomrt_artifact_num_outputs(handle, entry.c_str(), &n));
    std::vector<py::array> results;
    std::vector<loomrt_tensor> out(n);
    for (size_t i = 0; i < n; ++i) {
      loomrt_tensor info;
      check(loomrt_artifact_output_info(handle, entry.c_str(), i, &info));
      results.push_back(newArray(info.dtype, info.shape, info.rank));
      out[i].data = results.back().mutable_data();
      out[i].nbytes = info.nbytes;
    }
    loomrt_status s;
    {
      py::gil_scoped_release release;
      s = loomrt_artifact_run(handle, entry.c_str(), in.data(), in.size(),
                              out.data(), out.size());
    }
    check(s);
    py::list list;
    for (py::array &a : results)
      list.append(a);
    return list;
  }

private:
  loomrt_artifact *handle = nullptr;
};

/// What the metrics callback needs while the GIL is released.
struct CallbackState {
  py::object callback; ///< None: only collect the lines
  std::vector<std::string> lines;
  /// A Python exception from the callback (or Ctrl-C), raised after the run.
  std::optional<py::error_already_set> error;
  std::chrono::steady_clock::time_point lastCheck;

  static int call(void *user, const char *json) {
    auto *self = static_cast<CallbackState *>(user);
    self->lines.push_back(json);
    auto now = std::chrono::steady_clock::now();
    bool haveCallback = !self->callback.is_none();
    if (!haveCallback && now - self->lastCheck < std::chrono::milliseconds(100))
      return 0;
    self->lastCheck = now;
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0)
        throw py::error_already_set();
      if (haveCallback) {
        py::object stop = self->callback(py::str(json));
        if (stop.is(py::bool_(false)))
          return 1;
      }
    } catch (py::error_already_set &e) {
      self->error.emplace(std::move(e));
      return 1;
    }
    return 0;
  }
};

class NativeTrainer {
public:
  explicit NativeTrainer(std::shared_ptr<NativeArtifact> artifact)
      : artifact(std::move(artifact)) {
    check(loomrt_train_create(this->artifact->get(), &handle));
  }
  ~NativeTrainer() { loomrt_train_free(handle); }
  NativeTrainer(const NativeTrainer &) = delete;
  NativeTrainer &operator=(const NativeTrainer &) = delete;

  void setOption(const std::string &key, const std::string &value) {
    check(loomrt_train_set_option(handle, key.c_str(), value.c_str()));
  }

  void addArray(bool eval, const std::string &name, const py::array &array) {
    // Kept alive (and its name's storage) for as long as the runtime may
    // read it: until clearData().
    keptNames.push_back(std::make_unique<std::string>(name));
    kept.push_back(array);
    std::vector<int64_t> shape;
    loomrt_tensor t = viewOf(keptNames.back()->c_str(), array, shape);
    check(loomrt_train_add_array(handle, eval ? 1 : 0, &t));
  }

  void clearData() {
    check(loomrt_train_clear_data(handle));
    kept.clear();
    keptNames.clear();
  }

  /// Trains; returns (metrics lines, stopped by the callback).
  py::tuple run(py::object callback) {
    CallbackState state;
    state.callback = std::move(callback);
    state.lastCheck = std::chrono::steady_clock::now();
    check(loomrt_train_set_callback(handle, &CallbackState::call, &state));
    loomrt_status s;
    std::string message;
    {
      py::gil_scoped_release release;
      s = loomrt_train_run(handle);
      message = loomrt_last_error();
    }
    check(loomrt_train_set_callback(handle, nullptr, nullptr));
    state.callback = py::none();
    if (state.error)
      throw std::move(*state.error);
    if (s != LOOMRT_OK && s != LOOMRT_ERROR_CANCELLED)
      raiseRunError(s, message);
    py::list lines;
    for (const std::string &line : state.lines)
      lines.append(py::str(line));
    return py::make_tuple(lines, s == LOOMRT_ERROR_CANCELLED);
  }

  py::dict summary() const {
    loomrt_train_summary s;
    check(loomrt_train_summary_get(handle, &s));
    py::dict d;
    d["start_step"] = s.start_step;
    d["step"] = s.step;
    d["last_loss"] = s.last_loss;
    d["samples_per_second"] = s.samples_per_second;
    d["seconds"] = s.seconds;
    d["skipped_steps"] = s.skipped_steps;
    return d;
  }

  /// The state tensors: a list of (info dict, array copy).
  py::list tensors() const {
    size_t n = 0;
    check(loomrt_train_num_tensors(handle, &n));
    py::list result;
    for (size_t i = 0; i < n; ++i) {
      loomrt_tensor t;
      loomrt_binding_kind kind;
      check(loomrt_train_tensor(handle, i, &t, &kind));
      py::array a = newArray(t.dtype, t.shape, t.rank);
      std::memcpy(a.mutable_data(), t.data, t.nbytes);
      result.append(py::make_tuple(describe(t, kind), a));
    }
    return result;
  }

  void setTensor(const std::string &name, const py::array &array) {
    std::vector<int64_t> shape;
    loomrt_tensor t = viewOf(name.c_str(), array, shape);
    check(loomrt_train_set_tensor(handle, &t));
  }

  py::tuple evaluate() {
    double loss = 0, accuracy = 0;
    int64_t samples = 0;
    loomrt_status s;
    std::string message;
    {
      py::gil_scoped_release release;
      s = loomrt_train_evaluate(handle, &loss, &accuracy, &samples);
      message = loomrt_last_error();
    }
    if (s != LOOMRT_OK)
      raiseRunError(s, message);
    return py::make_tuple(loss, accuracy, samples);
  }

  void saveCheckpoint(const std::string &path) const {
    check(loomrt_train_save_checkpoint(handle, path.c_str()));
  }
  void loadCheckpoint(const std::string &path) {
    check(loomrt_train_load_checkpoint(handle, path.c_str()));
  }

private:
  std::shared_ptr<NativeArtifact> artifact; // outlives the trainer
  loomrt_trainer *handle = nullptr;
  std::vector<py::array> kept;
  std::vector<std::unique_ptr<std::string>> keptNames;
};

/// Writes `weights` into a copy of the ONNX model `source` at `out`.
std::vector<std::string> exportOnnx(const std::string &source,
                                    const std::string &out,
                                    const py::dict &weights) {
  if (!loomrt::onnxExportSupported())
    raiseRunError(LOOMRT_ERROR_UNSUPPORTED,
                  "this build of Loom cannot write ONNX files");
  std::map<std::string, loomrt::NpyArray> tensors;
  for (auto item : weights) {
    std::string name = py::str(item.first);
    auto array = py::reinterpret_borrow<py::array>(item.second);
    std::vector<int64_t> shape;
    loomrt_tensor t = viewOf(name.c_str(), array, shape);
    loomrt::NpyArray &a = tensors[name];
    a.dtype = static_cast<loomrt::DType>(t.dtype);
    a.shape = shape;
    const auto *bytes = static_cast<const uint8_t *>(t.data);
    a.data.assign(bytes, bytes + t.nbytes);
  }
  std::vector<std::string> replaced;
  std::string error;
  bool ok;
  {
    py::gil_scoped_release release;
    ok = loomrt::exportOnnx(source, out, tensors, &replaced, &error);
  }
  if (!ok)
    raiseRunError(LOOMRT_ERROR_IO, error);
  return replaced;
}

} // namespace

void loom::python::registerRuntime(py::module_ &m) {
  m.def("runtime_version", [] { return std::string(loomrt_version()); });
  py::class_<NativeArtifact, std::shared_ptr<NativeArtifact>>(m,
                                                              "NativeArtifact")
      .def(py::init<const std::string &>(), py::arg("directory"))
      .def("entries", &NativeArtifact::entries)
      .def(
          "inputs",
          [](const NativeArtifact &a, const std::string &entry) {
            return a.bindings(entry, false);
          },
          py::arg("entry"))
      .def(
          "outputs",
          [](const NativeArtifact &a, const std::string &entry) {
            return a.bindings(entry, true);
          },
          py::arg("entry"))
      .def("run", &NativeArtifact::run, py::arg("entry"), py::arg("inputs"));
  py::class_<NativeTrainer>(m, "NativeTrainer")
      .def(py::init<std::shared_ptr<NativeArtifact>>(), py::arg("artifact"))
      .def("set_option", &NativeTrainer::setOption)
      .def("add_array", &NativeTrainer::addArray, py::arg("eval"),
           py::arg("name"), py::arg("array"))
      .def("clear_data", &NativeTrainer::clearData)
      .def("run", &NativeTrainer::run, py::arg("callback") = py::none())
      .def("summary", &NativeTrainer::summary)
      .def("tensors", &NativeTrainer::tensors)
      .def("set_tensor", &NativeTrainer::setTensor)
      .def("evaluate", &NativeTrainer::evaluate)
      .def("save_checkpoint", &NativeTrainer::saveCheckpoint)
      .def("load_checkpoint", &NativeTrainer::loadCheckpoint);
  m.def("export_onnx", &exportOnnx, py::arg("source"), py::arg("out"),
        py::arg("weights"));
}
