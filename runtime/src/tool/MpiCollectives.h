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

/// This process's rank among those the launcher started on its machine,
/// from its environment (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
/// SLURM_LOCALID), or -1: what picks a rank's GPU (the physical machine,
/// whatever --ranks-per-node simulates).
int launcherLocalRank() noexcept;

/// This process's rank in the launched world and the world's size, from
/// the launcher's environment (Open MPI, PMIx, PMI, Slurm), or -1: known
/// before MPI starts, so that a rank failing before it can name itself.
int launcherWorldRank() noexcept;
int launcherWorldSize() noexcept;

/// How the ranks are grouped into machines and how all-reduce uses that.
struct MpiOptions {
  /// Ranks per machine; 0: as the launcher placed them
  /// (MPI_COMM_TYPE_SHARED). K > 0 groups consecutive world ranks by K,
  /// which simulates several machines on one.
  int ranksPerNode = 0;
  /// "flat": MPI's all-reduce over the world. "hierarchical": reduce-scatter
  /// inside each machine, all-reduce of each shard across machines,
  /// all-gather inside each machine. "auto": hierarchical when there are
  /// several machines with several ranks each.
  std::string allReduce = "auto";
  /// Seconds a rank waits for one collective before it gives up and ends
  /// the job (another rank died or hangs); 0 waits forever.
  double timeoutSeconds = 60;
};

/// Initializes MPI and returns the world's collectives; null with `error`
/// when MPI is missing or fails, or the options do not fit the world. MPI is
/// finalized when the object goes.
std::unique_ptr<Collectives> startMpi(const MpiOptions &options,
                                      std::string *error) noexcept;

/// "4 ranks (mpi): 2 machines of 2, hierarchical all-reduce": what a run
/// says about its world.
std::string describeWorld(const Collectives &comm);

/// Ends every rank of the job with `code` (MPI_Abort): what a rank that
/// fails does, since the others may be waiting for it in a collective.
/// Before MPI starts, exits with `code` (the launcher then ends the job).
[[noreturn]] void abortMpi(int code) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_TOOL_MPICOLLECTIVES_H
