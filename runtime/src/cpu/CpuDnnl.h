//===- CpuDnnl.h - oneDNN, opened once by dlopen ----------------*- C++ -*-===//
//
// oneDNN (libdnnl) serves the CPU backend's f32 GEMMs (CpuGemm.h) and
// convolutions (CpuConv.h). It is reached by dlopen, like CUDA, so that one
// runtime binary runs with or without it; without it GEMMs go to OpenBLAS
// and convolutions to reference loops. LOOMRT_DNNL_LIBRARY names the file
// to open (else libdnnl.so.3, then libdnnl.so.2).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUDNNL_H
#define LOOMRT_SRC_CPU_CPUDNNL_H

namespace loomrt {

/// The oneDNN library handle, or null where none could be opened. The first
/// call opens it (later calls return the same handle; the library stays
/// open for the process, since its thread team may outlive any one user).
/// Call it after the kernels are loaded: where they brought LLVM's OpenMP
/// runtime, that runtime is made global first, so that oneDNN's OpenMP
/// calls (GNU ABI, which libomp also serves) use the kernels' thread team
/// instead of a second one competing for the same cores.
void *dnnlLibrary() noexcept;

/// The major version of the opened library (dnnl_version()), 0 if none.
int dnnlMajorVersion() noexcept;

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUDNNL_H
