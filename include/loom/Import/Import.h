//===- Import.h - Model importers (ONNX, JSON) ------------------*- C++ -*-===//
//
// Importers turn a model file into `func.func @forward` in the loom dialect.
// Parameters become function arguments marked `loom.param = "<name>"`; their
// values are collected in a ParameterStore and written beside the IR as a
// safetensors file, never into the IR. Every failure is an MLIR diagnostic
// (with the model's node name as location) and a null module.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_IMPORT_H
#define LOOM_IMPORT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// The initial value of one parameter, row-major little-endian bytes.
struct ParameterTensor {
  std::string name;
  mlir::RankedTensorType type;
  std::vector<uint8_t> data;
  /// All zeros, with `data` empty: written without ever holding the bytes
  /// (optimizer state, which would otherwise take twice the weights' memory
  /// under Adam).
  bool zeros = false;
};

/// Parameter values gathered by an importer.
class ParameterStore {
public:
  void add(ParameterTensor tensor) { tensors.push_back(std::move(tensor)); }
  const std::vector<ParameterTensor> &getTensors() const { return tensors; }
  int64_t getTotalBytes() const;
  /// Writes every tensor to a safetensors file (atomically). On failure
  /// returns false and sets `error`.
  bool writeSafetensors(llvm::StringRef path, std::string &error) const;

private:
  std::vector<ParameterTensor> tensors;
};

/// Name of the module attribute that records the parameter file's name.
inline constexpr llvm::StringLiteral kParamsFileAttr = "loom.params_file";
/// Name of the argument attribute that marks a parameter.
inline constexpr llvm::StringLiteral kParamAttr = "loom.param";
/// Name of the argument attribute that marks a model input.
inline constexpr llvm::StringLiteral kInputAttr = "loom.input";
/// Name of the argument attribute that marks the dropout seed.
inline constexpr llvm::StringLiteral kRngSeedAttr = "loom.rng_seed";
/// Name of the result attribute that names a model output.
inline constexpr llvm::StringLiteral kOutputAttr = "loom.output";
/// Name of the result attribute naming the parameter (or input) a gradient
/// belongs to.
inline constexpr llvm::StringLiteral kGradAttr = "loom.grad";
/// Name of the argument attribute that marks optimizer state
/// (`<param>.<slot>`).
inline constexpr llvm::StringLiteral kOptStateAttr = "loom.opt_state";
/// Name of the argument attribute giving the initial value (an elements
/// attribute) of an optimizer-state argument; state without it starts at 0.
inline constexpr llvm::StringLiteral kInitAttr = "loom.init";
/// The optimizer state that holds the loss scale (fp16 training): the
/// backward's seed, and loom-optimizer's dynamic loss scaling.
inline constexpr llvm::StringLiteral kLossScaleName = "loss_scale";
/// Name of the argument attribute that marks a buffer: a tensor of the model
/// that training updates but no optimizer touches (BatchNorm's running
/// statistics). On a result, it marks the buffer's new value.
inline constexpr llvm::StringLiteral kBufferAttr = "loom.buffer";

/// Name of the argument/result attribute that marks a rank's shard of a
/// tensor (loomc --zero): `{axis = "dp", shape = [full shape]}`; the value is
/// block r (r: the rank's coordinate along `axis`) of the tensor flattened
/// row-major and zero-padded to n equal blocks (n: the axis's size).
inline constexpr llvm::StringLiteral kShardAttr = "loom.shard";
/// On a model's matmul or gather (JSON node field "tp"): "split" (tensor
/// parallelism must split this layer) or "whole" (it must not).
inline constexpr llvm::StringLiteral kTensorParallelChoiceAttr = "loom.tp";
/// On a collective that reduces a parameter's gradient over the
/// data-parallel ranks (loom-optimizer): the parameter's name. The plan's
/// collective step carries it as "grad".
inline constexpr llvm::StringLiteral kGradientOfAttr = "loom.grad_of";
/// On the module: the gradient compression the runtime applies to those
/// reductions (loomc --grad-compression; the plan's "grad_compression").
inline constexpr llvm::StringLiteral kGradCompressionAttr =
    "loom.grad_compression";
/// On the module: loom-pipeline-stages' stages, boundaries and action lists
/// (the plan's "pipeline", docs/pipeline.md).
inline constexpr llvm::StringLiteral kPipelineAttr = "loom.pipeline";
/// On the ops of a model node that starts a pipeline stage (JSON node field
/// "pp_stage_start": true; loom-pipeline-stages cuts before the node).
inline constexpr llvm::StringLiteral kPipelineStageStartAttr =
    "loom.pp_stage_start";

/// How the ONNX importer treats BatchNormalization's running statistics.
enum class BatchNormMode {
  /// Batch statistics when the node trains: `training_mode = 1`, or a node
  /// PyTorch's exporter traced from a module in training mode (its
  /// `pkg.torch.onnx.fx_node` metadata names the training op); else frozen.
  Auto,
  /// Every BatchNormalization whose statistics are initializers trains.
  Batch,
  /// Running statistics are constants (fine-tuning with frozen BatchNorm).
  Frozen,
};

/// Options of the ONNX importer.
struct OnnxImportOptions {
  /// Graph inputs to specialize on: input name -> a file holding one
  /// serialized onnx.TensorProto. Such an input becomes a compile-time
  /// constant (how shape-carrying inputs get static values).
  std::vector<std::pair<std::string, std::string>> boundInputs;
  /// Which BatchNormalization nodes train with batch statistics; their
  /// running statistics become `loom.buffer` arguments (updated by the
  /// training step, saved with the parameters).
  BatchNormMode batchNorm = BatchNormMode::Auto;
};

/// Imports an ONNX model. Opsets 13 and later are imported directly; older
/// models are first converted to opset 13 with ONNX's version converter.
/// External tensor data must lie inside the model's folder.
/// The ONNX ops (default domain) the importer maps, sorted.
std::vector<llvm::StringRef> supportedOnnxOps();

mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(llvm::StringRef path, mlir::MLIRContext &context,
                ParameterStore &params, const OnnxImportOptions &options = {});

/// Imports a graph in Loom's JSON format (docs/json-format.md).
mlir::OwningOpRef<mlir::ModuleOp> importJsonGraph(llvm::StringRef path,
                                                  mlir::MLIRContext &context,
                                                  ParameterStore &params);

} // namespace loom

#endif // LOOM_IMPORT_IMPORT_H
