//===- CudaApiAbiCheck.cpp - Our CUDA declarations match the toolkit's ----===//
//
// Built only where the CUDA toolkit's headers are installed: every constant
// src/cuda/CudaApi.h declares must equal cuda.h's / cublasLt.h's, the
// heuristic result struct must have the same size, and the stream calls the
// watchdog uses have cuda.h's shapes. Compiling is the test.
//
//===----------------------------------------------------------------------===//

#include <cublasLt.h>
#include <cuda.h>

#include "cuda/CudaApi.h"

#include <type_traits>

namespace c = loomrt::cuda;

static_assert(c::CUDA_SUCCESS == CUDA_SUCCESS);
static_assert(c::CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(c::CUDA_ERROR_STUB_LIBRARY == CUDA_ERROR_STUB_LIBRARY);
static_assert(c::CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE);
static_assert(c::CUDA_ERROR_INVALID_IMAGE == CUDA_ERROR_INVALID_IMAGE);
static_assert(c::CUDA_ERROR_NO_BINARY_FOR_GPU == CUDA_ERROR_NO_BINARY_FOR_GPU);
static_assert(c::CUDA_ERROR_INVALID_PTX == CUDA_ERROR_INVALID_PTX);
static_assert(c::CUDA_ERROR_UNSUPPORTED_PTX_VERSION ==
              CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
static_assert(c::CUDA_ERROR_NOT_FOUND == CUDA_ERROR_NOT_FOUND);
static_assert(c::CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY);
static_assert(c::CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING);
static_assert(c::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ==
              CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(c::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(c::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(c::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(c::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(c::CU_JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER);
static_assert(c::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ==
              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(c::CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING);
static_assert(c::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ==
              CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(sizeof(c::CUdeviceptr) == sizeof(CUdeviceptr));
static_assert(sizeof(c::CUresult) == sizeof(CUresult));

static_assert(c::CUDA_R_32F == CUDA_R_32F && c::CUDA_R_64F == CUDA_R_64F);
static_assert(c::CUDA_R_16BF == CUDA_R_16BF);
static_assert(c::CUDA_R_16F == CUDA_R_16F);
static_assert(c::CUBLAS_COMPUTE_32F == CUBLAS_COMPUTE_32F);
static_assert(c::CUBLAS_COMPUTE_32F_FAST_TF32 == CUBLAS_COMPUTE_32F_FAST_TF32);
static_assert(c::CUBLAS_COMPUTE_64F == CUBLAS_COMPUTE_64F);
static_assert(c::CUBLAS_OP_N == CUBLAS_OP_N && c::CUBLAS_OP_T == CUBLAS_OP_T);
static_assert(c::CUBLASLT_MATMUL_DESC_TRANSA == CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(c::CUBLASLT_MATMUL_DESC_TRANSB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(c::CUBLASLT_MATMUL_DESC_EPILOGUE ==
              CUBLASLT_MATMUL_DESC_EPILOGUE);
static_assert(c::CUBLASLT_MATMUL_DESC_BIAS_POINTER ==
              CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(c::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT ==
              CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
static_assert(c::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET ==
              CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(c::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ==
              CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(c::CUBLASLT_EPILOGUE_DEFAULT == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(c::CUBLASLT_EPILOGUE_RELU == CUBLASLT_EPILOGUE_RELU);
static_assert(c::CUBLASLT_EPILOGUE_BIAS == CUBLASLT_EPILOGUE_BIAS);
static_assert(c::CUBLASLT_EPILOGUE_RELU_BIAS == CUBLASLT_EPILOGUE_RELU_BIAS);
static_assert(c::CUBLASLT_EPILOGUE_GELU == CUBLASLT_EPILOGUE_GELU);
static_assert(c::CUBLASLT_EPILOGUE_GELU_BIAS == CUBLASLT_EPILOGUE_GELU_BIAS);
static_assert(sizeof(c::cublasLtMatmulHeuristicResult_t) ==
              sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(sizeof(c::cublasLtMatmulAlgo_t) == sizeof(cublasLtMatmulAlgo_t));

// cuStreamQuery and cuStreamSynchronize take a stream, return a CUresult.
static_assert(std::is_same_v<decltype(&cuStreamQuery), CUresult (*)(CUstream)>);
static_assert(std::is_same_v<decltype(c::DriverApi::cuStreamQuery),
                             c::CUresult (*)(c::CUstream)>);
static_assert(
    std::is_same_v<decltype(&cuStreamSynchronize), CUresult (*)(CUstream)>);

int main() { return 0; }
