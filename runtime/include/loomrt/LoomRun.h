//===- LoomRun.h - The loom-run command line, as a library function -------===//
//
// tools/loom-run.cpp is a one-line main over loomRunMain, so that the command
// line can be tested (and embedded) without spawning a process.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LOOMRUN_H
#define LOOMRT_LOOMRUN_H

#include <cstdio>
#include <string>
#include <vector>

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

/// The names (without "--") of every flag loom-run takes, from its one
/// flag table, in the table's order (for the test that --help and
/// docs/loom-run.md describe exactly these).
std::vector<std::string> loomRunFlags();

} // namespace loomrt

#endif // LOOMRT_LOOMRUN_H
