//===- PlanPipeline.h - The `pipeline` section of plan.json -----*- C++ -*-===//
//
// parsePlan's part for pipeline parallelism (docs/pipeline.md, "In
// plan.json"): the stages, boundaries and action lists, the lists checked
// by pp::checkSchedule, and every stage's entries checked against the
// boundaries. Internal to libloomrt.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_PLANPIPELINE_H
#define LOOMRT_SRC_PLANPIPELINE_H

#include "loomrt/ErrorCode.h"
#include "loomrt/Plan.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace loomrt::detail {

/// Reads `value` (the top-level `pipeline`) into `plan.pipeline`, after
/// the mesh and the entries were parsed. On failure: false, a message that
/// starts with `what` and names the field, entry or token, and its code
/// (Format).
bool parsePipeline(const nlohmann::json &value, Plan &plan,
                   const std::string &what, std::string *error,
                   ErrorCode *code);

/// "<where>: field '<key>'", as plan errors name a field (shared with
/// Plan.cpp).
std::string fieldWhere(const std::string &where, const char *key);

/// A JSON value's type for messages: "integer", "non-integer number",
/// "string", ... (shared with Plan.cpp).
const char *typeName(const nlohmann::json &value);

/// Whether `name` is "pp.b<b>.<i>" (a boundary tensor) or
/// "pp.b<b>.<i>.grad" (`*grad`: its gradient), and which.
bool parseBoundaryName(const std::string &name, int64_t *b, int64_t *i,
                       bool *grad);

} // namespace loomrt::detail

#endif // LOOMRT_SRC_PLANPIPELINE_H
