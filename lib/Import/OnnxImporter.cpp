//===- OnnxImporter.cpp - ONNX models to the loom dialect -----------------===//
//
// Reads an ONNX model with libonnx (protobuf parsing, the checker, shape
// inference with data propagation) and emits `func.func @forward` in the loom
// dialect. libonnx and protobuf report failure by throwing, and the rest of
// Loom is built without exceptions, so this file is compiled with exceptions
// on and nothing thrown leaves it: every failure becomes a diagnostic.
//
// Invariants of the output:
//  * arguments are the graph inputs (`loom.input`) then the float
//    initializers (`loom.param`), whose values go to the ParameterStore;
//    integer and boolean initializers are compile-time constants;
//  * shape computations (Shape, Gather on shapes, Concat, ...) are folded at
//    import, so every tensor has a static shape;
//  * every op's location is the ONNX node's name;
//  * the type of every value matches what ONNX shape inference says.
//
// Security: external tensor data is read only from regular files inside the
// model's folder (no absolute paths, no `..`, no symlink leading outside),
// and offsets/lengths are checked against the file size before reading.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

using namespace mlir;
using namespace loom;

namespace loom::onnx_import {

/// Whether a BatchNormalization node trains with batch statistics under
/// `mode`: `training_mode = 1`, or (PyTorch's default exporter writes every
/// BatchNormalization in inference form, even from a module in training
/// mode) a node whose `pkg.torch.onnx.fx_node` metadata shows that the
/// exporter traced PyTorch's training-mode batch norm.
bool batchNormTrains(const onnx::NodeProto &node, BatchNormMode mode) {
  if (mode != BatchNormMode::Auto)
    return mode == BatchNormMode::Batch;
  for (const auto &a : node.attribute())
    if (a.name() == "training_mode" && a.i() != 0)
      return true;
  for (const auto &kv : node.metadata_props())
    if (kv.key() == "pkg.torch.onnx.fx_node") {
      llvm::StringRef fx = kv.value();
      return fx.contains("_native_batch_norm_legit_functional") ||
             fx.contains("_native_batch_norm_legit.default");
    }
  return false;
}

/// The float initializers that are not trainable parameters:
///  - buffers: the running statistics of a BatchNormalization that trains
///    (batchNormTrains), used by nothing else, whose updated-statistics
///    outputs nothing reads; the training step updates them;
///  - frozen (constants): those PyTorch's exporter marks as buffers or
///    constants (`pkg.torch.export.graph_signature.InputSpec.kind` in the
///    value_info) and are not training buffers, and the running statistics
///    of BatchNormalization in inference form.
InitializerRoles classifyInitializers(const onnx::GraphProto &graph,
                                      BatchNormMode mode) {
  InitializerRoles roles;
  for (const auto &vi : graph.value_info())
    for (const auto &kv : vi.metadata_props())
      if (kv.key() == "pkg.torch.export.graph_signature.InputSpec.kind" &&
          (kv.value() == "BUFFER" || kv.value() == "CONSTANT_TENSOR"))
        roles.frozen.insert(vi.name());
  // Names read by any node or returned by the graph.
  llvm::StringSet<> read;
  for (const auto &node : graph.node())
    read.insert(node.input().begin(), node.input().end());
  for (const auto &out : graph.output())
    read.insert(out.name());
  // name -> 1 if used only as the statistics of inference-form batch norms,
  // 2 if only as those of training ones, 0 otherwise.
  llvm::StringMap<int> statsUse;
  for (const auto &node : graph.node()) {
    int role = 0;
    if (node.op_type() == "BatchNormalization") {
      bool trains = batchNormTrains(node, mode);
      bool statsOutputsRead = false;
      for (int i = 1; i < node.output_size(); ++i)
        statsOutputsRead |= !node.output(i).empty() && read.contains(node.output(i));
      role = !trains ? 1 : statsOutputsRead ? 0 : 2;
    }
    for (int i = 0; i < node.input_size(); ++i) {
      int use = (i == 3 || i == 4) ? role : 0;
      auto [it, inserted] = statsUse.try_emplace(node.input(i), use);
      if (!inserted && it->second != use)
        it->second = 0;
    }
  }
  for (const auto &out : graph.output())
    statsUse[out.name()] = 0;
  for (const auto &init : graph.initializer()) {
    auto it = statsUse.find(init.name());
    if (it == statsUse.end())
      continue;
    if (it->second == 2) {
      roles.buffers.insert(init.name());
      roles.frozen.erase(init.name());
    } else if (it->second == 1 && mode != BatchNormMode::Batch) {
      roles.frozen.insert(init.name());
    }
  }
  return roles;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

bool OnnxImporter::loadModel() {
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    emitError(fileLoc) << "cannot read '" << path
                       << "': " << buffer.getError().message();
    return false;
  }
  if ((*buffer)->getBufferSize() > (size_t(2) << 30) - 1) {
    emitError(fileLoc) << "'" << path << "' is larger than 2 GiB: store the "
                       << "weights as external data";
    return false;
  }
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize()))) {
    emitError(fileLoc)
        << "'" << path << "' is not a valid ONNX model: the "
        << "protobuf does not parse (truncated or corrupt file?)";
    return false;
  }
  if (!model.has_graph()) {
    emitError(fileLoc) << "'" << path << "' has no graph: not an ONNX model";
    return false;
  }
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  modelDir = std::string(dir);

  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  if (opset == 0) {
    emitError(fileLoc) << "model imports no version of the default ONNX "
                       << "domain";
    return false;
  }
  // A model from a newer ONNX than the library: its ops may mean something
  // the library's schemas do not say, so it is refused rather than guessed.
  int64_t newestOpset = onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
                            .Map()
                            .at(onnx::ONNX_DOMAIN)
                            .second;
  const int64_t newestIr = static_cast<int64_t>(onnx::Version::IR_VERSION);
  if (opset > newestOpset || model.ir_version() > newestIr) {
    emitError(fileLoc) << "'" << path << "' was written by a newer ONNX than "
                       << "Loom's ONNX library (" << ONNX_LIBRARY_VERSION
                       << ": IR version <= " << newestIr
                       << ", opsets <= " << newestOpset << "); the model has "
                       << "IR version " << model.ir_version() << " and opset "
                       << opset << ". Export it with an older opset (e.g. "
                       << "torch.onnx.export(..., opset_version=" << newestOpset
                       << ")) or build Loom with a newer ONNX";
    return false;
  }
  if (model.graph().node_size() == 0 && model.graph().output_size() == 0) {
    emitError(fileLoc) << "model graph is empty";
    return false;
  }

  if (!checkAllExternalData())
    return false;

  // The checker and shape inference throw on invalid models.
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "ONNX checker rejected the model: " << e.what();
    return false;
  }
  if (opset < 13) {
    // Older opsets differ in attribute-versus-input conventions; ONNX's own
    // converter rewrites them rather than a second set of rules here.
    try {
      model = onnx::version_conversion::ConvertVersion(model, 13);
    } catch (const std::exception &e) {
      emitError(fileLoc) << "model uses ONNX opset " << opset
                         << "; converting it to opset 13 failed: " << e.what();
      return false;
    }
    emitRemark(fileLoc) << "converted the model from ONNX opset " << opset
                        << " to opset 13";
    opset = 13;
  }
  if (!bindInputs() || !checkConstantSizes())
    return false;
  // With data propagation first (shapes computed by Shape/Gather/Concat
  // chains become static); ONNX's propagation also treats some elementwise
  // ops on constants as shape arithmetic and refuses broadcasts they are
  // valid for (transformers' BLOOM: its ALiBi slopes [H, 1, 1] times the
  // positions [S], "Invalid rank for Mul broadcasting"), so on failure the
  // inference runs again without it, from the file's own value_info.
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> fileInfo =
      model.graph().value_info();
  std::string propagationError;
  for (bool dataProp : {true, false}) {
    try {
      onnx::ShapeInferenceOptions options(/*check_type=*/true,
                                          /*strict_mode=*/1, dataProp);
      onnx::shape_inference::InferShapes(
          model, onnx::OpSchemaRegistry::Instance(), options);
      if (!dataProp)
        emitRemark(fileLoc)
            << "ONNX shape inference with data propagation failed ("
            << propagationError << "); the shapes were inferred without it";
      return true;
    } catch (const std::exception &e) {
      if (!dataProp) {
        emitError(fileLoc) << "ONNX shape inference failed: " << e.what();
        return false;
      }
      propagationError = e.what();
      *model.mutable_graph()->mutable_value_info() = fileInfo;
    }
  }
  return false;
}

/// ConstantOfShape and Range make tensors whose size is data: Loom folds
/// them (kMaxFoldElements at most), and ONNX's shape inference with data
/// propagation would materialize them first, one protobuf dimension per
/// value (a [1e9] ConstantOfShape takes tens of GB there). So those whose
/// inputs are constants in the file are checked before shape inference.
bool OnnxImporter::checkConstantSizes() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<const onnx::TensorProto *> constants;
  for (const auto &init : graph.initializer())
    constants[init.name()] = &init;
  for (const auto &node : graph.node())
    if (node.op_type() == "Constant" && node.output_size() == 1)
      for (const auto &a : node.attribute())
        if (a.name() == "value" && a.has_t())
          constants[node.output(0)] = &a.t();
  // The values of a small integer or float constant, or nothing.
  auto valuesOf = [&](const std::string &name) -> std::optional<ConstTensor> {
    auto it = constants.find(name);
    if (it == constants.end())
      return std::nullopt;
    const onnx::TensorProto &t = *it->second;
    int64_t count = 1;
    for (int64_t d : t.dims())
      if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > 64)
        return std::nullopt;
    Type elt = elementType(t.data_type(), UnknownLoc::get(&ctx));
    if (!elt || (!elt.isInteger(64) && !isa<FloatType>(elt)))
      return std::nullopt;
    SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
    DenseElementsAttr attr = tensorToAttr(
        t, RankedTensorType::get(shape, elt), UnknownLoc::get(&ctx));
    if (!attr)
      return std::nullopt;
    return attrToConst(attr);
  };
  bool ok = true;
  int index = 0;
  for (const auto &node : graph.node()) {
    nodeIndex = index++;
    NodeCtx n(node, nodeLoc(node));
    try {
      if (node.op_type() == "ConstantOfShape" && node.input_size() == 1) {
        if (auto shape = valuesOf(node.input(0))) {
          SmallVector<int64_t> dims;
          for (double d : shape->values)
            dims.push_back(static_cast<int64_t>(
                std::clamp(d, -4.0e18, 4.0e18)));
          checkFoldSize(n, dims);
        }
      } else if (node.op_type() == "Range" && node.input_size() == 3) {
        auto start = valuesOf(node.input(0)), limit = valuesOf(node.input(1)),
             delta = valuesOf(node.input(2));
        if (start && limit && delta && start->values.size() == 1 &&
            limit->values.size() == 1 && delta->values.size() == 1)
          checkRangeSize(n, start->values[0], limit->values[0],
                         delta->values[0]);
      }
    } catch (const ImportFailure &) {
      ok = false;
    }
  }
  return ok;
}

bool OnnxImporter::bindInputs() {
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  onnx::GraphProto *graph = model.mutable_graph();
  for (const auto &[name, file] : options.boundInputs) {
    auto it = llvm::find_if(graph->input(), [&, &name = name](const auto &in) {
      return in.name() == name;
    });
    if (it == graph->input().end()) {
      emitError(fileLoc) << "--bind-input: the model has no input '" << name
                         << "'";
      return false;
    }
    auto buffer = llvm::MemoryBuffer::getFile(file, false, false);
    onnx::TensorProto tensor;
    if (!buffer || !tensor.ParseFromArray((*buffer)->getBufferStart(),
                                          (*buffer)->getBufferSize())) {
      emitError(fileLoc) << "--bind-input: cannot read a TensorProto from '"
                         << file << "'";
      return false;
    }
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      emitError(fileLoc) << "--bind-input: '" << file
                         << "' refers to external data";
      return false;
    }
    tensor.set_name(name);
    graph->mutable_input()->erase(it);
    *graph->add_initializer() = tensor;
  }
  return true;
}

bool OnnxImporter::checkExternalData(const onnx::TensorProto &tensor,
                                     Location loc) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
    return true;
  std::string location;
  for (const auto &kv : tensor.external_data())
    if (kv.key() == "location")
      location = kv.value();
  auto refuse = [&](StringRef why) {
    emitError(loc) << "tensor '" << tensor.name()
                   << "': external data location '" << location
                   << "' refused: " << why;
    return false;
  };
  if (location.empty())
    return refuse("no location given");
  if (llvm::sys::path::is_absolute(location) || location[0] == '/' ||
      location[0] == '\\' || location.find(':') != std::string::npos)
    return refuse("absolute paths are not allowed; external data must lie "
                  "in the model's folder");
  for (auto it = llvm::sys::path::begin(location),
            e = llvm::sys::path::end(location);
       it != e; ++it)
    if (*it == "..")
      return refuse("'..' is not allowed; external data must lie in the "
                    "model's folder");
  SmallString<256> full(modelDir);
  llvm::sys::path::append(full, location);
  SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(modelDir, realDir))
    return refuse("cannot resolve the model's folder");
  if (std::error_code ec = llvm::sys::fs::real_path(full, realFile))
    return refuse("file not found (" + ec.message() + ")");
  StringRef fileRef(realFile), dirRef(realDir);
  if (!fileRef.starts_with(dirRef) || fileRef.size() <= dirRef.size() ||
      fileRef[dirRef.size()] != '/')
    return refuse("it resolves (through a symbolic link) to '" +
                  realFile.str().str() + "', outside the model's folder");
  if (!llvm::sys::fs::is_regular_file(realFile))
    return refuse("not a regular file");
  return true;
}

bool OnnxImporter::checkAllExternalData() {
  bool ok = true;
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  for (const auto &init : model.graph().initializer())
    ok &= checkExternalData(init, fileLoc);
  for (const auto &node : model.graph().node())
    for (const auto &attr : node.attribute())
      if (attr.has_t())
        ok &= checkExternalData(attr.t(), fileLoc);
  return ok;
}

bool OnnxImporter::checkSupported() {
  bool ok = true;
  int index = 0;
  for (const auto &node : model.graph().node()) {
    nodeIndex = index++;
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (defaultDomain && onnxHandlers().count(node.op_type()))
      continue;
    std::string domain = defaultDomain ? "ai.onnx" : node.domain();
    int64_t version = opset;
    for (const auto &imp : model.opset_import())
      if (imp.domain() == node.domain())
        version = imp.version();
    emitError(nodeLoc(node))
        << "unsupported ONNX op: node '"
        << (node.name().empty() ? "<unnamed>" : node.name()) << "' is "
        << domain << "." << node.op_type() << " (opset " << version << ")";
    ok = false;
  }
  if (!ok)
    emitRemark(FileLineColLoc::get(&ctx, path, 0, 0))
        << "the model uses ONNX ops that Loom does not map onto the loom "
        << "dialect yet; every one is listed above";
  return ok;
}

//===----------------------------------------------------------------------===//
// Types and tensors
//===----------------------------------------------------------------------===//

Type OnnxImporter::elementType(int32_t t, Location loc) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    break;
  }
  const char *name = onnx::TensorProto::DataType_IsValid(t)
                         ? onnx::TensorProto::DataType_Name(
                               static_cast<onnx::TensorProto::DataType>(t))
                               .c_str()
                         : "unknown";
  emitError(loc) << "unsupported ONNX element type " << name
                 << " (Loom supports float, double, float16, bfloat16, "
                 << "int64, int32, int8, bool)";
  return nullptr;
}

RankedTensorType OnnxImporter::tensorType(const onnx::TypeProto &type,
                                          StringRef what, Location loc) {
  if (!type.has_tensor_type()) {
    emitError(loc) << what << " is not a tensor (sequences, maps and "
                   << "optionals are not supported)";
    return nullptr;
  }
  const auto &tt = type.tensor_type();
  Type elt = elementType(tt.elem_type(), loc);
  if (!elt)
    return nullptr;
  if (!tt.has_shape()) {
    emitError(loc) << what << " has no known shape; Loom needs static shapes";
    return nullptr;
  }
  SmallVector<int64_t> shape;
  for (const auto &dim : tt.shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0) {
      emitError(loc) << what << " has a dynamic dimension"
                     << (dim.has_dim_param() ? " '" + dim.dim_param() + "'"
                                             : std::string())
                     << "; Loom needs static shapes (fix the input shapes, "
                     << "e.g. with onnxruntime's make_dynamic_shape_fixed)";
      return nullptr;
    }
    shape.push_back(dim.dim_value());
  }
  return RankedTensorType::get(shape, elt);
}

/// Size in bytes of one element as ONNX raw_data stores it.
static size_t rawElementSize(Type elt) {
  if (elt.isInteger(1))
    return 1;
  return (elt.getIntOrFloatBitWidth() + 7) / 8;
}

bool OnnxImporter::readTensorBytes(const onnx::TensorProto &t, Location loc,
                                   std::vector<uint8_t> &bytes) {
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  Type elt = elementType(t.data_type(), loc);
  if (!elt)
    return false;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) {
      emitError(loc) << "tensor '" << t.name() << "' has an invalid shape";
      return false;
    }
    n *= d;
  }
  size_t eltSize = rawElementSize(elt);
  size_t expected = static_cast<size_t>(n) * eltSize;
  auto wrongSize = [&](size_t got) {
    emitError(loc) << "tensor '" << t.name() << "' holds " << got
                   << " bytes but its shape " << formatShape(shape) << " needs "
                   << expected;
    return false;
  };

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &kv : t.external_data()) {
      char *end = nullptr;
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::strtoll(kv.value().c_str(), &end, 10);
      else if (kv.key() == "length")
        length = std::strtoll(kv.value().c_str(), &end, 10);
    }
    // checkExternalData() has vetted `location` already.
    SmallString<256> full(modelDir);
    llvm::sys::path::append(full, location);
    auto buffer = llvm::MemoryBuffer::getFile(full, false, false);
    if (!buffer) {
      emitError(loc) << "tensor '" << t.name() << "': cannot read external "
                     << "data '" << location
                     << "': " << buffer.getError().message();
      return false;
    }
    size_t fileSize = (*buffer)->getBufferSize();
    if (length < 0)
      length = static_cast<int64_t>(fileSize) - offset;
    if (offset < 0 || length < 0 ||
        static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) >
            fileSize) {
      emitError(loc) << "tensor '" << t.name() << "': external data range ["
                     << offset << ", " << offset + length << ") exceeds '"
                     << location << "' (" << fileSize << " bytes)";
      return false;
    }
    if (static_cast<size_t>(length) != expected)
      return wrongSize(length);
    const char *start = (*buffer)->getBufferStart() + offset;
    bytes.assign(start, start + length);
    return true;
  }

  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected)
      return wrongSize(t.raw_data().size());
    bytes.assign(t.raw_data().begin(), t.raw_data().end());
    return true;
  }

  bytes.resize(expected);
  auto fill = [&](auto const &field, auto convert) {
    if (static_cast<int64_t>(field.size()) != n)
      return wrongSize(field.size() * eltSize);
    for (int64_t i = 0; i < n; ++i)
      convert(field.Get(static_cast<int>(i)), bytes.data() + i * eltSize);
    return true;
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return fill(t.float_data(),
                [](float v, uint8_t *p) { std::memcpy(p, &v, 4); });
  case onnx::TensorProto::DOUBLE:
    return fill(t.double_data(),
                [](double v, uint8_t *p) { std::memcpy(p, &v, 8); });
  case onnx::TensorProto::INT64:
    return fill(t.int64_data(),
                [](int64_t v, uint8_t *p) { std::memcpy(p, &v, 8); });
  case onnx::TensorProto::INT32:
    return fill(t.int32_data(),
                [](int32_t v, uint8_t *p) { std::memcpy(p, &v, 4); });
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit floats are stored as their bit patterns in int32_data.
    return fill(t.int32_data(), [](int32_t v, uint8_t *p) {
      uint16_t bits = static_cast<uint16_t>(v);
      std::memcpy(p, &bits, 2);
    });
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    return fill(t.int32_data(),
                [](int32_t v, uint8_t *p) { *p = static_cast<uint8_t>(v); });
  default:
    emitError(loc) << "tensor '" << t.name() << "' has unsupported storage";
    return false;
  }
}

DenseElementsAttr OnnxImporter::tensorToAttr(const onnx::TensorProto &t,
                                             RankedTensorType type,
                                             Location loc) {
  std::vector<uint8_t> bytes;
  if (!readTensorBytes(t, loc, bytes))
    return nullptr;
  Type elt = type.getElementType();
  int64_t n = type.getNumElements();
  if (elt.isInteger(1)) {
    SmallVector<bool> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = bytes[i] != 0;
    return DenseElementsAttr::get(type, ArrayRef<bool>(v));
  }
  // Raw little-endian bytes are exactly DenseElementsAttr's storage.
  ArrayRef<char> raw(reinterpret_cast<const char *>(bytes.data()),
                     bytes.size());
  if (n == 1 || bytes.empty()) {
    // A one-element buffer would be read as a splat, which is what we want;
    // an empty tensor has no data at all.
    if (bytes.empty())
      return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  }
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

//===----------------------------------------------------------------------===//
// Values and constants
//===----------------------------------------------------------------------===//

ConstTensor attrToConst(DenseElementsAttr attr) {
  ConstTensor c;
  auto type = cast<RankedTensorType>(attr.getType());
  c.shape.assign(type.getShape().begin(), type.getShape().end());
  c.elementType = type.getElementType();
  if (isa<FloatType>(c.elementType)) {
    for (APFloat v : attr.getValues<APFloat>())
      c.values.push_back(v.convertToDouble());
  } else if (c.elementType.isInteger(1)) {
    for (bool v : attr.getValues<bool>())
      c.values.push_back(v ? 1.0 : 0.0);
  } else {
    for (APInt v : attr.getValues<APInt>())
      c.values.push_back(static_cast<double>(v.getSExtValue()));
  }
  return c;
}

/// `v` as an int64, saturated (ONNX writes INT64_MAX for "to the end", which
/// a double rounds to 2^63); NaN gives 0.
static int64_t saturatingInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775807.0)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

DenseElementsAttr constToAttr(const ConstTensor &c) {
  auto type = RankedTensorType::get(c.shape, c.elementType);
  SmallVector<Attribute> attrs;
  for (double v : c.values) {
    if (auto ft = dyn_cast<FloatType>(c.elementType))
      attrs.push_back(FloatAttr::get(ft, v));
    else if (c.elementType.isInteger(1))
      attrs.push_back(BoolAttr::get(c.elementType.getContext(), v != 0));
    else
      attrs.push_back(IntegerAttr::get(c.elementType, saturatingInt64(v)));
  }
  return DenseElementsAttr::get(type, attrs);
}

Value OnnxImporter::materialize(const ConstTensor &c, Location loc) {
  return ConstantOp::create(b, loc, constToAttr(c));
}

Value OnnxImporter::get(StringRef name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto cit = consts.find(name);
  if (cit != consts.end()) {
    Value v = materialize(cit->second, b.getUnknownLoc());
    values[name] = v;
    return v;
  }
  return nullptr;
}

void OnnxImporter::define(StringRef name, Value value) {
  if (!name.empty())
    values[name] = value;
}

std::optional<ConstTensor> OnnxImporter::getConst(StringRef name) {
  auto it = consts.find(name);
  if (it == consts.end())
    return std::nullopt;
  return it->second;
}

void OnnxImporter::defineConst(StringRef name, ConstTensor c) {
  if (!name.empty())
    consts[name] = std::move(c);
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> OnnxImporter::run() {
  ctx.loadDialect<LoomDialect, func::FuncDialect>();
  if (!loadModel() || !checkSupported())
    return nullptr;
  const onnx::GraphProto &graph = model.graph();
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);

  for (const auto &vi : graph.value_info()) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      continue;
    bool isStatic = true;
    for (const auto &d : vi.type().tensor_type().shape().dim())
      isStatic &= d.has_dim_value();
    if (!isStatic)
      continue;
    ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
    if (auto t = tensorType(vi.type(), vi.name(), fileLoc))
      inferred[vi.name()] = t;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(b, fileLoc, "forward", b.getFunctionType({}, {}));
  entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  llvm::StringSet<> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  InitializerRoles roles = classifyInitializers(graph, options.batchNorm);
  buffers = roles.buffers;

  bool ok = true;
  auto addArg = [&](Type type, StringRef attrName, StringRef name) {
    argTypes.push_back(type);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(attrName, b.getStringAttr(name))));
    return entry->addArgument(type, NameLoc::get(b.getStringAttr(name)));
  };

  for (const auto &input : graph.input()) {
    if (initNames.contains(input.name()))
      continue;
    RankedTensorType type =
        tensorType(input.type(), "model input '" + input.name() + "'", fileLoc);
    if (!type) {
      ok = false;
      continue;
    }
    define(input.name(), addArg(type, kInputAttr, input.name()));
  }
  for (const auto &init : graph.initializer()) {
    Location loc = NameLoc::get(b.getStringAttr(init.name()), fileLoc);
    Type elt = elementType(init.data_type(), loc);
    if (!elt) {
      ok = false;
      continue;
    }
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; })) {
      emitError(loc) << "initializer '" << init.name()
                     << "' has a negative dimension";
      ok = false;
      continue;
    }
    auto type = RankedTensorType::get(shape, elt);
    // Float tensors are trainable parameters; scalars are not (they are the
    // ratios, bounds and scales that ops read as attributes), nor are the
    // frozen ones and buffers of classifyInitializers().
    bool bound = llvm::any_of(options.boundInputs, [&](const auto &kv) {
      return kv.first == init.name();
    });
    bool buffer = roles.buffers.contains(init.name());
    if (isa<FloatType>(elt) && !shape.empty() && !bound &&
        (buffer || !roles.frozen.contains(init.name()))) {
      // A parameter or buffer: an argument, its value beside the IR.
      std::vector<uint8_t> bytes;
      if (!readTensorBytes(init, loc, bytes)) {
        ok = false;
        continue;
      }
      params.add(ParameterTensor{init.name(), type, std::move(bytes)});
      define(init.name(),
             addArg(type, buffer ? kBufferAttr : kParamAttr, init.name()));
    } else {
      DenseElementsAttr attr = tensorToAttr(init, type, loc);
      if (!attr) {
        ok = false;
        continue;
      }
      defineConst(init.name(), attrToConst(attr));
    }
  }
  if (!ok)
    return nullptr;

  nodeIndex = 0;
  for (const auto &node : graph.node()) {
    try {
      convertNode(node);
    } catch (const ImportFailure &) {
      ok = false;
      failedValues.insert(node.output().begin(), node.output().end());
    } catch (const std::exception &e) {
      emitError(nodeLoc(node)) << "internal error importing node: " << e.what();
      ok = false;
      failedValues.insert(node.output().begin(), node.output().end());
    }
    ++nodeIndex;
  }
  if (!ok)
    return nullptr;
  warnInferenceDropouts();
  warnMergedNormParameters(graph);
  warnFoldedBatchNorms(graph, *module);

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resAttrs;
  for (const auto &output : graph.output()) {
    Value v = get(output.name());
    if (!v && sequences.count(output.name())) {
      emitError(fileLoc) << "model output '" << output.name()
                         << "' is not a tensor (sequences, maps and optionals "
                         << "are not supported as model outputs)";
      return nullptr;
    }
    if (!v) {
      emitError(fileLoc) << "model output '" << output.name()
                         << "' is not produced by any node";
      return nullptr;
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
    resAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kOutputAttr, b.getStringAttr(output.name()))));
  }
  func::ReturnOp::create(b, fileLoc, results);
  // Constants materialized for inputs that were then folded are dead.
  SmallVector<Operation *> dead;
  func.walk([&](ConstantOp c) {
    if (c->use_empty())
      dead.push_back(c);
  });
  for (Operation *op : dead)
    op->erase();
  func.setType(b.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resAttrs);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

/// The value of a Constant node (tensor, float(s) or int(s) attribute).
ConstTensor OnnxImporter::convertConstant(const NodeCtx &n) {
  Location loc = n.loc;
  ConstTensor c;
  if (auto *a = n.attr("value")) {
    SmallVector<int64_t> shape(a->t().dims().begin(), a->t().dims().end());
    Type elt = elementType(a->t().data_type(), loc);
    if (!elt)
      throw ImportFailure{};
    DenseElementsAttr attr =
        tensorToAttr(a->t(), RankedTensorType::get(shape, elt), loc);
    if (!attr)
      throw ImportFailure{};
    c = attrToConst(attr);
  } else if (auto *a = n.attr("value_float")) {
    c = ConstTensor{{}, b.getF32Type(), {a->f()}};
  } else if (auto *a = n.attr("value_floats")) {
    c = ConstTensor{
        {a->floats_size()},
        b.getF32Type(),
        std::vector<double>(a->floats().begin(), a->floats().end())};
  } else if (auto *a = n.attr("value_int")) {
    c = ConstTensor{{}, b.getI64Type(), {static_cast<double>(a->i())}};
  } else if (auto *a = n.attr("value_ints")) {
    c = ConstTensor{{a->ints_size()}, b.getI64Type(), {}};
    for (int64_t v : a->ints())
      c.values.push_back(static_cast<double>(v));
  } else {
    n.fail("only tensor, float(s) and int(s) constants are supported");
  }
  return c;
}

} // namespace loom::onnx_import

std::vector<StringRef> loom::supportedOnnxOps() {
  std::vector<StringRef> ops;
  for (const auto &entry : onnx_import::onnxHandlers())
    ops.push_back(entry.getKey());
  llvm::sort(ops);
  return ops;
}

OwningOpRef<ModuleOp> loom::importOnnxModel(StringRef path, MLIRContext &ctx,
                                            ParameterStore &params,
                                            const OnnxImportOptions &options) {
  try {
    onnx_import::OnnxImporter importer(path, ctx, params, options);
    return importer.run();
  } catch (const std::exception &e) {
    emitError(FileLineColLoc::get(&ctx, path, 0, 0))
        << "failed to import '" << path << "': " << e.what();
    return nullptr;
  } catch (...) {
    emitError(FileLineColLoc::get(&ctx, path, 0, 0))
        << "failed to import '" << path << "'";
    return nullptr;
  }
}

namespace {
/// The names of the first three of `nodes`, quoted, then ", ..." if there
/// are more (for warnings that name a few of many nodes).
std::string firstNodeNames(ArrayRef<const onnx::NodeProto *> nodes) {
  std::string names;
  for (size_t i = 0; i < nodes.size() && i < 3; ++i)
    names += (i ? ", '" : "'") + nodes[i]->name() + "'";
  if (nodes.size() > 3)
    names += ", ...";
  return names;
}
} // namespace

void loom::onnx_import::OnnxImporter::warnInferenceDropouts() {
  if (dropoutStreams == 0 || inferenceDropouts.empty())
    return;
  // PyTorch's exporter writes scaled_dot_product_attention's dropout_p as
  // a Dropout without training_mode: by ONNX's default the identity, even
  // in a model whose other dropouts train.
  std::string names;
  for (size_t i = 0; i < inferenceDropouts.size() && i < 3; ++i)
    names += (i ? ", '" : "'") + inferenceDropouts[i].second + "'";
  if (inferenceDropouts.size() > 3)
    names += ", ...";
  emitWarning(inferenceDropouts.front().first)
      << inferenceDropouts.size()
      << " Dropout node(s) with a ratio above 0 and no training_mode input ("
      << names << ") are the identity, as ONNX defines them, while other "
      << "dropouts of this model train; PyTorch's exporter writes the "
      << "dropout_p of scaled_dot_product_attention this way, so that "
      << "dropout is not in the file (export the attention as a module "
      << "dropout, e.g. transformers' attn_implementation=\"eager\", to "
      << "train with it)";
}

void loom::onnx_import::OnnxImporter::warnMergedNormParameters(
    const onnx::GraphProto &graph) {
  // PyTorch's exporter, when it optimizes (its default), merges
  // initializers of equal value: the weights of fresh LayerNorms are all
  // ones, their biases zeros, and every one of them becomes one tensor,
  // which then trains as one parameter. A normalization's parameter read
  // by several normalization nodes is almost surely such a merge.
  llvm::StringSet<> inits;
  for (const auto &init : graph.initializer())
    inits.insert(init.name());
  llvm::StringMap<SmallVector<const onnx::NodeProto *>> readers;
  SmallVector<std::string> order;
  for (const auto &node : graph.node()) {
    int last = node.op_type() == "LayerNormalization"   ? 2
               : node.op_type() == "BatchNormalization" ? 4
                                                        : 0;
    for (int i = 1; i <= last && i < node.input_size(); ++i) {
      const std::string &name = node.input(i);
      if (name.empty() || !inits.contains(name))
        continue;
      auto &list = readers[name];
      if (list.empty())
        order.push_back(name);
      if (list.empty() || list.back() != &node)
        list.push_back(&node);
    }
  }
  for (const std::string &name : order) {
    const auto &list = readers[name];
    if (list.size() < 2)
      continue;
    std::string nodes = firstNodeNames(list);
    emitWarning(nodeLoc(*list[1]))
        << "initializer '" << name << "' is a parameter of "
        << list.size() << " " << list[0]->op_type() << " nodes (" << nodes
        << "): they train as one tied tensor. If the model's modules have "
        << "their own, PyTorch's exporter merged them: it merges "
        << "initializers of equal value when it optimizes (its default; "
        << "fresh normalization weights are all ones); export with "
        << "torch.onnx.export(..., optimize=False) to keep them apart";
  }
}

void loom::onnx_import::OnnxImporter::warnFoldedBatchNorms(
    const onnx::GraphProto &graph, ModuleOp module) {
  // The exporter's optimizer (onnxscript's rewriter) names the rules it
  // applied to a node in its metadata; the node's own metadata keeps the
  // PyTorch op it was traced from: `_native_batch_norm_legit_functional`
  // is a batch norm in training mode (normalizing with the batch's
  // statistics), `_no_training` one in eval mode.
  SmallVector<const onnx::NodeProto *> folded;
  size_t training = 0;
  for (const auto &node : graph.node()) {
    bool fused = false, trains = false;
    for (const auto &kv : node.metadata_props()) {
      llvm::StringRef value = kv.value();
      if (kv.key() == "pkg.onnxscript.rewriter.rule_name")
        fused |= value.contains("FuseBatchNormInto");
      if (kv.key() == "pkg.torch.onnx.fx_node" ||
          kv.key() == "pkg.torch.onnx.class_hierarchy")
        trains |= value.contains("_native_batch_norm_legit_functional") ||
                  value.contains("_native_batch_norm_legit.default");
    }
    if (fused) {
      folded.push_back(&node);
      training += trains;
    }
  }
  if (folded.empty())
    return;
  std::string nodes = firstNodeNames(folded);
  InFlightDiagnostic d = emitWarning(nodeLoc(*folded.front()));
  d << folded.size() << " " << folded.front()->op_type()
    << " node(s) (" << nodes << ") have a BatchNormalization folded into "
    << "them by PyTorch's exporter (its optimizer, on by default): ";
  if (training)
    d << "the module was traced in training mode, and its batch norms, "
      << "which normalize with each batch's statistics, are gone: the model "
      << "trains without them. ";
  else
    d << "the batch norms' scales are in the weights, and their running "
      << "statistics are gone. ";
  d << "Export with torch.onnx.export(..., optimize=False) to train the "
    << "batch norms";
  Builder b(module.getContext());
  module->setAttr("loom.folded_batch_norms",
                  b.getDictionaryAttr(
                      {b.getNamedAttr("count", b.getI64IntegerAttr(
                                                   folded.size())),
                       b.getNamedAttr("training", b.getI64IntegerAttr(
                                                      training))}));
}
