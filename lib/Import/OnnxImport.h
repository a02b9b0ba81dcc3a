//===- OnnxImport.h - Internals of the ONNX importer ------------*- C++ -*-===//
//
// Shared by the files of the ONNX importer only (not a public header): the
// importer's state (OnnxImporter), compile-time tensors (ConstTensor), one
// node's view of its inputs and attributes (NodeCtx), and the per-node
// converter (OnnxNode) whose handlers, one per ONNX op or op family, live in
// OnnxOps*.cpp and are found through onnxHandlers(). libonnx and protobuf
// throw, so these files are built with exceptions; nothing thrown leaves
// importOnnxModel (OnnxImporter.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNXIMPORT_H
#define LOOM_LIB_IMPORT_ONNXIMPORT_H

#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/onnx_pb.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::onnx_import {

using namespace mlir;

/// Thrown inside the importer only, to unwind a node conversion after its
/// diagnostic has been emitted.
struct ImportFailure {};

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

ConstTensor attrToConst(DenseElementsAttr attr);
DenseElementsAttr constToAttr(const ConstTensor &c);

struct NodeCtx;

/// What the float initializers that are not parameters are.
struct InitializerRoles {
  llvm::StringSet<> frozen;  ///< imported as constants
  llvm::StringSet<> buffers; ///< `loom.buffer` arguments
};
InitializerRoles classifyInitializers(const onnx::GraphProto &graph,
                                      BatchNormMode mode);
bool batchNormTrains(const onnx::NodeProto &node, BatchNormMode mode);

/// One model's import: loading and checking, values by ONNX name, the
/// function being built.
class OnnxImporter {
  friend class OnnxNode;

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
  bool checkConstantSizes();

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
  ConstTensor convertConstant(const NodeCtx &n);

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
  /// Initializers imported as `loom.buffer` arguments.
  llvm::StringSet<> buffers;
  /// The `loom.rng_seed` argument, added at the first random op.
  Value seedArgument();
  Value rngSeed;
  /// The next `stream` of a dropout or random op (one per op).
  int64_t dropoutStreams = 0;
  /// Dropout nodes with a ratio above 0 that are the identity because they
  /// have no training_mode input (their location and name), and the
  /// warning about them when other dropouts of the model train.
  SmallVector<std::pair<Location, std::string>> inferenceDropouts;
  void warnInferenceDropouts();
  /// Warns where normalization nodes share a parameter initializer (what
  /// PyTorch's optimizing exporter makes of equal ones).
  void warnMergedNormParameters(const onnx::GraphProto &graph);
  /// Warns where PyTorch's optimizing exporter folded batch norms into
  /// convolutions (their statistics, and in training mode the batch
  /// statistics the module normalizes with, are gone); records them on
  /// `module` (loom.folded_batch_norms) for --report.
  void warnFoldedBatchNorms(const onnx::GraphProto &graph, ModuleOp module);
  func::FuncOp func;
  Block *entry = nullptr;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
};

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

inline RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Normalizes a possibly negative axis against `rank`; fails the node if
/// it is out of range.
int64_t normAxis(const NodeCtx &n, int64_t axis, int64_t rank);

/// The most elements a constant folded at import may have (about 8 MiB of
/// float32): larger ones are the model's to compute.
constexpr int64_t kMaxFoldElements = int64_t(1) << 20;

/// The element count of a folded constant of `shape`; fails the node on a
/// negative dimension or more than kMaxFoldElements elements.
int64_t checkFoldSize(const NodeCtx &n, ArrayRef<int64_t> shape);

/// The element count of Range(start, limit, delta); fails the node on a zero
/// delta or more than kMaxFoldElements elements.
int64_t checkRangeSize(const NodeCtx &n, double start, double limit,
                       double delta);

/// Transpose's `perm` (default: the dimensions reversed), normalized; fails
/// the node if it has not one entry per dimension.
SmallVector<int64_t> transposePerm(const NodeCtx &n, int64_t rank);

/// The values of constant `c` broadcast (numpy rules) to `shape`.
std::vector<double> broadcastConst(const ConstTensor &c,
                                   ArrayRef<int64_t> shape);

/// Converts one node: its inputs, outputs and the helpers every handler
/// uses (each failure is a diagnostic naming the node, then ImportFailure).
class OnnxNode {
public:
  OnnxNode(OnnxImporter &imp, const onnx::NodeProto &node);

  OnnxImporter &imp;
  const onnx::NodeProto &node;
  const std::string &op;
  NodeCtx n;
  Location loc;
  OpBuilder &b;

  /// Input `i` as a value (a constant is materialized).
  Value input(int i);
  /// Input `i` as compile-time integers (shapes, axes, sizes).
  SmallVector<int64_t> constInts(int i, StringRef what);
  /// Output `i` is `v`; checked against ONNX shape inference's type.
  void setOut(int i, Value v);
  Value splat(Value like, double value);
  void floatOnly(Value v);
  /// Reshape of input 0 (`x`) to `shape`: a constant stays a constant (and
  /// gives null); finishReshape then defines output 0 if a value was made.
  Value reshapeTo(Value x, ArrayRef<int64_t> shape);
  void finishReshape(Value v);
  /// Explicit 2-D `pads` for the node's `auto_pad`, given each spatial
  /// dimension's window extent and stride.
  void resolveAutoPad(Value x, ArrayRef<int64_t> extent,
                      ArrayRef<int64_t> strides,
                      SmallVectorImpl<int64_t> &pads);
  template <typename T> auto check(T result) {
    if (failed(result))
      throw ImportFailure{};
    return *result;
  }

  // Handlers, by family (OnnxOpsElementwise.cpp, OnnxOpsNN.cpp,
  // OnnxOpsShape.cpp).
  // Elementwise
  void convertVariadic();
  void convertPow();
  void convertPRelu();
  void convertCompare();
  void convertNot();
  void convertRelu();
  void convertNegAbs();
  void convertIdentity();
  void convertIsNaN();
  void convertGelu();
  void convertFloatUnary();
  void convertCast();
  void convertWhere();
  // NN
  void convertMatMul();
  void convertGemm();
  void convertConv();
  void convertPool();
  void convertGlobalPool();
  void convertSoftmax();
  void convertLayerNorm();
  void convertBatchNorm();
  void convertDropout();
  void convertRandom();
  void convertSoftmaxCrossEntropy();
  void convertReduce();
  // Shape
  void convertConstantNode();
  void convertLogical();
  void convertFoldOnly();
  void convertReshape();
  void convertFlatten();
  void convertSqueeze();
  void convertTranspose();
  void convertExpand();
  void convertTile();
  void convertConcat();
  void convertSplit();
  void convertSlice();
  void convertGather();
  void convertGatherND();
  void convertScatterND();
  void convertCumSum();
  void convertSplitToSequence();
  void convertSequenceAt();
  void convertGatherElements();
  void convertScatterElements();
  /// `data` [rows, slice] with its rows combined, in order, with the rows
  /// of `updates` [tuples, slice] that `sources[row]` lists: replaced by
  /// the last (`reduction` none) or combined by add, mul, max or min.
  Value scatterRows(Value data, Value updates,
                    const std::vector<SmallVector<int64_t, 1>> &sources,
                    StringRef reduction);
  /// The row of data of type `dt`, seen as [prod(dims[0, batch + k)),
  /// rest], that each index tuple of the run-time `idx` [..., k] addresses
  /// (its first `batch` dimensions those of the data; negative indices
  /// count from the end); past the end where one is out of range, where
  /// loom.gather and loom.scatter_add stop the step. i64, shaped like `idx`
  /// without its last dimension.
  Value tupleRowIndex(RankedTensorType dt, Value idx, int64_t batch);
  /// `data` [rows, slice] with the rows of `updates` [tuples, slice] sent
  /// to the run-time rows `rowIdx` [tuples]: added (`add`), or written
  /// (`none`, float data only: a row written twice becomes NaN, as ONNX
  /// and PyTorch leave it undefined); other reductions are refused.
  Value scatterRowsAtRunTime(Value data, Value updates, Value rowIdx,
                             StringRef reduction);
  /// `idx` (i64) with negative indices counted from the end of a
  /// dimension of `size`, and where the result is within [0, size).
  std::pair<Value, Value> wrapIndex(Value idx, int64_t size);
  /// The flat index into data of type `dt` of each element of `idx` (an
  /// index along `axis`, negative counting from the end), past the end
  /// where it is out of range; i64, shaped like `idx`.
  Value elementFlatIndex(RankedTensorType dt, Value idx, int64_t axis);
  void convertPad();
  void convertTrilu();
  void convertShapeOnly();
};

/// Checks ScatterND's shapes (the index depth k, the indices' last size,
/// in [1, rank]; `updatesShape` is indexShape[:-1] ++ dataShape[k:]) and
/// returns k; `rows` gets the rows (the first k dimensions' product) and
/// `slice` the elements per row of the data seen as [rows, slice].
int64_t scatterNDShapes(const NodeCtx &n, ArrayRef<int64_t> dataShape,
                        ArrayRef<int64_t> indexShape,
                        ArrayRef<int64_t> updatesShape, int64_t &rows,
                        int64_t &slice);

/// ScatterND's compile-time `indices` as the rows they write, the data
/// (of `dataShape`) seen as [rows, slice] with rows its first k dimensions
/// (k: the indices' last size): sources[row] lists the update slices
/// written there, in order (several where indices repeat). Checks the
/// indices' range and that `updatesShape` is indices.shape[:-1] ++
/// dataShape[k:]; `slice` gets the elements per row.
std::vector<SmallVector<int64_t, 1>>
scatterNDSources(const NodeCtx &n, ArrayRef<int64_t> dataShape,
                 const ConstTensor &indices, ArrayRef<int64_t> updatesShape,
                 int64_t &slice);

using OnnxHandler = void (OnnxNode::*)();
using OnnxHandlerTable = llvm::StringMap<OnnxHandler>;

/// Every ONNX op (default domain) the importer maps, with its handler. The
/// op list users see (`loomc --onnx-ops`, docs) is this table's keys.
const OnnxHandlerTable &onnxHandlers();
void addElementwiseHandlers(OnnxHandlerTable &table);
void addNNHandlers(OnnxHandlerTable &table);
void addShapeHandlers(OnnxHandlerTable &table);
void addIndexHandlers(OnnxHandlerTable &table);

} // namespace loom::onnx_import

#endif // LOOM_LIB_IMPORT_ONNXIMPORT_H
