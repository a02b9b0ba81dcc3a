//===- DynamicLibrary.h - dlopen and dlsym for the CUDA-side APIs -*- C++ -*-===//
//
// What CudaApi.cpp (the driver, cuBLASLt) and NcclApi.cpp (NCCL) share to
// reach a library by dlopen: the first of several paths that loads, and
// entry points resolved by name, the first missing one remembered for the
// message. Libraries opened here are never closed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CUDA_DYNAMICLIBRARY_H
#define LOOMRT_SRC_CUDA_DYNAMICLIBRARY_H

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loomrt::detail {

/// dlerror()'s text, or a placeholder when it has none.
inline std::string dlText() {
  const char *why = ::dlerror();
  return why ? why : "unknown dlopen error";
}

/// dlopen (RTLD_NOW | RTLD_LOCAL) of the first of `paths` that loads: its
/// handle, with `*path` set to it; null otherwise, with `*tried` holding
/// each path's dlopen error, "; "-separated.
inline void *openFirst(const std::vector<std::string> &paths,
                       std::string *path, std::string *tried) {
  for (const std::string &p : paths) {
    ::dlerror();
    if (void *handle = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = p;
      return handle;
    }
    *tried += (tried->empty() ? "" : "; ") + dlText();
  }
  return nullptr;
}

/// `fn` = the address of `symbol` in `handle`; false (and `missing` = the
/// first symbol not found) when it is not there.
template <typename Fn>
bool resolve(void *handle, const char *symbol, Fn &fn, std::string &missing) {
  ::dlerror();
  void *address = ::dlsym(handle, symbol);
  if (!address) {
    if (missing.empty())
      missing = symbol;
    return false;
  }
  fn = reinterpret_cast<Fn>(address);
  return true;
}

/// The library a loader opens: the path in environment variable `envVar`
/// when it is set and not empty (`open(paths, true)`: the user named it),
/// otherwise `defaults` (`open(paths, false)`). Each distinct first path is
/// opened once per process; later calls return that result, failures
/// included (one cache per `Loaded` and `Open` type).
template <typename Loaded, typename Open>
const Loaded &loadOnce(const char *envVar, std::vector<std::string> defaults,
                       Open open) {
  const char *env = std::getenv(envVar);
  bool fromEnv = env && *env;
  std::vector<std::string> paths =
      fromEnv ? std::vector<std::string>{env} : std::move(defaults);
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(paths.front());
  if (it == cache.end())
    it = cache.emplace(paths.front(), open(paths, fromEnv)).first;
  return it->second;
}

} // namespace loomrt::detail

#endif // LOOMRT_SRC_CUDA_DYNAMICLIBRARY_H
