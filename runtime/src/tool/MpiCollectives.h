//===- MpiCollectives.h - Collectives over MPI, for loom-run ----*- C++ -*-===//
//
// loom-run under an MPI launcher (`mpirun -np N loom-run ...`): MPI is
// initialized, and the returned Collectives span MPI_COMM_WORLD. Built only
// where CMake found MPI (LOOMRT_HAVE_MPI); elsewhere the stub says so.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_TOOL_MPICOLLECTIVES_H
#define LOOMRT_SRC_TOOL_MPICOLLECTIVES_H

#include "loomrt/Collectives.h"

#include <memory>
#include <string>

namespace loomrt {

/// Whether an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one) started
/// this process, from its environment.
bool launchedByMpi() noexcept;

/// Initializes MPI and returns the world's collectives; null with `error`
/// when MPI is missing or fails. MPI is finalized when the object goes.
std::unique_ptr<Collectives> startMpi(std::string *error) noexcept;

/// Ends every rank of the job with `code` (MPI_Abort): what a rank that
/// fails does, since the others may be waiting for it in a collective.
[[noreturn]] void abortMpi(int code) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_TOOL_MPICOLLECTIVES_H
