//===- LoomRun.h - The loom-run command line, as a library function -------===//
//
// tools/loom-run.cpp is a one-line main over loomRunMain, so that the command
// line can be tested (and embedded) without spawning a process.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LOOMRUN_H
#define LOOMRT_LOOMRUN_H

#include <cstdio>

namespace loomrt {

/// Exit statuses of loom-run.
enum LoomRunExit : int {
  kExitOk = 0,
  kExitFailure = 1, ///< the artifact, data or a file was unusable
  kExitUsage = 2,   ///< the command line was wrong
};

/// Runs loom-run with `argv` (argv[0] is the program name). Writes results
/// and notes to `out`/`err` (null: stdout/stderr). Returns the exit status.
int loomRunMain(int argc, const char *const *argv, std::FILE *out = nullptr,
                std::FILE *err = nullptr) noexcept;

} // namespace loomrt

#endif // LOOMRT_LOOMRUN_H
