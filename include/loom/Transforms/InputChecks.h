//===- InputChecks.h - loom-input-checks' argument attribute ---*- C++ -*-===//
//
// The argument attribute `loom-input-checks` writes and the plan reads: an
// array of {min, max, ignore?, op} dictionaries, the values an integer
// input must hold (docs/plan-format.md, "checks").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_INPUTCHECKS_H
#define LOOM_TRANSFORMS_INPUTCHECKS_H

#include "llvm/ADT/StringRef.h"

namespace loom {
inline constexpr llvm::StringLiteral kInputChecksAttr = "loom.input_checks";
} // namespace loom

#endif // LOOM_TRANSFORMS_INPUTCHECKS_H
