//===- LoomOps.h - Operations of the loom dialect ---------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomInterfaces.h"

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.h.inc"

namespace loom {

/// On a convolution (`loom.conv2d` and its two gradients): the plan runs
/// it as a library call (a `conv` step: oneDNN on the CPU) rather than as
/// a generated kernel. Set by `loom-conv-to-gemm` with `library-convs`.
constexpr llvm::StringLiteral kLibraryCallAttr = "loom.library_call";

/// On a fused attention (`loom.attention`, `loom.attention_grad`): it runs
/// as a generated kernel (the CUDA target) rather than as the plan's
/// `attention` step. Set by `loom-attention-kernels`.
constexpr llvm::StringLiteral kGeneratedKernelAttr = "loom.generated_kernel";

/// The collectives (`loom.all_reduce`, ...): plan `collective` steps.
inline bool isCollective(mlir::Operation *op) {
  return mlir::isa<AllReduceOp, ReduceScatterOp, AllGatherOp, RankSliceOp>(op);
}

/// Ops the plan runs itself as library calls (BLAS/cuBLASLt GEMMs, oneDNN
/// convolutions, the runtime's fused attention and language-model head) or
/// collectives, which loom-fuse leaves outside the kernels. A fused
/// attention marked `loom.generated_kernel` is a kernel instead.
inline bool isLibraryCall(mlir::Operation *op) {
  if (mlir::isa<MatmulOp, LinearCrossEntropyOp, LinearCrossEntropyGradOp>(
          op) ||
      isCollective(op))
    return true;
  if (mlir::isa<AttentionOp, AttentionGradOp>(op))
    return !op->hasAttr(kGeneratedKernelAttr);
  return mlir::isa<Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp>(op) &&
         op->hasAttr(kLibraryCallAttr);
}

/// The device mesh of an SPMD module (its ranks run the same program):
/// `loom.mesh_axes` names the axes, `loom.mesh_shape` gives their sizes.
constexpr llvm::StringLiteral kMeshAxesAttr = "loom.mesh_axes";
constexpr llvm::StringLiteral kMeshShapeAttr = "loom.mesh_shape";

/// One axis of a mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

/// The mesh of `module` (empty when it has none: one device), or failure
/// with an error at the module when the attributes are malformed.
mlir::FailureOr<std::vector<MeshAxis>> getMesh(mlir::ModuleOp module);

/// Sets `module`'s mesh.
void setMesh(mlir::ModuleOp module, llvm::ArrayRef<MeshAxis> mesh);

/// The size of the axis called `axis` in the mesh of the module around
/// `op`, or 0 when there is no such module, mesh or axis.
int64_t meshAxisSize(mlir::Operation *op, llvm::StringRef axis);

/// The runtime's name of a tensor element type as plan.json writes it
/// (f32, f64, f16, bf16, i64, i32, i8, bool), or "" for any other.
std::string dtypeName(mlir::Type elementType);

/// The name of the model node `loc` comes from (the ONNX node's or the JSON
/// node's id: a NameLoc, or the first one in a FusedLoc or call site), or
/// "" when it has none.
std::string nodeName(mlir::Location loc);

/// A shape as `[2, 3]`, for the verifiers' diagnostics.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
