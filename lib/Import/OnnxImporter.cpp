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

#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

using namespace mlir;
using namespace loom;

namespace {

/// Thrown inside this file only, to unwind a node conversion after its
/// diagnostic has been emitted.
struct ImportFailure {};

/// The ONNX ops this importer maps onto the loom dialect.
const llvm::StringSet<> &supportedOps() {
  static const llvm::StringSet<> ops = {
      "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "CastLike",
      "Ceil", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "Cos",
      "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten",
      "Floor", "Gather", "GatherElements", "Gelu", "Gemm", "GlobalAveragePool",
      "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish",
      "Identity", "IsNaN", "LayerNormalization",
      "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max",
      "MaxPool", "Mean", "Min", "Mul", "Neg", "Not", "Pow", "PRelu", "Range",
      "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
      "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "ReduceSumSquare",
      "Relu", "Reshape", "Selu", "SequenceAt", "Shape", "Sigmoid", "Sin",
      "Size", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus",
      "Split", "SplitToSequence", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh",
      "Tile", "Transpose", "Unsqueeze", "Where"};
  return ops;
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

/// A compile-time tensor: integers and floats are both held as doubles
/// (int64 shape values fit exactly below 2^53, far beyond any shape).
struct ConstTensor {
  SmallVector<int64_t> shape;
  Type elementType;
  std::vector<double> values;
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// The initializers that are not trainable parameters, although they are
/// float tensors: those PyTorch's exporter marks as buffers or constants
/// (`pkg.torch.export.graph_signature.InputSpec.kind` in the value_info),
/// and those used only as the running statistics of inference-mode
/// BatchNormalization (which does not update them).
llvm::StringSet<> frozenInitializers(const onnx::GraphProto &graph) {
  llvm::StringSet<> frozen;
  for (const auto &vi : graph.value_info())
    for (const auto &kv : vi.metadata_props())
      if (kv.key() == "pkg.torch.export.graph_signature.InputSpec.kind" &&
          (kv.value() == "BUFFER" || kv.value() == "CONSTANT_TENSOR"))
        frozen.insert(vi.name());
  llvm::StringMap<bool> statsOnly; // name -> used only as BN statistics
  for (const auto &node : graph.node()) {
    bool inferenceBN = node.op_type() == "BatchNormalization" &&
                       llvm::none_of(node.attribute(), [](const auto &a) {
                         return a.name() == "training_mode" && a.i() != 0;
                       });
    for (int i = 0; i < node.input_size(); ++i) {
      bool stats = inferenceBN && (i == 3 || i == 4);
      auto [it, inserted] = statsOnly.try_emplace(node.input(i), stats);
      if (!inserted)
        it->second = it->second && stats;
    }
  }
  for (const auto &init : graph.initializer()) {
    auto it = statsOnly.find(init.name());
    if (it != statsOnly.end() && it->second)
      frozen.insert(init.name());
  }
  return frozen;
}

class OnnxImporter {
public:
  OnnxImporter(StringRef path, MLIRContext &ctx, ParameterStore &params,
               const OnnxImportOptions &options)
      : path(path.str()), ctx(ctx), b(&ctx), params(params), options(options) {}

  OwningOpRef<ModuleOp> run();

private:
  // Loading and checking.
  bool loadModel();
  bool checkExternalData(const onnx::TensorProto &tensor, Location loc);
  bool checkAllExternalData();
  bool checkSupported();
  bool bindInputs();

  // Types and tensors.
  Type elementType(int32_t onnxType, Location loc);
  RankedTensorType tensorType(const onnx::TypeProto &type, StringRef what,
                              Location loc);
  bool readTensorBytes(const onnx::TensorProto &tensor, Location loc,
                       std::vector<uint8_t> &bytes);
  DenseElementsAttr tensorToAttr(const onnx::TensorProto &tensor,
                                 RankedTensorType type, Location loc);

  // Values.
  Value get(StringRef name);
  void define(StringRef name, Value value);
  std::optional<ConstTensor> getConst(StringRef name);
  void defineConst(StringRef name, ConstTensor c);
  Value materialize(const ConstTensor &c, Location loc);

  // Nodes.
  void convertNode(const onnx::NodeProto &node);
  bool tryFold(const onnx::NodeProto &node);

  Location nodeLoc(const onnx::NodeProto &node) {
    std::string name = node.name().empty()
                           ? (node.op_type() + "#" + std::to_string(nodeIndex))
                           : node.name();
    return NameLoc::get(StringAttr::get(&ctx, name),
                        FileLineColLoc::get(&ctx, path, 0, 0));
  }

  std::string path, modelDir;
  MLIRContext &ctx;
  OpBuilder b;
  ParameterStore &params;
  const OnnxImportOptions &options;
  onnx::ModelProto model;
  int64_t opset = 0;
  int nodeIndex = 0;
  llvm::StringMap<Value> values;
  llvm::StringMap<ConstTensor> consts;
  llvm::StringMap<RankedTensorType> inferred;
  /// ONNX sequences (SplitToSequence), held as their tensors.
  llvm::StringMap<SmallVector<Value>> sequences;
  /// Outputs of nodes whose conversion failed: their users fail quietly, so
  /// that one error is reported once, not again at every node downstream.
  llvm::StringSet<> failedValues;
  Value rngSeed;
  int64_t dropoutStreams = 0;
  func::FuncOp func;
  Block *entry = nullptr;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
};

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
    emitError(fileLoc) << "'" << path << "' is not a valid ONNX model: the "
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
  if (!bindInputs())
    return false;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true,
                                        /*strict_mode=*/1,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "ONNX shape inference failed: " << e.what();
    return false;
  }
  return true;
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
    if (defaultDomain && supportedOps().contains(node.op_type()))
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
                   << " bytes but its shape " << shapeStr(shape) << " needs "
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
    return fill(t.float_data(), [](float v, uint8_t *p) { std::memcpy(p, &v, 4); });
  case onnx::TensorProto::DOUBLE:
    return fill(t.double_data(), [](double v, uint8_t *p) { std::memcpy(p, &v, 8); });
  case onnx::TensorProto::INT64:
    return fill(t.int64_data(), [](int64_t v, uint8_t *p) { std::memcpy(p, &v, 8); });
  case onnx::TensorProto::INT32:
    return fill(t.int32_data(), [](int32_t v, uint8_t *p) { std::memcpy(p, &v, 4); });
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit floats are stored as their bit patterns in int32_data.
    return fill(t.int32_data(), [](int32_t v, uint8_t *p) {
      uint16_t bits = static_cast<uint16_t>(v);
      std::memcpy(p, &bits, 2);
    });
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    return fill(t.int32_data(), [](int32_t v, uint8_t *p) {
      *p = static_cast<uint8_t>(v);
    });
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

static ConstTensor attrToConst(DenseElementsAttr attr) {
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

static DenseElementsAttr constToAttr(const ConstTensor &c) {
  auto type = RankedTensorType::get(c.shape, c.elementType);
  SmallVector<Attribute> attrs;
  for (double v : c.values) {
    if (auto ft = dyn_cast<FloatType>(c.elementType))
      attrs.push_back(FloatAttr::get(ft, v));
    else if (c.elementType.isInteger(1))
      attrs.push_back(BoolAttr::get(c.elementType.getContext(), v != 0));
    else
      attrs.push_back(IntegerAttr::get(c.elementType, static_cast<int64_t>(v)));
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
  func = func::FuncOp::create(b, fileLoc, "forward",
                              b.getFunctionType({}, {}));
  entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  llvm::StringSet<> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  llvm::StringSet<> frozen = frozenInitializers(graph);

  bool ok = true;
  auto addArg = [&](Type type, StringRef attrName, StringRef name) {
    argTypes.push_back(type);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(attrName, b.getStringAttr(name))));
    return entry->addArgument(type, NameLoc::get(b.getStringAttr(name)));
  };

  for (const auto &input : graph.input()) {
    if (initNames.contains(input.name()))
      continue;
    RankedTensorType type = tensorType(
        input.type(), "model input '" + input.name() + "'", fileLoc);
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
    // buffers and statistics of frozenInitializers().
    bool bound = llvm::any_of(options.boundInputs, [&](const auto &kv) {
      return kv.first == init.name();
    });
    if (isa<FloatType>(elt) && !shape.empty() && !bound &&
        !frozen.contains(init.name())) {
      // A trainable parameter: an argument, its value beside the IR.
      std::vector<uint8_t> bytes;
      if (!readTensorBytes(init, loc, bytes)) {
        ok = false;
        continue;
      }
      params.add(ParameterTensor{init.name(), type, std::move(bytes)});
      define(init.name(), addArg(type, kParamAttr, init.name()));
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

} // namespace

//===----------------------------------------------------------------------===//
// Node conversion
//===----------------------------------------------------------------------===//

namespace {
/// Access to one node's inputs, outputs and attributes, with errors that
/// name the node.
struct NodeCtx {
  const onnx::NodeProto &node;
  Location loc;
  std::map<std::string, const onnx::AttributeProto *> attrs;

  NodeCtx(const onnx::NodeProto &node, Location loc) : node(node), loc(loc) {
    for (const auto &a : node.attribute())
      attrs[a.name()] = &a;
  }

  [[noreturn]] void fail(const Twine &msg) const {
    // The location already names the node (or "<op>#<index>" if unnamed).
    if (node.name().empty())
      emitError(loc) << node.op_type() << " node: " << msg;
    else
      emitError(loc) << node.op_type() << " node '" << node.name()
                     << "': " << msg;
    throw ImportFailure{};
  }
  int numInputs() const { return node.input_size(); }
  bool hasInput(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  StringRef inputName(int i) const {
    return hasInput(i) ? StringRef(node.input(i)) : StringRef();
  }
  StringRef outputName(int i) const {
    return i < node.output_size() ? StringRef(node.output(i)) : StringRef();
  }
  const onnx::AttributeProto *attr(StringRef name) const {
    auto it = attrs.find(name.str());
    return it == attrs.end() ? nullptr : it->second;
  }
  int64_t getInt(StringRef name, int64_t dflt) const {
    auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  float getFloat(StringRef name, float dflt) const {
    auto *a = attr(name);
    return a ? a->f() : dflt;
  }
  std::string getString(StringRef name, StringRef dflt) const {
    auto *a = attr(name);
    return a ? a->s() : dflt.str();
  }
  std::optional<SmallVector<int64_t>> getInts(StringRef name) const {
    auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }
};

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Normalizes a possibly negative axis against `rank`.
int64_t normAxis(const NodeCtx &n, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    n.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  return a;
}

/// Broadcast-shape of two constant tensors and the flat index mapping.
std::vector<double> broadcastConst(const ConstTensor &c,
                                   ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<double> out(n);
  size_t rank = shape.size(), crank = c.shape.size();
  SmallVector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t src = 0;
    for (size_t d = 0; d < crank; ++d) {
      int64_t cd = c.shape[d];
      int64_t i = idx[d + rank - crank];
      src = src * cd + (cd == 1 ? 0 : i);
    }
    out[flat] = c.values[src];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}
} // namespace

/// Folds shape arithmetic whose inputs are all known at compile time.
/// Returns false (no change) when the node is not foldable here.
bool OnnxImporter::tryFold(const onnx::NodeProto &node) {
  static const llvm::StringSet<> foldable = {
      "Add", "Sub", "Mul", "Div", "Neg", "Cast", "Concat", "Gather",
      "Unsqueeze", "Squeeze", "Reshape", "Identity", "Equal", "Less",
      "Greater", "Where", "Slice", "Range", "Max", "Min", "Not", "Expand",
      "Abs", "Floor", "Sqrt", "GatherElements"};
  const std::string &op = node.op_type();
  NodeCtx n(node, nodeLoc(node));
  if (op == "Shape" || op == "Size") {
    Value in = get(n.inputName(0));
    if (!in)
      return false;
    auto t = typeOf(in);
    ConstTensor c;
    c.elementType = b.getI64Type();
    if (op == "Size") {
      c.values = {static_cast<double>(t.getNumElements())};
    } else {
      int64_t rank = t.getRank();
      int64_t start = n.getInt("start", 0), end = n.getInt("end", rank);
      if (start < 0)
        start += rank;
      if (end < 0)
        end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      for (int64_t i = start; i < end; ++i)
        c.values.push_back(static_cast<double>(t.getDimSize(i)));
      c.shape = {static_cast<int64_t>(c.values.size())};
    }
    defineConst(n.outputName(0), c);
    return true;
  }
  if (op == "ConstantOfShape") {
    auto shapeC = getConst(n.inputName(0));
    if (!shapeC)
      n.fail("the shape input must be a compile-time constant");
    ConstTensor c;
    for (double d : shapeC->values)
      c.shape.push_back(static_cast<int64_t>(d));
    c.elementType = b.getF32Type();
    double fillValue = 0.0;
    if (auto *a = n.attr("value")) {
      auto type = RankedTensorType::get(
          SmallVector<int64_t>(a->t().dims().begin(), a->t().dims().end()),
          elementType(a->t().data_type(), n.loc));
      if (!type.getElementType())
        throw ImportFailure{};
      DenseElementsAttr attr = tensorToAttr(a->t(), type, n.loc);
      if (!attr)
        throw ImportFailure{};
      ConstTensor v = attrToConst(attr);
      c.elementType = v.elementType;
      if (!v.values.empty())
        fillValue = v.values[0];
    }
    if (c.numElements() > (int64_t(1) << 24))
      n.fail("constant of " + Twine(c.numElements()) + " elements is too large");
    c.values.assign(c.numElements(), fillValue);
    defineConst(n.outputName(0), c);
    return true;
  }
  if (op == "CastLike") {
    // Only the element type of the second input matters: it may be a
    // run-time value.
    auto x = getConst(n.inputName(0));
    if (!x)
      return false;
    Type to;
    if (auto like = getConst(n.inputName(1)))
      to = like->elementType;
    else if (Value v = get(n.inputName(1)))
      to = typeOf(v).getElementType();
    else
      return false;
    if (!isa<FloatType>(to))
      for (double &v : x->values)
        v = to.isInteger(1) ? double(v != 0) : std::trunc(v);
    x->elementType = to;
    defineConst(n.outputName(0), *x);
    return true;
  }
  if (!foldable.contains(op))
    return false;
  SmallVector<ConstTensor> in;
  for (int i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i)) {
      in.push_back(ConstTensor{});
      continue;
    }
    auto c = getConst(n.inputName(i));
    if (!c || c->values.size() > 4096)
      return false;
    in.push_back(*c);
  }
  if (in.empty())
    return false;
  ConstTensor out;
  out.elementType = in[0].elementType;
  auto binary = [&](std::function<double(double, double)> f, bool toBool) {
    auto shape = broadcastShapes(in[0].shape, in[1].shape);
    if (!shape)
      n.fail("operand shapes " + shapeStr(in[0].shape) + " and " +
             shapeStr(in[1].shape) + " are not broadcast-compatible");
    auto a = broadcastConst(in[0], *shape), c = broadcastConst(in[1], *shape);
    out.shape = *shape;
    for (size_t i = 0; i < a.size(); ++i)
      out.values.push_back(f(a[i], c[i]));
    if (toBool)
      out.elementType = b.getI1Type();
  };
  bool isInt = !isa<FloatType>(in[0].elementType);
  if (op == "Add")
    binary([](double x, double y) { return x + y; }, false);
  else if (op == "Sub")
    binary([](double x, double y) { return x - y; }, false);
  else if (op == "Mul")
    binary([](double x, double y) { return x * y; }, false);
  else if (op == "Div") {
    if (isInt && llvm::is_contained(in[1].values, 0.0))
      n.fail("integer division by zero in a constant expression");
    binary([isInt](double x, double y) { return isInt ? std::trunc(x / y) : x / y; },
           false);
  } else if (op == "Max")
    binary([](double x, double y) { return std::max(x, y); }, false);
  else if (op == "Min")
    binary([](double x, double y) { return std::min(x, y); }, false);
  else if (op == "Equal")
    binary([](double x, double y) { return double(x == y); }, true);
  else if (op == "Less")
    binary([](double x, double y) { return double(x < y); }, true);
  else if (op == "Greater")
    binary([](double x, double y) { return double(x > y); }, true);
  else if (op == "Neg" || op == "Abs" || op == "Floor" || op == "Sqrt" ||
           op == "Not") {
    out = in[0];
    for (double &v : out.values)
      v = op == "Neg"     ? -v
          : op == "Abs"   ? std::fabs(v)
          : op == "Floor" ? std::floor(v)
          : op == "Sqrt"  ? std::sqrt(v)
                          : double(v == 0.0);
  } else if (op == "Identity") {
    out = in[0];
  } else if (op == "Cast") {
    out = in[0];
    out.elementType = elementType(n.getInt("to", 1), n.loc);
    if (!out.elementType)
      throw ImportFailure{};
    if (!isa<FloatType>(out.elementType))
      for (double &v : out.values)
        v = out.elementType.isInteger(1) ? double(v != 0) : std::trunc(v);
  } else if (op == "Where") {
    auto s1 = broadcastShapes(in[0].shape, in[1].shape);
    auto shape = s1 ? broadcastShapes(*s1, in[2].shape) : std::nullopt;
    if (!shape)
      n.fail("operand shapes are not broadcast-compatible");
    auto c = broadcastConst(in[0], *shape), x = broadcastConst(in[1], *shape),
         y = broadcastConst(in[2], *shape);
    out.shape = *shape;
    out.elementType = in[1].elementType;
    for (size_t i = 0; i < c.size(); ++i)
      out.values.push_back(c[i] != 0 ? x[i] : y[i]);
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
             op == "Expand") {
    // Only the shape changes: take it from ONNX shape inference.
    auto it = inferred.find(n.outputName(0));
    if (it == inferred.end())
      return false;
    out.shape.assign(it->second.getShape().begin(),
                     it->second.getShape().end());
    if (op == "Expand") {
      if (!broadcastShapes(in[0].shape, out.shape))
        return false;
      out.values = broadcastConst(in[0], out.shape);
    } else {
      out.values = in[0].values;
    }
    if (static_cast<int64_t>(out.values.size()) != out.numElements())
      return false;
  } else if (op == "Concat") {
    if (in[0].shape.size() != 1)
      return false;
    out.shape = {0};
    for (const auto &c : in) {
      if (c.shape.size() != 1)
        return false;
      out.values.insert(out.values.end(), c.values.begin(), c.values.end());
    }
    out.shape[0] = out.values.size();
  } else if (op == "Gather") {
    if (in[0].shape.size() != 1 || n.getInt("axis", 0) != 0)
      return false;
    out.shape = in[1].shape;
    int64_t size = in[0].shape[0];
    for (double iv : in[1].values) {
      int64_t i = static_cast<int64_t>(iv);
      if (i < 0)
        i += size;
      if (i < 0 || i >= size)
        n.fail("index " + Twine(static_cast<int64_t>(iv)) +
               " is out of range for " + Twine(size) + " elements");
      out.values.push_back(in[0].values[i]);
    }
  } else if (op == "GatherElements") {
    // out[i] = data[i with index[i] on `axis`]; index and data of one rank.
    const ConstTensor &data = in[0], &index = in[1];
    int64_t rank = data.shape.size();
    if (static_cast<int64_t>(index.shape.size()) != rank || rank == 0)
      n.fail("data and indices must have the same rank");
    int64_t axis = normAxis(n, n.getInt("axis", 0), rank);
    out.shape = index.shape;
    SmallVector<int64_t> idx(rank, 0);
    for (double iv : index.values) {
      int64_t k = static_cast<int64_t>(iv);
      if (k < 0)
        k += data.shape[axis];
      if (k < 0 || k >= data.shape[axis])
        n.fail("index " + Twine(static_cast<int64_t>(iv)) +
               " is out of range for dimension " + Twine(axis) + " of size " +
               Twine(data.shape[axis]));
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t i = d == axis ? k : idx[d];
        if (i >= data.shape[d])
          n.fail("indices shape " + shapeStr(index.shape) +
                 " exceeds the data shape " + shapeStr(data.shape));
        src = src * data.shape[d] + i;
      }
      out.values.push_back(data.values[src]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < index.shape[d])
          break;
        idx[d] = 0;
      }
    }
  } else if (op == "Slice") {
    // ONNX Slice: per listed axis, start/end clamped to the dimension
    // (INT64 extremes mean "to the end"), any non-zero step.
    int64_t rank = in[0].shape.size();
    if (in.size() < 3 || rank == 0)
      return false;
    SmallVector<int64_t> start(rank, 0), step(rank, 1), count(in[0].shape);
    size_t listed = in[1].values.size();
    if (in[2].values.size() != listed)
      n.fail("starts and ends have different lengths");
    auto at = [&](size_t input, size_t i, int64_t dflt) {
      if (in.size() <= input || in[input].values.empty())
        return dflt;
      return static_cast<int64_t>(
          std::clamp(in[input].values.at(i), -4.0e18, 4.0e18));
    };
    for (size_t i = 0; i < listed; ++i) {
      int64_t axis = normAxis(n, at(3, i, i), rank);
      int64_t dim = in[0].shape[axis];
      int64_t st = at(4, i, 1);
      if (st == 0)
        n.fail("slice step 0");
      int64_t b0 = at(1, i, 0), e0 = at(2, i, 0);
      if (b0 < 0)
        b0 += dim;
      if (e0 < 0)
        e0 += dim;
      if (st > 0) {
        b0 = std::clamp<int64_t>(b0, 0, dim);
        e0 = std::clamp<int64_t>(e0, 0, dim);
        count[axis] = std::max<int64_t>(0, (e0 - b0 + st - 1) / st);
      } else {
        b0 = std::clamp<int64_t>(b0, 0, dim - 1);
        e0 = std::clamp<int64_t>(e0, -1, dim - 1);
        count[axis] = std::max<int64_t>(0, (b0 - e0 - st - 1) / -st);
      }
      start[axis] = b0;
      step[axis] = st;
    }
    out.shape = count;
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t flat = 0, total = out.numElements(); flat < total; ++flat) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src = src * in[0].shape[d] + start[d] + idx[d] * step[d];
      out.values.push_back(in[0].values[src]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < count[d])
          break;
        idx[d] = 0;
      }
    }
  } else if (op == "Range") {
    double start = in[0].values.at(0), limit = in[1].values.at(0),
           delta = in[2].values.at(0);
    if (delta == 0)
      n.fail("Range with delta 0");
    int64_t count = std::max<int64_t>(
        0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    if (count > (1 << 24))
      n.fail("Range of " + Twine(count) + " elements is too large");
    for (int64_t i = 0; i < count; ++i)
      out.values.push_back(start + i * delta);
    out.shape = {count};
  } else {
    return false;
  }
  defineConst(n.outputName(0), out);
  return true;
}

void OnnxImporter::convertNode(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  NodeCtx n(node, nodeLoc(node));
  Location loc = n.loc;

  if (op == "Constant") {
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
      c = ConstTensor{{a->floats_size()}, b.getF32Type(),
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
    defineConst(n.outputName(0), c);
    return;
  }

  if (tryFold(node))
    return;

  auto input = [&](int i) -> Value {
    if (!n.hasInput(i))
      n.fail("input " + Twine(i) + " is missing");
    b.setInsertionPointToEnd(entry);
    Value v = get(n.inputName(i));
    if (!v && failedValues.contains(n.inputName(i)))
      throw ImportFailure{}; // reported at the node that failed
    if (!v)
      n.fail("input '" + n.inputName(i) + "' is not defined");
    return v;
  };
  auto constInts = [&](int i, StringRef what) -> SmallVector<int64_t> {
    auto c = getConst(n.inputName(i));
    if (!c)
      n.fail(what + " (input " + Twine(i) + ") must be a compile-time "
             "constant; Loom needs static shapes");
    SmallVector<int64_t> v;
    // Clamp first: ONNX uses INT64_MAX/INT64_MIN as "to the end", and a
    // double that large does not convert to int64 safely.
    for (double d : c->values)
      v.push_back(static_cast<int64_t>(std::clamp(d, -4.0e18, 4.0e18)));
    return v;
  };
  auto check = [&](auto result) {
    if (failed(result))
      throw ImportFailure{};
    return *result;
  };
  auto setOut = [&](int i, Value v) {
    StringRef name = n.outputName(i);
    if (name.empty())
      return;
    auto it = inferred.find(name);
    if (it != inferred.end() && it->second != v.getType()) {
      std::string got;
      llvm::raw_string_ostream os(got);
      os << v.getType();
      std::string want;
      llvm::raw_string_ostream os2(want);
      os2 << it->second;
      n.fail("imported result type " + got + " differs from the ONNX inferred "
             "type " + want + " (importer bug; please report)");
    }
    define(name, v);
  };
  auto splat = [&](Value like, double value) {
    return splatConstant(b, loc, typeOf(like), value);
  };
  auto floatOnly = [&](Value v) {
    if (!isa<FloatType>(typeOf(v).getElementType()))
      n.fail("needs a floating-point input");
  };

  b.setInsertionPointToEnd(entry);

  // Elementwise binary ops with numpy broadcasting.
  using BinBuilder = std::function<FailureOr<Value>(Value, Value)>;
  std::map<std::string, BinBuilder> binary = {
      {"Add", [&](Value x, Value y) { return createBroadcastBinary<AddOp>(b, loc, x, y); }},
      {"Sub", [&](Value x, Value y) { return createBroadcastBinary<SubOp>(b, loc, x, y); }},
      {"Mul", [&](Value x, Value y) { return createBroadcastBinary<MulOp>(b, loc, x, y); }},
      {"Div", [&](Value x, Value y) { return createBroadcastBinary<DivOp>(b, loc, x, y); }},
      {"Max", [&](Value x, Value y) { return createBroadcastBinary<MaxOp>(b, loc, x, y); }},
      {"Min", [&](Value x, Value y) { return createBroadcastBinary<MinOp>(b, loc, x, y); }},
      {"Sum", [&](Value x, Value y) { return createBroadcastBinary<AddOp>(b, loc, x, y); }},
      {"Mean", [&](Value x, Value y) { return createBroadcastBinary<AddOp>(b, loc, x, y); }},
  };
  if (auto it = binary.find(op); it != binary.end()) {
    Value acc = input(0);
    for (int i = 1; i < n.numInputs(); ++i)
      acc = check(it->second(acc, input(i)));
    if (op == "Mean" && n.numInputs() > 1)
      acc = DivOp::create(b, loc, acc, splat(acc, n.numInputs()));
    setOut(0, acc);
    return;
  }
  if (op == "Pow") {
    Value x = input(0), y = input(1);
    if (!isa<FloatType>(typeOf(x).getElementType()))
      n.fail("integer Pow is not supported");
    if (typeOf(y).getElementType() != typeOf(x).getElementType())
      y = CastOp::create(b, loc,
                         RankedTensorType::get(typeOf(y).getShape(),
                                               typeOf(x).getElementType()),
                         y);
    setOut(0, check(createBroadcastBinary<PowOp>(b, loc, x, y)));
    return;
  }
  if (op == "PRelu") {
    Value x = input(0), slope = input(1);
    auto st = typeOf(slope), xt = typeOf(x);
    if (!broadcastShapes(xt.getShape(), st.getShape()) && st.getRank() == 1 &&
        xt.getRank() >= 2 && st.getDimSize(0) == xt.getDimSize(1)) {
      // Models from before opset 7 give one slope per channel (dimension 1).
      slope = BroadcastInDimOp::create(
          b, loc, RankedTensorType::get(xt.getShape(), st.getElementType()),
          slope, ArrayRef<int64_t>{1});
    }
    Value neg = check(createBroadcastBinary<MulOp>(b, loc, x, slope));
    Value zero = splat(x, 0.0);
    Value isNeg = CompareOp::create(
        b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
        ComparePredicate::LT, x, zero);
    setOut(0, SelectOp::create(b, loc, isNeg, neg, x));
    return;
  }

  // Comparisons.
  std::map<std::string, ComparePredicate> cmps = {
      {"Equal", ComparePredicate::EQ}, {"Less", ComparePredicate::LT},
      {"LessOrEqual", ComparePredicate::LE}, {"Greater", ComparePredicate::GT},
      {"GreaterOrEqual", ComparePredicate::GE}};
  if (auto it = cmps.find(op); it != cmps.end()) {
    Value x = input(0), y = input(1);
    if (failed(broadcastPair(b, loc, x, y)))
      throw ImportFailure{};
    if (x.getType() != y.getType())
      n.fail("operand types differ");
    setOut(0, CompareOp::create(
                  b, loc,
                  RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
                  it->second, x, y));
    return;
  }
  if (op == "Not") {
    Value x = input(0);
    setOut(0, CompareOp::create(b, loc, typeOf(x), ComparePredicate::EQ, x,
                                splat(x, 0)));
    return;
  }

  // Elementwise unary ops.
  if (op == "Relu") {
    setOut(0, ReluOp::create(b, loc, input(0)));
    return;
  }
  if (op == "Neg" || op == "Abs") {
    Value x = input(0);
    setOut(0, op == "Neg" ? NegOp::create(b, loc, x).getResult()
                          : AbsOp::create(b, loc, x).getResult());
    return;
  }
  if (op == "Identity") {
    setOut(0, input(0));
    return;
  }
  if (op == "IsNaN") {
    // NaN is the one value that differs from itself (an unordered compare).
    Value x = input(0);
    floatOnly(x);
    setOut(0, CompareOp::create(
                  b, loc,
                  RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
                  ComparePredicate::NE, x, x));
    return;
  }
  if (op == "Gelu") {
    Value x = input(0);
    floatOnly(x);
    std::string approx = n.getString("approximate", "none");
    if (approx != "none" && approx != "tanh")
      n.fail("approximate = '" + approx + "' is not 'none' or 'tanh'");
    setOut(0, GeluOp::create(b, loc, x,
                             approx == "tanh" ? GeluApproximation::Tanh
                                              : GeluApproximation::None));
    return;
  }
  if (op == "GatherElements")
    n.fail("GatherElements on run-time values is not supported yet (only "
           "on compile-time constants, where it is folded)");
  if (op == "SplitToSequence") {
    // Sequences exist only at import: the tensors are kept by name and
    // SequenceAt with a constant position picks one.
    Value x = input(0);
    auto xt = typeOf(x);
    int64_t axis = normAxis(n, n.getInt("axis", 0), xt.getRank());
    int64_t dim = xt.getDimSize(axis);
    SmallVector<int64_t> sizes;
    bool keep = true;
    if (n.hasInput(1)) {
      auto c = getConst(n.inputName(1));
      if (!c)
        n.fail("split (input 1) must be a compile-time constant");
      if (c->shape.empty()) {
        int64_t chunk = static_cast<int64_t>(c->values.at(0));
        if (chunk <= 0)
          n.fail("split size " + Twine(chunk) + " is not positive");
        for (int64_t off = 0; off < dim; off += chunk)
          sizes.push_back(std::min(chunk, dim - off));
      } else {
        for (double v : c->values)
          sizes.push_back(static_cast<int64_t>(v));
      }
    } else {
      sizes.assign(dim, 1);
      keep = n.getInt("keepdims", 1) != 0;
    }
    SmallVector<Value> parts;
    int64_t offset = 0;
    for (int64_t size : sizes) {
      if (size < 0 || offset + size > dim)
        n.fail("split sizes exceed dimension " + Twine(axis) + " of size " +
               Twine(dim));
      SmallVector<int64_t> start(xt.getRank(), 0), limit(xt.getShape()),
          stride(xt.getRank(), 1);
      start[axis] = offset;
      limit[axis] = offset + size;
      offset += size;
      Value part =
          check(createInferred<SliceOp>(b, loc, x, start, limit, stride));
      if (!keep) {
        SmallVector<int64_t> shape(typeOf(part).getShape());
        shape.erase(shape.begin() + axis);
        part = ReshapeOp::create(
            b, loc, RankedTensorType::get(shape, xt.getElementType()), part);
      }
      parts.push_back(part);
    }
    if (offset != dim)
      n.fail("split sizes sum to " + Twine(offset) + ", not " + Twine(dim));
    if (!n.outputName(0).empty())
      sequences[n.outputName(0)] = std::move(parts);
    return;
  }
  if (op == "SequenceAt") {
    auto it = sequences.find(n.inputName(0));
    if (it == sequences.end()) {
      if (failedValues.contains(n.inputName(0)))
        throw ImportFailure{};
      n.fail("input '" + n.inputName(0) + "' is not a sequence made by "
             "SplitToSequence");
    }
    auto pos = getConst(n.inputName(1));
    if (!pos || pos->values.size() != 1)
      n.fail("position (input 1) must be a compile-time scalar");
    int64_t size = it->second.size();
    int64_t i = static_cast<int64_t>(pos->values[0]);
    if (i < 0)
      i += size;
    if (i < 0 || i >= size)
      n.fail("position " + Twine(static_cast<int64_t>(pos->values[0])) +
             " is out of range for a sequence of " + Twine(size));
    setOut(0, it->second[i]);
    return;
  }
  static const llvm::StringSet<> floatUnary = {
      "Exp", "Log", "Tanh", "Sigmoid", "Erf", "Sqrt", "Reciprocal", "Floor",
      "Ceil", "Softplus", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
      "HardSwish", "Clip", "Cos", "Sin"};
  if (floatUnary.contains(op)) {
    Value x = input(0);
    if (op != "Clip")
      floatOnly(x);
    Value y;
    if (op == "Exp")
      y = ExpOp::create(b, loc, x);
    else if (op == "Log")
      y = LogOp::create(b, loc, x);
    else if (op == "Tanh")
      y = TanhOp::create(b, loc, x);
    else if (op == "Sigmoid")
      y = SigmoidOp::create(b, loc, x);
    else if (op == "Erf")
      y = ErfOp::create(b, loc, x);
    else if (op == "Sqrt")
      y = SqrtOp::create(b, loc, x);
    else if (op == "Floor")
      y = FloorOp::create(b, loc, x);
    else if (op == "Cos")
      y = CosOp::create(b, loc, x);
    else if (op == "Sin")
      y = SinOp::create(b, loc, x);
    else if (op == "Ceil")
      y = NegOp::create(b, loc, FloorOp::create(b, loc, NegOp::create(b, loc, x)));
    else if (op == "Reciprocal")
      y = DivOp::create(b, loc, splat(x, 1.0), x);
    else if (op == "Softplus")
      y = LogOp::create(b, loc,
                        AddOp::create(b, loc, splat(x, 1.0), ExpOp::create(b, loc, x)));
    else if (op == "HardSigmoid" || op == "HardSwish") {
      // HardSwish(x) = x * HardSigmoid(x) with alpha 1/6, beta 0.5.
      bool swish = op == "HardSwish";
      float alpha = swish ? 1.0f / 6.0f : n.getFloat("alpha", 0.2f);
      float beta = swish ? 0.5f : n.getFloat("beta", 0.5f);
      Value lin = AddOp::create(b, loc,
                                MulOp::create(b, loc, x, splat(x, alpha)),
                                splat(x, beta));
      y = MinOp::create(b, loc, MaxOp::create(b, loc, lin, splat(x, 0.0)),
                        splat(x, 1.0));
      if (swish)
        y = MulOp::create(b, loc, x, y);
    } else if (op == "Clip") {
      y = x;
      auto bound = [&](int i) -> Value {
        if (!n.hasInput(i))
          return nullptr;
        Value v = input(i);
        if (typeOf(v).getRank() != 0)
          n.fail("min/max must be scalars");
        return BroadcastInDimOp::create(b, loc, typeOf(x), v,
                                        ArrayRef<int64_t>{});
      };
      if (Value lo = bound(1))
        y = MaxOp::create(b, loc, y, lo);
      if (Value hi = bound(2))
        y = MinOp::create(b, loc, y, hi);
    } else {
      // LeakyRelu, Elu, Selu: select on the sign.
      Value zero = splat(x, 0.0);
      Value isNeg = CompareOp::create(
          b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
          ComparePredicate::LT, x, zero);
      Value negPart, posPart = x;
      if (op == "LeakyRelu") {
        negPart = MulOp::create(b, loc, x, splat(x, n.getFloat("alpha", 0.01f)));
      } else {
        float alpha = n.getFloat("alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f);
        Value em1 = SubOp::create(b, loc, ExpOp::create(b, loc, x), splat(x, 1.0));
        negPart = MulOp::create(b, loc, em1, splat(x, alpha));
        if (op == "Selu") {
          float gamma = n.getFloat("gamma", 1.05070102214813232421875f);
          negPart = MulOp::create(b, loc, negPart, splat(x, gamma));
          posPart = MulOp::create(b, loc, x, splat(x, gamma));
        }
      }
      y = SelectOp::create(b, loc, isNeg, negPart, posPart);
    }
    setOut(0, y);
    return;
  }

  if (op == "Cast" || op == "CastLike") {
    Value x = input(0);
    Type elt;
    if (op == "Cast") {
      elt = elementType(n.getInt("to", 0), loc);
      if (!elt)
        throw ImportFailure{};
    } else {
      elt = typeOf(input(1)).getElementType();
    }
    auto type = RankedTensorType::get(typeOf(x).getShape(), elt);
    setOut(0, type == x.getType() ? x : CastOp::create(b, loc, type, x).getResult());
    return;
  }
  if (op == "Where") {
    Value c = input(0), x = input(1), y = input(2);
    auto s1 = broadcastShapes(typeOf(c).getShape(), typeOf(x).getShape());
    auto shape = s1 ? broadcastShapes(*s1, typeOf(y).getShape()) : std::nullopt;
    if (!shape)
      n.fail("condition " + shapeStr(typeOf(c).getShape()) + ", X " +
             shapeStr(typeOf(x).getShape()) + " and Y " +
             shapeStr(typeOf(y).getShape()) + " are not broadcast-compatible");
    c = broadcastTo(b, loc, c, *shape);
    x = broadcastTo(b, loc, x, *shape);
    y = broadcastTo(b, loc, y, *shape);
    setOut(0, SelectOp::create(b, loc, c, x, y));
    return;
  }

  // Contractions.
  if (op == "MatMul") {
    Value a = input(0), w = input(1);
    floatOnly(a);
    auto at = typeOf(a), wt = typeOf(w);
    if (at.getRank() == 0 || wt.getRank() == 0)
      n.fail("MatMul of a scalar");
    // numpy semantics: 1-D operands gain a unit dimension that is dropped
    // from the result.
    bool aVec = at.getRank() == 1, wVec = wt.getRank() == 1;
    if (aVec)
      a = ReshapeOp::create(b, loc, RankedTensorType::get({1, at.getDimSize(0)}, at.getElementType()), a);
    if (wVec)
      w = ReshapeOp::create(b, loc, RankedTensorType::get({wt.getDimSize(0), 1}, wt.getElementType()), w);
    at = typeOf(a);
    wt = typeOf(w);
    // Broadcast batch dimensions; a 2-D right operand stays shared.
    ArrayRef<int64_t> ab = at.getShape().drop_back(2), wb = wt.getShape().drop_back(2);
    auto batch = broadcastShapes(ab, wb);
    if (!batch)
      n.fail("batch dimensions " + shapeStr(ab) + " and " + shapeStr(wb) +
             " are not broadcast-compatible");
    auto full = [&](Value v, RankedTensorType t) {
      SmallVector<int64_t> s(*batch);
      s.append(t.getShape().take_back(2).begin(), t.getShape().take_back(2).end());
      return broadcastTo(b, loc, v, s);
    };
    if (wt.getRank() != 2 || batch->empty()) {
      a = full(a, at);
      w = full(w, wt);
    } else {
      a = full(a, at);
    }
    if (typeOf(a).getRank() < 2 || typeOf(w).getRank() < 2)
      n.fail("unsupported operand ranks");
    Value y = check(createInferred<MatmulOp>(b, loc, a, w, false, false)).getResult();
    if (aVec || wVec) {
      SmallVector<int64_t> s(typeOf(y).getShape());
      if (wVec)
        s.pop_back();
      if (aVec)
        s.erase(s.end() - (wVec ? 1 : 2));
      y = ReshapeOp::create(b, loc, RankedTensorType::get(s, typeOf(y).getElementType()), y);
    }
    setOut(0, y);
    return;
  }
  if (op == "Gemm") {
    Value a = input(0), w = input(1);
    floatOnly(a);
    if (typeOf(a).getRank() != 2 || typeOf(w).getRank() != 2)
      n.fail("A and B must be 2-D");
    Value y = check(createInferred<MatmulOp>(b, loc, a, w, n.getInt("transA", 0) != 0,
                                             n.getInt("transB", 0) != 0))
                  .getResult();
    float alpha = n.getFloat("alpha", 1.0f), beta = n.getFloat("beta", 1.0f);
    if (alpha != 1.0f)
      y = MulOp::create(b, loc, y, splat(y, alpha));
    if (n.hasInput(2) && beta != 0.0f) {
      Value c = input(2);
      if (beta != 1.0f)
        c = MulOp::create(b, loc, c, splat(c, beta));
      y = check(createBroadcastBinary<AddOp>(b, loc, y, c));
    }
    setOut(0, y);
    return;
  }
  if (op == "Conv") {
    Value x = input(0), w = input(1);
    floatOnly(x);
    if (typeOf(x).getRank() != 4)
      n.fail("only 2-D convolution (rank-4 NCHW input) is supported, got rank " +
             Twine(typeOf(x).getRank()));
    auto wt = typeOf(w);
    SmallVector<int64_t> strides = n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
    SmallVector<int64_t> dil = n.getInts("dilations").value_or(SmallVector<int64_t>{1, 1});
    SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
    std::string autoPad = n.getString("auto_pad", "NOTSET");
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
      n.fail("strides/dilations need 2 entries and pads 4");
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      for (int i = 0; i < 2; ++i) {
        int64_t in = typeOf(x).getDimSize(2 + i);
        int64_t out = (in + strides[i] - 1) / strides[i];
        int64_t eff = (wt.getDimSize(2 + i) - 1) * dil[i] + 1;
        int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in);
        int64_t small = total / 2, big = total - small;
        pads[i] = autoPad == "SAME_UPPER" ? small : big;
        pads[i + 2] = autoPad == "SAME_UPPER" ? big : small;
      }
    } else if (autoPad == "VALID") {
      pads = {0, 0, 0, 0};
    } else if (autoPad != "NOTSET") {
      n.fail("unknown auto_pad '" + autoPad + "'");
    }
    Value y = check(createInferred<Conv2DOp>(b, loc, x, w, strides, pads, dil,
                                             n.getInt("group", 1)))
                  .getResult();
    if (n.hasInput(2)) {
      Value bias = input(2);
      bias = BroadcastInDimOp::create(b, loc, RankedTensorType::get(typeOf(y).getShape(), typeOf(bias).getElementType()), bias, ArrayRef<int64_t>{1});
      y = AddOp::create(b, loc, y, bias);
    }
    setOut(0, y);
    return;
  }

  // Pooling.
  if (op == "MaxPool" || op == "AveragePool") {
    Value x = input(0);
    floatOnly(x);
    if (typeOf(x).getRank() != 4)
      n.fail("only 2-D pooling (rank-4 NCHW input) is supported");
    if (n.outputName(1).size())
      n.fail("the Indices output of MaxPool is not supported");
    if (n.getInt("ceil_mode", 0) != 0)
      n.fail("ceil_mode=1 is not supported");
    auto dilations = n.getInts("dilations");
    if (dilations && llvm::any_of(*dilations, [](int64_t d) { return d != 1; }))
      n.fail("dilated pooling is not supported");
    SmallVector<int64_t> kernel = *n.getInts("kernel_shape");
    SmallVector<int64_t> strides = n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
    SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
    std::string autoPad = n.getString("auto_pad", "NOTSET");
    if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
      n.fail("kernel_shape/strides need 2 entries and pads 4");
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      for (int i = 0; i < 2; ++i) {
        int64_t in = typeOf(x).getDimSize(2 + i);
        int64_t out = (in + strides[i] - 1) / strides[i];
        int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + kernel[i] - in);
        int64_t small = total / 2, big = total - small;
        pads[i] = autoPad == "SAME_UPPER" ? small : big;
        pads[i + 2] = autoPad == "SAME_UPPER" ? big : small;
      }
    } else if (autoPad == "VALID") {
      pads = {0, 0, 0, 0};
    } else if (autoPad != "NOTSET") {
      n.fail("unknown auto_pad '" + autoPad + "'");
    }
    if (op == "MaxPool") {
      if (n.getInt("storage_order", 0) != 0)
        n.fail("storage_order=1 is not supported");
      setOut(0, check(createInferred<MaxPool2DOp>(b, loc, x, kernel, strides, pads, false)).getResult());
    } else {
      setOut(0, check(createInferred<AvgPool2DOp>(b, loc, x, kernel, strides, pads,
                                                   n.getInt("count_include_pad", 0) != 0))
                    .getResult());
    }
    return;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Value x = input(0);
    floatOnly(x);
    if (typeOf(x).getRank() < 3)
      n.fail("input must have rank >= 3");
    SmallVector<int64_t> dims;
    for (int64_t d = 2; d < typeOf(x).getRank(); ++d)
      dims.push_back(d);
    if (op == "GlobalAveragePool")
      setOut(0, check(createInferred<ReduceMeanOp>(b, loc, x, dims, true)).getResult());
    else
      setOut(0, check(createInferred<ReduceMaxOp>(b, loc, x, dims, true)).getResult());
    return;
  }

  // Normalization and softmax.
  if (op == "Softmax" || op == "LogSoftmax") {
    Value x = input(0);
    floatOnly(x);
    int64_t axis = normAxis(n, n.getInt("axis", -1), typeOf(x).getRank());
    if (op == "Softmax")
      setOut(0, SoftmaxOp::create(b, loc, x, axis));
    else
      setOut(0, LogSoftmaxOp::create(b, loc, x, axis));
    return;
  }
  if (op == "LayerNormalization") {
    Value x = input(0);
    floatOnly(x);
    auto xt = typeOf(x);
    int64_t axis = normAxis(n, n.getInt("axis", -1), xt.getRank());
    if (n.getInt("stash_type", 1) != 1)
      n.fail("stash_type other than float is not supported");
    if (n.outputName(1).size() || n.outputName(2).size()) {
      // Mean and 1/stddev over the normalized dimensions, kept as size 1.
      SmallVector<int64_t> dims;
      for (int64_t d = axis; d < xt.getRank(); ++d)
        dims.push_back(d);
      Value mean = check(createInferred<ReduceMeanOp>(b, loc, x, dims, true)).getResult();
      Value centered = SubOp::create(b, loc, x, broadcastTo(b, loc, mean, xt.getShape()));
      Value var = check(createInferred<ReduceMeanOp>(
                            b, loc, MulOp::create(b, loc, centered, centered).getResult(), dims, true))
                      .getResult();
      Value inv = RsqrtOp::create(
          b, loc, AddOp::create(b, loc, var, splat(var, n.getFloat("epsilon", 1e-5f))));
      setOut(1, mean);
      setOut(2, inv);
    }
    SmallVector<int64_t> normShape(xt.getShape().drop_front(axis));
    auto paramType = RankedTensorType::get(normShape, xt.getElementType());
    auto fit = [&](Value v) {
      if (typeOf(v).getShape() == ArrayRef<int64_t>(normShape))
        return v;
      auto s = broadcastShapes(typeOf(v).getShape(), normShape);
      if (!s || ArrayRef<int64_t>(*s) != ArrayRef<int64_t>(normShape))
        n.fail("scale/bias shape " + shapeStr(typeOf(v).getShape()) +
               " does not broadcast to the normalized shape " + shapeStr(normShape));
      return broadcastTo(b, loc, v, normShape);
    };
    Value scale = fit(input(1));
    Value bias = n.hasInput(2) ? fit(input(2)) : splatConstant(b, loc, paramType, 0.0);
    setOut(0, LayerNormOp::create(b, loc, x, scale, bias, b.getI64IntegerAttr(axis),
                                  b.getF32FloatAttr(n.getFloat("epsilon", 1e-5f))));
    return;
  }
  if (op == "BatchNormalization") {
    Value x = input(0);
    floatOnly(x);
    float eps = n.getFloat("epsilon", 1e-5f);
    Value mean = input(3), var = input(4);
    if (n.getInt("training_mode", 0) != 0) {
      auto stats = check(createInferred<BatchNormStatsOp>(b, loc, x));
      mean = stats.getMean();
      var = stats.getVariance();
      if (n.outputName(1).size() || n.outputName(2).size()) {
        // Running statistics: momentum * running + (1 - momentum) * batch.
        float m = n.getFloat("momentum", 0.9f);
        auto blend = [&](Value running, Value batch) {
          return AddOp::create(b, loc,
                               MulOp::create(b, loc, running, splat(running, m)),
                               MulOp::create(b, loc, batch, splat(batch, 1.0 - m)))
              .getResult();
        };
        setOut(1, blend(input(3), mean));
        setOut(2, blend(input(4), var));
      }
    } else if (n.outputName(1).size() || n.outputName(2).size()) {
      n.fail("running-statistics outputs need training_mode=1");
    }
    setOut(0, BatchNormOp::create(b, loc, x, input(1), input(2), mean, var,
                                  b.getF32FloatAttr(eps)));
    return;
  }
  if (op == "Dropout") {
    Value x = input(0);
    bool training = false;
    if (n.hasInput(2)) {
      auto t = getConst(n.inputName(2));
      if (!t)
        n.fail("training_mode must be a compile-time constant");
      training = !t->values.empty() && t->values[0] != 0;
    }
    double ratio = 0.5;
    if (n.hasInput(1)) {
      auto r = getConst(n.inputName(1));
      if (!r)
        n.fail("ratio must be a compile-time constant");
      ratio = r->values.at(0);
    }
    if (n.outputName(1).size())
      n.fail("the mask output of Dropout is not supported");
    if (!training || ratio == 0.0) {
      // Inference mode: the identity.
      setOut(0, x);
      return;
    }
    if (!rngSeed) {
      auto seedType = RankedTensorType::get({}, b.getI64Type());
      argTypes.push_back(seedType);
      argAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(kRngSeedAttr, b.getUnitAttr())));
      rngSeed = entry->addArgument(seedType, NameLoc::get(b.getStringAttr("rng_seed")));
    }
    setOut(0, DropoutOp::create(b, loc, x, rngSeed, b.getF32FloatAttr(ratio),
                                b.getI64IntegerAttr(dropoutStreams++)));
    return;
  }
  if (op == "SoftmaxCrossEntropyLoss") {
    Value logits = input(0), labels = input(1);
    floatOnly(logits);
    if (n.hasInput(2))
      n.fail("the class-weight input is not supported");
    if (n.outputName(1).size())
      n.fail("the log_prob output is not supported");
    std::string red = n.getString("reduction", "mean");
    Reduction reduction = red == "mean" ? Reduction::Mean
                          : red == "sum" ? Reduction::Sum
                          : red == "none" ? Reduction::None
                                          : (n.fail("unknown reduction '" + red + "'"), Reduction::Mean);
    IntegerAttr ignore;
    if (auto *a = n.attr("ignore_index"))
      ignore = b.getI64IntegerAttr(a->i());
    setOut(0, check(createInferred<CrossEntropyOp>(b, loc, logits, labels, reduction, ignore)).getResult());
    return;
  }

  // Reductions.
  if (op.rfind("Reduce", 0) == 0) {
    Value x = input(0);
    auto xt = typeOf(x);
    if (xt.getElementType().isInteger(1))
      n.fail("a reduction of bool values is not supported (Loom's reductions "
             "take numbers)");
    SmallVector<int64_t> axes;
    bool fromInput = op == "ReduceSum" || opset >= 18;
    if (fromInput && n.hasInput(1))
      axes = constInts(1, "axes");
    else if (!fromInput)
      axes = n.getInts("axes").value_or(SmallVector<int64_t>{});
    bool keep = n.getInt("keepdims", 1) != 0;
    if (axes.empty()) {
      if (n.getInt("noop_with_empty_axes", 0) != 0) {
        setOut(0, x);
        return;
      }
      for (int64_t d = 0; d < xt.getRank(); ++d)
        axes.push_back(d);
    }
    for (int64_t &a : axes)
      a = normAxis(n, a, xt.getRank());
    llvm::sort(axes);
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    auto reduce = [&](StringRef kind, Value v) -> Value {
      if (kind == "sum")
        return check(createInferred<ReduceSumOp>(b, loc, v, axes, keep)).getResult();
      if (kind == "mean")
        return check(createInferred<ReduceMeanOp>(b, loc, v, axes, keep)).getResult();
      if (kind == "max")
        return check(createInferred<ReduceMaxOp>(b, loc, v, axes, keep)).getResult();
      return check(createInferred<ReduceMinOp>(b, loc, v, axes, keep)).getResult();
    };
    Value y;
    if (op == "ReduceSum")
      y = reduce("sum", x);
    else if (op == "ReduceMean")
      y = reduce("mean", x);
    else if (op == "ReduceMax")
      y = reduce("max", x);
    else if (op == "ReduceMin")
      y = reduce("min", x);
    else if (op == "ReduceSumSquare")
      y = reduce("sum", MulOp::create(b, loc, x, x));
    else if (op == "ReduceL1")
      y = reduce("sum", AbsOp::create(b, loc, x));
    else if (op == "ReduceL2") {
      floatOnly(x);
      y = SqrtOp::create(b, loc, reduce("sum", MulOp::create(b, loc, x, x)));
    } else if (op == "ReduceLogSum") {
      floatOnly(x);
      y = LogOp::create(b, loc, reduce("sum", x));
    } else if (op == "ReduceLogSumExp") {
      floatOnly(x);
      // Stable: max + log(sum(exp(x - max))).
      bool savedKeep = keep;
      keep = true;
      Value m = reduce("max", x);
      Value mb = broadcastTo(b, loc, m, xt.getShape());
      keep = savedKeep;
      Value s = reduce("sum", ExpOp::create(b, loc, SubOp::create(b, loc, x, mb)));
      Value mk = keep ? m : ReshapeOp::create(b, loc, typeOf(s), m).getResult();
      y = AddOp::create(b, loc, LogOp::create(b, loc, s), mk);
    } else {
      n.fail("unsupported reduction");
    }
    setOut(0, y);
    return;
  }

  // Data movement.
  auto reshapeTo = [&](Value x, ArrayRef<int64_t> shape) -> Value {
    auto xt = typeOf(x);
    auto type = RankedTensorType::get(shape, xt.getElementType());
    if (type.getNumElements() != xt.getNumElements())
      n.fail("cannot reshape " + shapeStr(xt.getShape()) + " to " + shapeStr(shape));
    if (auto c = getConst(n.inputName(0))) {
      ConstTensor r = *c;
      r.shape.assign(shape.begin(), shape.end());
      defineConst(n.outputName(0), r);
      return nullptr;
    }
    return type == xt ? x : ReshapeOp::create(b, loc, type, x).getResult();
  };
  auto finishReshape = [&](Value v) {
    if (v)
      setOut(0, v);
  };
  if (op == "Reshape") {
    Value x = input(0);
    auto xt = typeOf(x);
    SmallVector<int64_t> shape = constInts(1, "shape");
    bool allowZero = n.getInt("allowzero", 0) != 0;
    int64_t known = 1, inferIdx = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowZero) {
        if (static_cast<int64_t>(i) >= xt.getRank())
          n.fail("shape entry 0 at position " + Twine(i) + " has no input dimension to copy");
        shape[i] = xt.getDimSize(i);
      }
      if (shape[i] == -1) {
        if (inferIdx >= 0)
          n.fail("more than one -1 in shape " + shapeStr(shape));
        inferIdx = i;
      } else if (shape[i] < 0) {
        n.fail("negative dimension in shape " + shapeStr(shape));
      } else {
        known *= shape[i];
      }
    }
    if (inferIdx >= 0) {
      if (known == 0 || xt.getNumElements() % known != 0)
        n.fail("cannot reshape " + shapeStr(xt.getShape()) + " to " + shapeStr(shape));
      shape[inferIdx] = xt.getNumElements() / known;
    }
    finishReshape(reshapeTo(x, shape));
    return;
  }
  if (op == "Flatten") {
    Value x = input(0);
    auto xt = typeOf(x);
    int64_t axis = n.getInt("axis", 1);
    if (axis < 0)
      axis += xt.getRank();
    if (axis < 0 || axis > xt.getRank())
      n.fail("axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer *= xt.getDimSize(i);
    finishReshape(reshapeTo(x, {outer, outer ? xt.getNumElements() / outer : 0}));
    return;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    Value x = input(0);
    auto xt = typeOf(x);
    SmallVector<int64_t> axes;
    if (n.hasInput(1))
      axes = constInts(1, "axes");
    else if (auto a = n.getInts("axes"))
      axes = *a;
    SmallVector<int64_t> shape;
    if (op == "Unsqueeze") {
      int64_t outRank = xt.getRank() + axes.size();
      for (int64_t &a : axes)
        a = normAxis(n, a, outRank);
      llvm::sort(axes);
      if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
        n.fail("repeated axis");
      auto it = xt.getShape().begin();
      for (int64_t i = 0; i < outRank; ++i)
        shape.push_back(llvm::is_contained(axes, i) ? 1 : *it++);
    } else {
      for (int64_t &a : axes)
        a = normAxis(n, a, xt.getRank());
      for (int64_t i = 0; i < xt.getRank(); ++i) {
        bool drop = axes.empty() ? xt.getDimSize(i) == 1 : llvm::is_contained(axes, i);
        if (drop && xt.getDimSize(i) != 1)
          n.fail("cannot squeeze dimension " + Twine(i) + " of size " + Twine(xt.getDimSize(i)));
        if (!drop)
          shape.push_back(xt.getDimSize(i));
      }
    }
    finishReshape(reshapeTo(x, shape));
    return;
  }
  if (op == "Transpose") {
    Value x = input(0);
    int64_t rank = typeOf(x).getRank();
    SmallVector<int64_t> perm;
    if (auto p = n.getInts("perm"))
      perm = *p;
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    setOut(0, check(createInferred<TransposeOp>(b, loc, x, perm)).getResult());
    return;
  }
  if (op == "Expand") {
    Value x = input(0);
    SmallVector<int64_t> shape = constInts(1, "shape");
    auto out = broadcastShapes(typeOf(x).getShape(), shape);
    if (!out)
      n.fail("cannot expand " + shapeStr(typeOf(x).getShape()) + " to " + shapeStr(shape));
    setOut(0, broadcastTo(b, loc, x, *out));
    return;
  }
  if (op == "Tile") {
    Value x = input(0);
    SmallVector<int64_t> reps = constInts(1, "repeats");
    if (static_cast<int64_t>(reps.size()) != typeOf(x).getRank())
      n.fail("repeats needs one entry per dimension");
    Value y = x;
    for (auto [d, r] : llvm::enumerate(reps)) {
      if (r < 1)
        n.fail("repeats must be positive");
      if (r == 1)
        continue;
      SmallVector<Value> parts(r, y);
      y = check(createInferred<ConcatOp>(b, loc, parts, static_cast<int64_t>(d))).getResult();
    }
    setOut(0, y);
    return;
  }
  if (op == "Concat") {
    SmallVector<Value> parts;
    for (int i = 0; i < n.numInputs(); ++i)
      if (n.hasInput(i))
        parts.push_back(input(i));
    if (parts.empty())
      n.fail("no inputs");
    int64_t axis = normAxis(n, n.getInt("axis", 0), typeOf(parts[0]).getRank());
    // Zero-sized inputs contribute nothing.
    SmallVector<Value> nonEmpty;
    for (Value v : parts)
      if (typeOf(v).getNumElements() != 0)
        nonEmpty.push_back(v);
    if (nonEmpty.empty())
      nonEmpty.push_back(parts[0]);
    setOut(0, check(createInferred<ConcatOp>(b, loc, nonEmpty, axis)).getResult());
    return;
  }
  if (op == "Split") {
    Value x = input(0);
    auto xt = typeOf(x);
    int64_t axis = normAxis(n, n.getInt("axis", 0), xt.getRank());
    SmallVector<int64_t> sizes;
    if (n.hasInput(1))
      sizes = constInts(1, "split");
    else if (auto s = n.getInts("split"))
      sizes = *s;
    int64_t numOut = node.output_size();
    if (sizes.empty()) {
      int64_t total = xt.getDimSize(axis);
      int64_t chunk = (total + numOut - 1) / numOut;
      for (int64_t i = 0; i < numOut; ++i)
        sizes.push_back(std::min(chunk, total - i * chunk));
    }
    if (static_cast<int64_t>(sizes.size()) != numOut)
      n.fail("split sizes do not match the number of outputs");
    int64_t offset = 0;
    for (int64_t i = 0; i < numOut; ++i) {
      SmallVector<int64_t> start(xt.getRank(), 0), limit(xt.getShape()),
          stride(xt.getRank(), 1);
      start[axis] = offset;
      limit[axis] = offset + sizes[i];
      offset += sizes[i];
      if (sizes[i] < 0 || offset > xt.getDimSize(axis))
        n.fail("split sizes exceed dimension " + Twine(axis));
      setOut(i, check(createInferred<SliceOp>(b, loc, x, start, limit, stride)).getResult());
    }
    if (offset != xt.getDimSize(axis))
      n.fail("split sizes sum to " + Twine(offset) + ", not " + Twine(xt.getDimSize(axis)));
    return;
  }
  if (op == "Slice") {
    Value x = input(0);
    auto xt = typeOf(x);
    int64_t rank = xt.getRank();
    SmallVector<int64_t> starts = constInts(1, "starts"), ends = constInts(2, "ends");
    SmallVector<int64_t> axes, steps;
    if (n.hasInput(3))
      axes = constInts(3, "axes");
    else
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(i);
    if (n.hasInput(4))
      steps = constInts(4, "steps");
    else
      steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size())
      n.fail("starts, ends, axes and steps must have the same length");
    SmallVector<int64_t> start(rank, 0), limit(xt.getShape()), stride(rank, 1);
    SmallVector<int64_t> reversed;
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t a = normAxis(n, axes[i], rank), dim = xt.getDimSize(a);
      int64_t st = steps[i];
      if (st == 0)
        n.fail("step 0");
      int64_t s = starts[i], e = ends[i];
      if (st > 0) {
        s = s < 0 ? std::max<int64_t>(0, s + dim) : std::min(s, dim);
        e = e < 0 ? std::max<int64_t>(0, e + dim) : std::min(e, dim);
        start[a] = s;
        limit[a] = std::max(s, e);
        stride[a] = st;
      } else {
        // A negative step walks backwards: slice forwards over the same
        // elements, then reverse this axis with a gather.
        s = s < 0 ? std::max<int64_t>(-1, s + dim) : std::min(s, dim - 1);
        e = e < 0 ? std::max<int64_t>(-1, e + dim) : std::min(e, dim - 1);
        if (s <= e) {
          start[a] = 0;
          limit[a] = 0;
        } else {
          int64_t count = (s - e + (-st) - 1) / (-st);
          int64_t last = s - (count - 1) * (-st);
          start[a] = last;
          limit[a] = s + 1;
          stride[a] = -st;
          reversed.push_back(a);
        }
      }
    }
    Value y = check(createInferred<SliceOp>(b, loc, x, start, limit, stride)).getResult();
    for (int64_t a : reversed) {
      int64_t size = typeOf(y).getDimSize(a);
      ConstTensor idx{{size}, b.getI64Type(), {}};
      for (int64_t i = size - 1; i >= 0; --i)
        idx.values.push_back(static_cast<double>(i));
      y = check(createInferred<GatherOp>(b, loc, y, materialize(idx, loc), a)).getResult();
    }
    setOut(0, y);
    return;
  }
  if (op == "Gather") {
    Value data = input(0), indices = input(1);
    int64_t axis = normAxis(n, n.getInt("axis", 0), typeOf(data).getRank());
    if (auto c = getConst(n.inputName(1))) {
      int64_t size = typeOf(data).getDimSize(axis);
      for (double v : c->values)
        if (v < -size || v >= size)
          n.fail("index " + Twine(static_cast<int64_t>(v)) +
                 " is out of range for dimension of size " + Twine(size));
    }
    setOut(0, check(createInferred<GatherOp>(b, loc, data, indices, axis)).getResult());
    return;
  }
  if (op == "Range" || op == "ConstantOfShape" || op == "Shape" ||
      op == "Size") {
    for (int i = 0; i < n.numInputs(); ++i)
      if (failedValues.contains(n.inputName(i)))
        throw ImportFailure{}; // reported at the node that failed
    n.fail("inputs must be compile-time constants; Loom needs static shapes");
  }

  n.fail("conversion is not implemented");
}

OwningOpRef<ModuleOp> loom::importOnnxModel(StringRef path, MLIRContext &ctx,
                                            ParameterStore &params,
                                            const OnnxImportOptions &options) {
  try {
    OnnxImporter importer(path, ctx, params, options);
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

