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


} // namespace loomrt

#endif // LOOMRT_HAVE_DNNL_HEADERS

#endif // LOOMRT_SRC_CPU_CPUDNNLAPI_H
