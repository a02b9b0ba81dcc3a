//===- Backends.h - The concrete backends createBackend picks from --------===//
//
// Internal: not installed. createBackend (Backend.cpp) chooses by the plan's
// target; each backend lives in its own directory (cpu/, cuda/).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_BACKENDS_H
#define LOOMRT_SRC_BACKENDS_H

#include "loomrt/Backend.h"

namespace loomrt {

/// Whether bytes [offset, offset + bytes) lie inside `arena`; if not, sets
/// `*error` (when given) and returns false. Shared by every backend's
/// upload, download and copy.
bool arenaRangeOk(const Arena &arena, uint64_t offset, uint64_t bytes,
                  std::string *error) noexcept;

std::unique_ptr<Backend> createCpuBackend();

/// Opens the CUDA driver (dlopen; LOOMRT_CUDA_DRIVER overrides the library),
/// picks the device (LOOMRT_CUDA_DEVICE, else BackendOptions::localRank
/// modulo the device count, else 0) and makes a stream.
/// Unsupported with a message when there is no driver or no device.
std::unique_ptr<Backend> createCudaBackend(const BackendOptions &options,
                                           std::string *error,
                                           ErrorCode *code) noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_BACKENDS_H
