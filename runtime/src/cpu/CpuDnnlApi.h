//===- CpuDnnlApi.h - oneDNN 2's C API, looked up by dlsym ------*- C++ -*-===//
//
// The functions of oneDNN's C API that the CPU backend calls (convolution
// and matmul primitives, CpuConv.cpp and CpuMatmul.cpp), as pointers looked
// up in the library CpuDnnl.h opened. Their types come from the headers of
// libdnnl-dev; only compiled where those are (LOOMRT_HAVE_DNNL_HEADERS).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUDNNLAPI_H
#define LOOMRT_SRC_CPU_CPUDNNLAPI_H

#if LOOMRT_HAVE_DNNL_HEADERS

#include "CpuDnnl.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

namespace loomrt {

/// oneDNN's C API, looked up in the opened library.
struct DnnlApi {
#define LOOMRT_DNNL_FUNCTIONS(X)                                               \
  X(dnnl_engine_create)                                                        \
  X(dnnl_memory_desc_init_by_strides)                                          \
  X(dnnl_matmul_desc_init)                                                     \
  X(dnnl_engine_destroy)                                                       \
  X(dnnl_stream_create)                                                        \
  X(dnnl_stream_wait)                                                          \
  X(dnnl_stream_destroy)                                                       \
  X(dnnl_memory_desc_init_by_tag)                                              \
  X(dnnl_memory_desc_equal)                                                    \
  X(dnnl_memory_desc_get_size)                                                 \
  X(dnnl_memory_create)                                                        \
  X(dnnl_memory_set_data_handle)                                               \
  X(dnnl_memory_destroy)                                                       \
  X(dnnl_dilated_convolution_forward_desc_init)                                \
  X(dnnl_dilated_convolution_backward_data_desc_init)                          \
  X(dnnl_dilated_convolution_backward_weights_desc_init)                       \
  X(dnnl_reorder_primitive_desc_create)                                        \
  X(dnnl_primitive_desc_create)                                                \
  X(dnnl_primitive_desc_query_md)                                              \
  X(dnnl_primitive_desc_destroy)                                               \
  X(dnnl_primitive_create)                                                     \
  X(dnnl_primitive_execute)                                                    \
  X(dnnl_primitive_destroy)
#define LOOMRT_DNNL_POINTER(name) decltype(&::name) name = nullptr;
  LOOMRT_DNNL_FUNCTIONS(LOOMRT_DNNL_POINTER)
#undef LOOMRT_DNNL_POINTER

  /// False if the library lacks a function (another major version).
  bool load(void *lib) {
    bool all = true;
#define LOOMRT_DNNL_LOOKUP(name)                                               \
  name = reinterpret_cast<decltype(name)>(::dlsym(lib, #name));                \
  all = all && name;
    LOOMRT_DNNL_FUNCTIONS(LOOMRT_DNNL_LOOKUP)
#undef LOOMRT_DNNL_LOOKUP
    return all;
  }
};


/// The API with a CPU engine and a stream: what the primitives run on.
/// The conv and matmul steps each keep one (derived from it), with their
/// primitives, which they release before this destroys the stream and the
/// engine.
struct DnnlSession {
  DnnlApi api;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;

  DnnlSession() = default;
  DnnlSession(const DnnlSession &) = delete;
  DnnlSession &operator=(const DnnlSession &) = delete;
  ~DnnlSession() {
    if (stream)
      api.dnnl_stream_destroy(stream);
    if (engine)
      api.dnnl_engine_destroy(engine);
  }

  /// Looks the API up in `lib` and makes the engine and stream; false
  /// unless `lib` is the major version compiled against (the functions used
  /// are oneDNN 2's: 3 replaced the descriptor calls).
  bool start(void *lib) {
    return dnnlMajorVersion() == DNNL_VERSION_MAJOR && api.load(lib) &&
           api.dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
           api.dnnl_stream_create(&stream, engine,
                                  dnnl_stream_default_flags) == dnnl_success;
  }
};

} // namespace loomrt

#endif // LOOMRT_HAVE_DNNL_HEADERS

#endif // LOOMRT_SRC_CPU_CPUDNNLAPI_H
