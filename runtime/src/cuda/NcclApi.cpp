//===- NcclApi.cpp - dlopen NCCL ------------------------------------------===//
//
// NCCL is opened once per process and path and never closed (its proxy
// threads may outlive a communicator), like the CUDA driver in CudaApi.cpp.
// Every entry point but ncclGetLastError (2.13), ncclCommInitRankConfig and
// ncclCommFinalize (2.14) is required; NCCL older than 2.10 (no ncclAvg) is
// refused.
//
//===----------------------------------------------------------------------===//

#include "NcclApi.h"
#include "DynamicLibrary.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace loomrt::nccl {

using detail::openFirst;
using detail::resolve;

namespace {

struct Loaded {
  std::unique_ptr<NcclApi> api;
  std::string error;
};

Loaded open(const std::vector<std::string> &paths, bool fromEnv) {
  Loaded result;
  std::string tried, path;
  void *handle = openFirst(paths, &path, &tried);
  if (!handle) {
    result.error = fromEnv
                       ? "no NCCL (LOOMRT_NCCL_LIBRARY=" + paths.front() +
                             " cannot be loaded: " + tried + ")"
                       : "no NCCL (libnccl.so.2 not found): install NCCL (the "
                         "libnccl2 package, or the CUDA toolkit's) or set "
                         "LOOMRT_NCCL_LIBRARY (dlopen: " +
                             tried + ")";
    return result;
  }
  auto api = std::make_unique<NcclApi>();
  api->path = path;
  NcclApi &n = *api;
  std::string missing;
  resolve(handle, "ncclGetVersion", n.ncclGetVersion, missing);
  resolve(handle, "ncclGetUniqueId", n.ncclGetUniqueId, missing);
  resolve(handle, "ncclCommInitRank", n.ncclCommInitRank, missing);
  resolve(handle, "ncclCommDestroy", n.ncclCommDestroy, missing);
  resolve(handle, "ncclCommAbort", n.ncclCommAbort, missing);
  resolve(handle, "ncclCommGetAsyncError", n.ncclCommGetAsyncError, missing);
  resolve(handle, "ncclGetErrorString", n.ncclGetErrorString, missing);
  resolve(handle, "ncclAllReduce", n.ncclAllReduce, missing);
  resolve(handle, "ncclReduceScatter", n.ncclReduceScatter, missing);
  resolve(handle, "ncclAllGather", n.ncclAllGather, missing);
  resolve(handle, "ncclBroadcast", n.ncclBroadcast, missing);
  resolve(handle, "ncclSend", n.ncclSend, missing);
  resolve(handle, "ncclRecv", n.ncclRecv, missing);
  resolve(handle, "ncclGroupStart", n.ncclGroupStart, missing);
  resolve(handle, "ncclGroupEnd", n.ncclGroupEnd, missing);
  if (!missing.empty()) {
    result.error = path + " has no " + missing +
                   ": it is not NCCL, or an NCCL older than 2.10";
    return result;
  }
  std::string optional;
  resolve(handle, "ncclGetLastError", n.ncclGetLastError, optional);
  resolve(handle, "ncclCommInitRankConfig", n.ncclCommInitRankConfig, optional);
  resolve(handle, "ncclCommFinalize", n.ncclCommFinalize, optional);
  if (n.ncclGetVersion(&n.version) != ncclSuccess)
    n.version = 0;
  if (n.version < 21000) {
    result.error = path + " is NCCL " + n.versionString() +
                   ": 2.10 or newer is needed (ncclAvg)";
    return result;
  }
  result.api = std::move(api);
  return result;
}

} // namespace

std::string NcclApi::describe(ncclResult_t result, ncclComm_t comm) const {
  static const char *const names[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress"};
  std::string out = result >= 0 && result < 8
                        ? names[result]
                        : "NCCL error " + std::to_string(result);
  const char *text = ncclGetErrorString ? ncclGetErrorString(result) : nullptr;
  if (text && *text)
    out += std::string(" (") + text + ")";
  const char *last = ncclGetLastError ? ncclGetLastError(comm) : nullptr;
  if (last && *last)
    out += std::string(": ") + last;
  return out;
}

std::string NcclApi::versionString() const {
  // NCCL_VERSION(X, Y, Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z
  // after.
  int major = version >= 10000 ? version / 10000 : version / 1000;
  int rest = version >= 10000 ? version % 10000 : version % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." +
         std::to_string(rest % 100);
}

const NcclApi *loadNccl(std::string *error) {
  const Loaded &l = detail::loadOnce<Loaded>(
      "LOOMRT_NCCL_LIBRARY",
      {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}, open);
  if (!l.api && error)
    *error = l.error;
  return l.api.get();
}

} // namespace loomrt::nccl
