//===- Passes.h - Loom's code-generation passes -----------------*- C++ -*-===//

#ifndef LOOM_CODEGEN_PASSES_H
#define LOOM_CODEGEN_PASSES_H

#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom {
#define GEN_PASS_DECL
#include "loom/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

#endif // LOOM_CODEGEN_PASSES_H
