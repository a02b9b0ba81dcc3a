//===- Plan.h - plan.json, the host side of an artifact ---------*- C++ -*-===//

#ifndef LOOM_TARGET_PLAN_H
#define LOOM_TARGET_PLAN_H

#include "loom/Codegen/KernelInfo.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace loom {

/// What plan.json says about the target and its code.
struct PlanTarget {
  std::string target = "cpu"; // cpu or cuda
  std::string kernels;        // file in the artifact, empty: null
  std::string ptx;            // cuda: PTX file, empty: null
  int sm = 0;                 // cuda: the cubin's architecture (e.g. 90)
  const KernelInfoMap *kernelInfo = nullptr; // scratch (and launches)
};

/// Writes plan.json for the fused, planned `module` (docs/plan-format.md).
mlir::LogicalResult writePlan(mlir::ModuleOp module, const std::string &path,
                              const PlanTarget &target,
                              const std::string &sourceModel,
                              std::string &error);

} // namespace loom

#endif // LOOM_TARGET_PLAN_H
