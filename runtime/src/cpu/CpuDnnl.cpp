//===- CpuDnnl.cpp - oneDNN, opened once by dlopen ------------------------===//

#include "CpuDnnl.h"

#include <cstdlib>
#include <dlfcn.h>
#include <initializer_list>

namespace loomrt {

namespace {
struct Opened {
  void *handle = nullptr;
  int major = 0;
};

Opened open() noexcept {
  Opened result;
  // LLVM's OpenMP runtime, if the kernels loaded it (RTLD_LOCAL), becomes
  // global: libdnnl then binds its GOMP_* calls to it rather than to libgomp.
  ::dlopen("libomp.so.5", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  void *lib = nullptr;
  if (const char *path = std::getenv("LOOMRT_DNNL_LIBRARY"))
    lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  for (const char *name : {"libdnnl.so.3", "libdnnl.so.2"})
    if (!lib)
      lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return result;
  result.handle = lib;
  // dnnl_version() returns a pointer to {int major, minor, patch; ...}, the
  // same leading fields in every release.
  using Version = const int *(*)();
  if (auto version = reinterpret_cast<Version>(::dlsym(lib, "dnnl_version")))
    if (const int *v = version())
      result.major = v[0];
  return result;
}

const Opened &opened() noexcept {
  static const Opened library = open();
  return library;
}
} // namespace

void *dnnlLibrary() noexcept { return opened().handle; }

int dnnlMajorVersion() noexcept { return opened().major; }

} // namespace loomrt
