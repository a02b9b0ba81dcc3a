//===- CudaApi.cpp - dlopen the CUDA driver and cuBLASLt ------------------===//
//
// Each library is opened once per process and path and never closed: the
// driver keeps threads and state that must outlive every context, and a
// second dlopen of the same path would return the same handle anyway.
//
//===----------------------------------------------------------------------===//

#include "CudaApi.h"
#include "DynamicLibrary.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loomrt::cuda {

using detail::dlText;
using detail::openFirst;
using detail::resolve;

namespace {

struct Loaded {
  std::unique_ptr<DriverApi> driver;
  std::unique_ptr<BlasLtApi> blasLt;
  std::string error;
};

Loaded openDriver(const std::string &path, bool fromEnv) {
  Loaded result;
  ::dlerror();
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = dlText();
    result.error =
        fromEnv ? "no CUDA driver (LOOMRT_CUDA_DRIVER=" + path +
                      " cannot be loaded: " + why + ")"
                : "no CUDA driver (" + path +
                      " not found): this machine has no NVIDIA GPU driver "
                      "(dlopen: " +
                      why + ")";
    return result;
  }
  auto api = std::make_unique<DriverApi>();
  api->path = path;
  std::string missing;
  DriverApi &d = *api;
  resolve(handle, "cuInit", d.cuInit, missing);
  resolve(handle, "cuDriverGetVersion", d.cuDriverGetVersion, missing);
  resolve(handle, "cuDeviceGetCount", d.cuDeviceGetCount, missing);
  resolve(handle, "cuDeviceGet", d.cuDeviceGet, missing);
  resolve(handle, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, missing);
  resolve(handle, "cuDeviceGetName", d.cuDeviceGetName, missing);
  resolve(handle, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain,
          missing);
  resolve(handle, "cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease,
          missing);
  resolve(handle, "cuCtxSetCurrent", d.cuCtxSetCurrent, missing);
  resolve(handle, "cuModuleLoadData", d.cuModuleLoadData, missing);
  resolve(handle, "cuModuleLoadDataEx", d.cuModuleLoadDataEx, missing);
  resolve(handle, "cuModuleGetFunction", d.cuModuleGetFunction, missing);
  resolve(handle, "cuModuleUnload", d.cuModuleUnload, missing);
  resolve(handle, "cuFuncSetAttribute", d.cuFuncSetAttribute, missing);
  resolve(handle, "cuLaunchKernel", d.cuLaunchKernel, missing);
  resolve(handle, "cuMemAlloc_v2", d.cuMemAlloc, missing);
  resolve(handle, "cuMemFree_v2", d.cuMemFree, missing);
  resolve(handle, "cuMemAllocHost_v2", d.cuMemAllocHost, missing);
  resolve(handle, "cuMemFreeHost", d.cuMemFreeHost, missing);
  resolve(handle, "cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync, missing);
  resolve(handle, "cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync, missing);
  resolve(handle, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync, missing);
  resolve(handle, "cuMemsetD8Async", d.cuMemsetD8Async, missing);
  resolve(handle, "cuMemGetInfo_v2", d.cuMemGetInfo, missing);
  resolve(handle, "cuStreamCreate", d.cuStreamCreate, missing);
  resolve(handle, "cuStreamDestroy_v2", d.cuStreamDestroy, missing);
  resolve(handle, "cuStreamSynchronize", d.cuStreamSynchronize, missing);
  resolve(handle, "cuStreamQuery", d.cuStreamQuery, missing);
  resolve(handle, "cuStreamBeginCapture_v2", d.cuStreamBeginCapture, missing);
  resolve(handle, "cuStreamEndCapture", d.cuStreamEndCapture, missing);
  resolve(handle, "cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags,
          missing);
  resolve(handle, "cuGraphLaunch", d.cuGraphLaunch, missing);
  resolve(handle, "cuGraphExecDestroy", d.cuGraphExecDestroy, missing);
  resolve(handle, "cuGraphDestroy", d.cuGraphDestroy, missing);
  resolve(handle, "cuEventCreate", d.cuEventCreate, missing);
  resolve(handle, "cuEventRecord", d.cuEventRecord, missing);
  resolve(handle, "cuEventQuery", d.cuEventQuery, missing);
  resolve(handle, "cuEventDestroy_v2", d.cuEventDestroy, missing);
  resolve(handle, "cuGetErrorString", d.cuGetErrorString, missing);
  resolve(handle, "cuGetErrorName", d.cuGetErrorName, missing);
  if (!missing.empty()) {
    result.error = path + " has no " + missing +
                   ": the NVIDIA driver is too old for this runtime (it "
                   "needs a driver for CUDA 12 or newer)";
    return result;
  }
  CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS) {
    if (init == CUDA_ERROR_NO_DEVICE)
      result.error = "no CUDA device: the driver (" + path +
                     ") found no NVIDIA GPU (cuInit: " + d.describe(init) + ")";
    else if (init == CUDA_ERROR_STUB_LIBRARY)
      result.error = "no CUDA driver: " + path +
                     " is the toolkit's stub library, not a driver "
                     "(this machine has no NVIDIA GPU driver)";
    else
      result.error = "the CUDA driver (" + path +
                     ") failed to start: cuInit: " + d.describe(init);
    return result;
  }
  result.driver = std::move(api);
  return result;
}

Loaded openBlasLt(const std::vector<std::string> &paths, bool fromEnv) {
  Loaded result;
  std::string tried, path;
  void *handle = openFirst(paths, &path, &tried);
  if (!handle) {
    result.error = fromEnv ? "cannot load cuBLASLt LOOMRT_CUBLASLT_LIBRARY=" +
                                 paths.front() + ": " + tried
                           : "cuBLASLt not found (libcublasLt.so.13 or .12; "
                             "install the CUDA toolkit's cuBLAS or set "
                             "LOOMRT_CUBLASLT_LIBRARY): " +
                                 tried;
    return result;
  }
  auto api = std::make_unique<BlasLtApi>();
  api->path = path;
  BlasLtApi &b = *api;
  std::string missing;
  resolve(handle, "cublasLtCreate", b.cublasLtCreate, missing);
  resolve(handle, "cublasLtDestroy", b.cublasLtDestroy, missing);
  resolve(handle, "cublasLtMatmulDescCreate", b.cublasLtMatmulDescCreate,
          missing);
  resolve(handle, "cublasLtMatmulDescDestroy", b.cublasLtMatmulDescDestroy,
          missing);
  resolve(handle, "cublasLtMatmulDescSetAttribute",
          b.cublasLtMatmulDescSetAttribute, missing);
  resolve(handle, "cublasLtMatrixLayoutCreate", b.cublasLtMatrixLayoutCreate,
          missing);
  resolve(handle, "cublasLtMatrixLayoutDestroy", b.cublasLtMatrixLayoutDestroy,
          missing);
  resolve(handle, "cublasLtMatrixLayoutSetAttribute",
          b.cublasLtMatrixLayoutSetAttribute, missing);
  resolve(handle, "cublasLtMatmulPreferenceCreate",
          b.cublasLtMatmulPreferenceCreate, missing);
  resolve(handle, "cublasLtMatmulPreferenceDestroy",
          b.cublasLtMatmulPreferenceDestroy, missing);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute",
          b.cublasLtMatmulPreferenceSetAttribute, missing);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic",
          b.cublasLtMatmulAlgoGetHeuristic, missing);
  resolve(handle, "cublasLtMatmul", b.cublasLtMatmul, missing);
  if (!missing.empty()) {
    result.error = path + " has no " + missing;
    return result;
  }
  std::string optional;
  b.cublasLtGetStatusString = nullptr;
  resolve(handle, "cublasLtGetStatusString", b.cublasLtGetStatusString,
          optional);
  result.blasLt = std::move(api);
  return result;
}

} // namespace

std::string DriverApi::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

std::string BlasLtApi::describe(cublasStatus_t status) const {
  const char *text =
      cublasLtGetStatusString ? cublasLtGetStatusString(status) : nullptr;
  return text ? std::string(text) + " (" + std::to_string(status) + ")"
              : "cuBLAS status " + std::to_string(status);
}

CUresult waitForStream(const DriverApi &cu, CUstream stream,
                       double timeoutSeconds) {
  if (timeoutSeconds <= 0)
    return cu.cuStreamSynchronize(stream);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(timeoutSeconds);
  std::chrono::microseconds nap(0);
  for (;;) {
    CUresult r = cu.cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY)
      return r;
    if (Clock::now() - start > limit)
      return CUDA_ERROR_NOT_READY;
    // Short naps first (most waits end within microseconds), then 1 ms:
    // a stuck wait costs the CPU nothing much.
    nap = std::min(std::chrono::microseconds(1000),
                   nap + std::chrono::microseconds(10));
    std::this_thread::sleep_for(nap);
  }
}

const DriverApi *loadDriver(std::string *error) {
  const Loaded &l = detail::loadOnce<Loaded>(
      "LOOMRT_CUDA_DRIVER", {"libcuda.so.1"},
      [](const std::vector<std::string> &paths, bool fromEnv) {
        return openDriver(paths.front(), fromEnv);
      });
  if (!l.driver && error)
    *error = l.error;
  return l.driver.get();
}

const BlasLtApi *loadBlasLt(std::string *error) {
  const Loaded &l = detail::loadOnce<Loaded>(
      "LOOMRT_CUBLASLT_LIBRARY",
      {"libcublasLt.so.13", "libcublasLt.so.12",
       "/usr/local/cuda/lib64/libcublasLt.so.13",
       "/usr/local/cuda/lib64/libcublasLt.so.12"},
      openBlasLt);
  if (!l.blasLt && error)
    *error = l.error;
  return l.blasLt.get();
}

} // namespace loomrt::cuda
