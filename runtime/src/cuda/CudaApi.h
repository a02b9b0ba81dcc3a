//===- CudaApi.h - The CUDA driver API and cuBLASLt, reached through dlopen
//-===//
//
// The runtime never links against CUDA: one libloomrt runs on CPU-only and GPU
// machines, and builds where no CUDA toolkit is installed. This header
// declares the few driver-API and cuBLASLt types, constants and functions the
// CUDA backend uses, with the values of cuda.h / cublasLt.h (their ABI is
// stable; CudaApiAbiTest checks every value against the real headers where a
// toolkit is installed). The functions are resolved by dlopen/dlsym, using the
// `_v2` names that cuda.h's macros map the plain names to.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CUDA_CUDAAPI_H
#define LOOMRT_SRC_CUDA_CUDAAPI_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace loomrt::cuda {

// --- Driver API types (cuda.h) ----------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st *;
struct CUmod_st;
using CUmodule = CUmod_st *;
struct CUfunc_st;
using CUfunction = CUfunc_st *;
struct CUstream_st;
using CUstream = CUstream_st *;
struct CUgraph_st;
using CUgraph = CUgraph_st *;
struct CUgraphExec_st;
using CUgraphExec = CUgraphExec_st *;
using CUjit_option = int;
struct CUevent_st;
using CUevent = CUevent_st *;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;

inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;

/// The driver entry points the backend calls, resolved from libcuda.so.1.
struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice); // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned,
                                 CUjit_option *, void **);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t); // _v2
  CUresult (*cuMemFree)(CUdeviceptr);            // _v2
  CUresult (*cuMemAllocHost)(void **, size_t);   // _v2
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
                                CUstream); // _v2
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t,
                                CUstream); // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t,
                                CUstream); // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemGetInfo)(size_t *, size_t *); // _v2
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream); // _v2
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream); ///< polled where a wait may time out
  CUresult (*cuStreamBeginCapture)(CUstream, int); // _v2
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph,
                                          unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  // Events mark where a collective ends on its stream (NcclCollectives).
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventDestroy)(CUevent); // _v2
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuGetErrorName)(CUresult, const char **);

  std::string path; ///< the library that was opened

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult result) const;
};

/// Waits for everything queued on `stream` by polling cuStreamQuery (naps of
/// up to 1 ms between polls), for at most `timeoutSeconds` (0: no limit,
/// then cuStreamSynchronize). CUDA_SUCCESS, the error the stream reports,
/// or CUDA_ERROR_NOT_READY when the time ran out with work still queued:
/// for waits that can be stuck behind an NCCL collective whose peer died
/// or hangs, where cuStreamSynchronize would wait forever.
CUresult waitForStream(const DriverApi &cu, CUstream stream,
                       double timeoutSeconds);

/// Opens the driver once per process (per library path) and calls cuInit(0):
/// LOOMRT_CUDA_DRIVER if set, else libcuda.so.1. On failure returns null and
/// a message ("no CUDA driver (libcuda.so.1 not found): this machine has no
/// NVIDIA GPU driver", "no CUDA device", ...).
const DriverApi *loadDriver(std::string *error);

// --- cuBLASLt (cublasLt.h, cublas_api.h, library_types.h) --------------------
using cublasStatus_t = int;
struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext *;
struct cublasLtMatmulDescOpaque;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque *;
struct cublasLtMatrixLayoutOpaque;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque *;
struct cublasLtMatmulPreferenceOpaque;
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque *;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_64F = 1;
inline constexpr int CUDA_R_16BF = 14;
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUBLAS_COMPUTE_32F = 68;
inline constexpr int CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
inline constexpr int CUBLAS_COMPUTE_64F = 70;
inline constexpr int CUBLAS_OP_N = 0;
inline constexpr int CUBLAS_OP_T = 1;
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;                 // int32
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;                 // int32
inline constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;               // uint32
inline constexpr int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;           // void *
inline constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;          // int32
inline constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6; // int64
inline constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;    // uint64
inline constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1;
inline constexpr uint32_t CUBLASLT_EPILOGUE_RELU = 2;
inline constexpr uint32_t CUBLASLT_EPILOGUE_BIAS = 4;
inline constexpr uint32_t CUBLASLT_EPILOGUE_RELU_BIAS = 6;
inline constexpr uint32_t CUBLASLT_EPILOGUE_GELU = 32;
inline constexpr uint32_t CUBLASLT_EPILOGUE_GELU_BIAS = 36;

struct BlasLtApi {
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t);
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *, int, int);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int,
                                                   const void *, size_t);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *, int,
                                               uint64_t, uint64_t, int64_t);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t,
                                                     int, const void *, size_t);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(
      cublasLtMatmulPreference_t *);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(
      cublasLtMatmulPreference_t, int, const void *, size_t);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(
      cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
      cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
      cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *,
      int *);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                   const void *, const void *,
                                   cublasLtMatrixLayout_t, const void *,
                                   cublasLtMatrixLayout_t, const void *,
                                   const void *, cublasLtMatrixLayout_t, void *,
                                   cublasLtMatrixLayout_t,
                                   const cublasLtMatmulAlgo_t *, void *, size_t,
                                   CUstream);
  const char *(*cublasLtGetStatusString)(cublasStatus_t); // may be null

  std::string path;

  /// "CUBLAS_STATUS_NOT_SUPPORTED (...)" or "cuBLAS status 15".
  std::string describe(cublasStatus_t status) const;
};

/// Opens cuBLASLt once per process: LOOMRT_CUBLASLT_LIBRARY if set, else
/// libcublasLt.so.13, libcublasLt.so.12 (library path, then
/// /usr/local/cuda/lib64).
const BlasLtApi *loadBlasLt(std::string *error);

} // namespace loomrt::cuda

#endif // LOOMRT_SRC_CUDA_CUDAAPI_H
