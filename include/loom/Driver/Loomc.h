//===- Loomc.h - The loomc compiler driver ----------------------*- C++ -*-===//

#ifndef LOOM_DRIVER_LOOMC_H
#define LOOM_DRIVER_LOOMC_H

namespace loom {
/// Runs `loomc` with the given command line; returns the process exit code.
int loomcMain(int argc, char **argv);
} // namespace loom

#endif // LOOM_DRIVER_LOOMC_H
