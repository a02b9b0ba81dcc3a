//===- RankChecks.h - Checks counted per rank in programs run by mpirun ---===//
//
// The test programs run under mpirun have no GoogleTest: each check is
// counted, a failed one printed with this rank's number, and main() sums
// the failures over the world.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_RANKCHECKS_H
#define LOOMRT_TESTS_RANKCHECKS_H

#include <cstdio>
#include <string>

namespace loomrt::test {

/// This process's checks; `rank` names it in the messages (main() sets it
/// once MPI has started).
struct RankChecks {
  int failures = 0, checks = 0, rank = 0;
};
inline RankChecks rankChecks;

inline void check(bool ok, const std::string &what) {
  ++rankChecks.checks;
  if (!ok) {
    ++rankChecks.failures;
    std::fprintf(stderr, "rank %d: FAIL %s\n", rankChecks.rank, what.c_str());
  }
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_RANKCHECKS_H
