//===- FakeCuda.cpp - A host-memory stand-in for libcuda.so.1 and cuBLASLt ===//
//
// Lets the CUDA backend's logic run end to end on a machine without a GPU:
// loaded through LOOMRT_CUDA_DRIVER / LOOMRT_CUBLASLT_LIBRARY, it implements
// the driver-API and cuBLASLt functions the backend resolves, with host
// memory standing in for device memory. Work queued on a stream runs only at
// cuStreamSynchronize (so a backend that reads a download before
// synchronizing, or reuses staging memory too early, fails the tests), or
// when cuStreamQuery or cuEventQuery asks for it (each runs what it can:
// work that is waiting for something else, like the fake NCCL's collectives
// waiting for their peers, says CUDA_ERROR_NOT_READY and is resumed by the
// next query, so a query returns rather than blocks), and stream capture
// records the queued work into a graph that cuGraphLaunch replays. A "module"
// is a text image naming a host library and its kernels:
//
//   FAKECUBIN sm=90 lib=/path/kernels.so      (or FAKEPTX lib=...)
//   kernel add_relu4 3
//
// and a kernel is a `void name(void **buffers)` function of that library,
// called once per launch with the launch's device pointers. Every device
// access is checked against the live allocations; counters (fakecuda_stats)
// let tests see what the backend did. Configuration, read at each call:
// FAKECUDA_DEVICES (1), FAKECUDA_SM (90), FAKECUDA_MEM_BYTES (1 GiB).
// The fake NCCL (tests/fakenccl) queues its collectives on these streams
// through fakecuda_enqueue and checks its buffers with fakecuda_device_range.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "../../src/Half.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using CUresult = int;
using Op = std::function<CUresult()>;

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2,
                   kNoDevice = 100, kInvalidImage = 200, kNoBinary = 209,
                   kNotFound = 500, kNotReady = 600, kCaptureUnsupported = 900,
                   kCaptureInvalidated = 901;

FakeCudaStats stats;

long envLong(const char *name, long fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

struct Stream {
  std::vector<Op> queue;
  /// Ops ever queued (not captured) and ops run: an event waits for the
  /// count queued when it was recorded.
  uint64_t queued = 0, ran = 0;
  bool capturing = false;
  std::vector<Op> captured;
  CUresult sticky = kSuccess;
};

struct Graph {
  std::vector<Op> ops;
};

struct Function {
  std::string name;
  void (*fn)(void **);
  int params;
};

struct Module {
  void *library = nullptr;
  std::map<std::string, Function> functions;
};

std::map<uintptr_t, size_t> deviceAllocations, hostAllocations;
size_t deviceUsed = 0;
std::string lastError;

bool inside(const std::map<uintptr_t, size_t> &allocations, uintptr_t p,
            size_t bytes) {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin())
    return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}

bool deviceRange(uintptr_t p, size_t bytes) {
  if (inside(deviceAllocations, p, bytes))
    return true;
  ++stats.invalidAccesses;
  return false;
}

void hostRange(const void *p, size_t bytes) {
  if (!inside(hostAllocations, reinterpret_cast<uintptr_t>(p), bytes))
    ++stats.pageableCopies;
}

Stream *streamOf(void *s) { return static_cast<Stream *>(s); }
Stream defaultStream;

/// What ran on the streams, in order: one word per op ("h2d", "d2h",
/// "d2d", "memset", "kernel:NAME", "gemm", "ext" for fakecuda_enqueue's),
/// space-separated; capped, cleared by fakecuda_reset.
std::string trace;
void traced(const char *what, const std::string &name = "") {
  if (trace.size() > (1u << 20))
    return;
  if (!trace.empty())
    trace += ' ';
  trace += what;
  if (!name.empty())
    trace += ":" + name;
}

/// Queues `op`; `backendWork`: issued through the driver API or cuBLASLt
/// (not fakecuda_enqueue), which stats.lastStream records.
CUresult enqueue(void *s, Op op, bool backendWork = true) {
  if (backendWork)
    stats.lastStream = s;
  Stream *stream = s ? streamOf(s) : &defaultStream;
  if (stream->capturing) {
    stream->captured.push_back(std::move(op));
  } else {
    stream->queue.push_back(std::move(op));
    ++stream->queued;
  }
  return kSuccess;
}

/// Runs the stream's queued ops, oldest first, until `ran` reaches `upTo`.
/// An op that returns kNotReady (it waits for something outside the
/// stream) stays first in the queue, to be called again by the next query:
/// then kNotReady, the stream's state for a query.
CUresult runQueue(Stream *stream, uint64_t upTo) {
  while (stream->ran < upTo && !stream->queue.empty()) {
    // Out of the queue while it runs (it may queue more work).
    Op op = std::move(stream->queue.front());
    stream->queue.erase(stream->queue.begin());
    CUresult r = op();
    if (r == kNotReady) {
      stream->queue.insert(stream->queue.begin(), std::move(op));
      return stream->sticky != kSuccess ? stream->sticky : kNotReady;
    }
    ++stream->ran;
    if (r != kSuccess && stream->sticky == kSuccess)
      stream->sticky = r;
  }
  return stream->sticky;
}

/// runQueue until nothing is left waiting (cuStreamSynchronize: blocks).
CUresult drain(Stream *stream, uint64_t upTo) {
  for (;;) {
    CUresult r = runQueue(stream, upTo);
    if (r != kNotReady)
      return r;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// An event: done once its stream has run the ops queued before it.
struct Event {
  Stream *stream = nullptr;
  uint64_t after = 0;
};

bool anyCapturing = false;

} // namespace

// --- fake-only entry points
// ---------------------------------------------------

EXPORT FakeCudaStats *fakecuda_stats() { return &stats; }
EXPORT void fakecuda_reset() {
  FakeCudaStats live = stats;
  stats = FakeCudaStats();
  stats.deviceAllocations = live.deviceAllocations;
  stats.streams = live.streams;
  stats.contextsRetained = live.contextsRetained;
  trace.clear();
}
EXPORT const char *fakecuda_trace() { return trace.c_str(); }
EXPORT const char *fakecuda_last_error() { return lastError.c_str(); }
/// For the fake NCCL (tests/fakenccl): queues `fn(arg)` on `stream` like
/// any other work (its nonzero result becomes the stream's error, except
/// 600, CUDA_ERROR_NOT_READY: not finished, call again at the next query
/// or synchronization); `release` frees `arg` when the op is gone.
EXPORT CUresult fakecuda_enqueue(void *stream, int (*fn)(void *), void *arg,
                                 void (*release)(void *)) {
  std::shared_ptr<void> owned(arg, release);
  return enqueue(
      stream,
      [fn, owned, started = false]() mutable {
        if (!started)
          traced("ext");
        CUresult r = CUresult(fn(owned.get()));
        // Once per run of the op (a graph replays it), however many polls.
        started = r == kNotReady;
        return r;
      },
      /*backendWork=*/false);
}
/// Where `p` lies in device memory: its byte offset into the live device
/// allocation that holds it (and that allocation's size in `*bytes`), or
/// -1.
EXPORT int64_t fakecuda_device_offset(const void *p, uint64_t *bytes) {
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = deviceAllocations.upper_bound(at);
  if (it == deviceAllocations.begin())
    return -1;
  --it;
  if (at < it->first || at >= it->first + it->second)
    return -1;
  if (bytes)
    *bytes = it->second;
  return int64_t(at - it->first);
}
/// Whether [p, p + bytes) lies inside one live device allocation (a miss
/// counts as an invalid access).
EXPORT int fakecuda_device_range(const void *p, size_t bytes) {
  return deviceRange(reinterpret_cast<uintptr_t>(p), bytes) ? 1 : 0;
}

// --- driver API
// -----------------------------------------------------------------

EXPORT CUresult cuInit(unsigned) { return kSuccess; }
EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return kSuccess;
}
EXPORT CUresult cuDeviceGetCount(int *count) {
  *count = static_cast<int>(envLong("FAKECUDA_DEVICES", 1));
  return kSuccess;
}
EXPORT CUresult cuDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= envLong("FAKECUDA_DEVICES", 1))
    return kNoDevice;
  *device = ordinal;
  return kSuccess;
}
EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  long sm = envLong("FAKECUDA_SM", 90);
  switch (attribute) {
  case 75:
    *value = static_cast<int>(sm / 10);
    return kSuccess;
  case 76:
    *value = static_cast<int>(sm % 10);
    return kSuccess;
  case 97:
    *value = 232448;
    return kSuccess;
  case 16:
    *value = 132;
    return kSuccess;
  }
  return kInvalidValue;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, int) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU (host memory)");
  return kSuccess;
}
static int contextToken;
EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int) {
  *ctx = &contextToken;
  ++stats.contextsRetained;
  return kSuccess;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int) {
  --stats.contextsRetained;
  return kSuccess;
}
EXPORT CUresult cuCtxSetCurrent(void *) { return kSuccess; }

static CUresult loadModule(void **out, const void *image, bool ex) {
  std::istringstream in(static_cast<const char *>(image));
  std::string kind, first;
  in >> kind;
  auto module = std::make_unique<Module>();
  std::string lib;
  long sm = -1;
  std::string word;
  std::string line;
  std::getline(in, line);
  std::istringstream header(line);
  while (header >> word) {
    if (word.rfind("sm=", 0) == 0)
      sm = std::strtol(word.c_str() + 3, nullptr, 10);
    else if (word.rfind("lib=", 0) == 0)
      lib = word.substr(4);
  }
  if (kind == "FAKECUBIN") {
    if (sm != envLong("FAKECUDA_SM", 90))
      return kNoBinary;
    ++stats.cubinLoads;
  } else if (kind == "FAKEPTX") {
    ++stats.ptxLoads;
    if (!ex)
      ++stats.ptxWithoutEx;
  } else {
    return kInvalidImage;
  }
  module->library = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module->library) {
    lastError = "fakecuda: cannot open " + lib;
    return kInvalidImage;
  }
  std::string tag, name;
  int params = 0;
  while (in >> tag >> name >> params) {
    if (tag != "kernel")
      return kInvalidImage;
    auto fn = reinterpret_cast<void (*)(void **)>(
        ::dlsym(module->library, name.c_str()));
    if (!fn)
      continue; // resolved (and missed) at cuModuleGetFunction
    module->functions[name] = Function{name, fn, params};
  }
  *out = module.release();
  return kSuccess;
}

EXPORT CUresult cuModuleLoadData(void **module, const void *image) {
  return loadModule(module, image, false);
}
EXPORT CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned,
                                   int *, void **) {
  return loadModule(module, image, true);
}
EXPORT CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
  auto *m = static_cast<Module *>(module);
  auto it = m->functions.find(name);
  if (it == m->functions.end())
    return kNotFound;
  *fn = &it->second;
  return kSuccess;
}
EXPORT CUresult cuModuleUnload(void *module) {
  auto *m = static_cast<Module *>(module);
  if (m->library)
    ::dlclose(m->library);
  delete m;
  return kSuccess;
}
EXPORT CUresult cuFuncSetAttribute(void *, int attribute, int value) {
  if (attribute == 8)
    stats.maxDynamicShared = value;
  return kSuccess;
}

EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, void *stream, void **params,
                               void **extra) {
  auto *fn = static_cast<Function *>(f);
  if (extra || (!params && fn->params))
    return kInvalidValue;
  std::vector<void *> buffers(static_cast<size_t>(fn->params));
  for (int i = 0; i < fn->params; ++i) {
    unsigned long long p;
    std::memcpy(&p, params[i], sizeof p); // the value, copied at the call
    if (!deviceRange(static_cast<uintptr_t>(p), 1))
      return kInvalidValue;
    buffers[static_cast<size_t>(i)] = reinterpret_cast<void *>(p);
  }
  stats.lastGrid[0] = gx;
  stats.lastGrid[1] = gy;
  stats.lastGrid[2] = gz;
  stats.lastBlock[0] = bx;
  stats.lastBlock[1] = by;
  stats.lastBlock[2] = bz;
  stats.lastShared = shared;
  ++stats.launchesIssued;
  return enqueue(stream, [fn, buffers]() mutable {
    traced("kernel", fn->name);
    ++stats.kernelsRun;
    fn->fn(buffers.data());
    return kSuccess;
  });
}

EXPORT CUresult cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  if (anyCapturing) {
    ++stats.captureViolations;
    return kCaptureUnsupported;
  }
  size_t total = static_cast<size_t>(envLong("FAKECUDA_MEM_BYTES", 1l << 30));
  if (bytes == 0)
    return kInvalidValue;
  if (bytes > total - deviceUsed)
    return kOutOfMemory;
  void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p)
    return kOutOfMemory;
  std::memset(p, 0xA5, bytes); // device memory is not zeroed
  deviceAllocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  deviceUsed += bytes;
  ++stats.deviceAllocations;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}
EXPORT CUresult cuMemFree_v2(unsigned long long ptr) {
  auto it = deviceAllocations.find(static_cast<uintptr_t>(ptr));
  if (it == deviceAllocations.end())
    return kInvalidValue;
  deviceUsed -= it->second;
  deviceAllocations.erase(it);
  std::free(reinterpret_cast<void *>(ptr));
  --stats.deviceAllocations;
  return kSuccess;
}
EXPORT CUresult cuMemAllocHost_v2(void **ptr, size_t bytes) {
  void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p)
    return kOutOfMemory;
  hostAllocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return kSuccess;
}
EXPORT CUresult cuMemFreeHost(void *p) {
  hostAllocations.erase(reinterpret_cast<uintptr_t>(p));
  std::free(p);
  return kSuccess;
}
EXPORT CUresult cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes) {
  size_t total = static_cast<size_t>(envLong("FAKECUDA_MEM_BYTES", 1l << 30));
  *totalBytes = total;
  *freeBytes = total > deviceUsed ? total - deviceUsed : 0;
  return kSuccess;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src,
                                     size_t bytes, void *stream) {
  if (!deviceRange(static_cast<uintptr_t>(dst), bytes))
    return kInvalidValue;
  hostRange(src, bytes);
  if (streamOf(stream) && streamOf(stream)->capturing)
    ++stats.hostCopiesCaptured;
  return enqueue(stream, [=] {
    traced("h2d");
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    stats.h2dBytes += bytes;
    return kSuccess;
  });
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src,
                                     size_t bytes, void *stream) {
  if (!deviceRange(static_cast<uintptr_t>(src), bytes))
    return kInvalidValue;
  hostRange(dst, bytes);
  if (streamOf(stream) && streamOf(stream)->capturing)
    ++stats.hostCopiesCaptured;
  return enqueue(stream, [=] {
    traced("d2h");
    std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
    stats.d2hBytes += bytes;
    return kSuccess;
  });
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst,
                                     unsigned long long src, size_t bytes,
                                     void *stream) {
  if (!deviceRange(static_cast<uintptr_t>(dst), bytes) ||
      !deviceRange(static_cast<uintptr_t>(src), bytes))
    return kInvalidValue;
  return enqueue(stream, [=] {
    traced("d2d");
    std::memmove(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
                 bytes);
    stats.d2dBytes += bytes;
    return kSuccess;
  });
}
EXPORT CUresult cuMemsetD8Async(unsigned long long dst, unsigned char value,
                                size_t bytes, void *stream) {
  if (!deviceRange(static_cast<uintptr_t>(dst), bytes))
    return kInvalidValue;
  return enqueue(stream, [=] {
    traced("memset");
    std::memset(reinterpret_cast<void *>(dst), value, bytes);
    return kSuccess;
  });
}

EXPORT CUresult cuStreamCreate(void **stream, unsigned) {
  *stream = new Stream();
  ++stats.streams;
  return kSuccess;
}
EXPORT CUresult cuStreamDestroy_v2(void *stream) {
  delete streamOf(stream);
  --stats.streams;
  return kSuccess;
}
EXPORT CUresult cuStreamSynchronize(void *s) {
  Stream *stream = s ? streamOf(s) : &defaultStream;
  if (stream->capturing) {
    ++stats.captureViolations;
    return kCaptureUnsupported;
  }
  ++stats.synchronizations;
  return drain(stream, stream->queued);
}
/// Runs what it can of the stream's work: CUDA_SUCCESS once all of it ran
/// (then counted as a synchronization, like cuStreamSynchronize: a wait
/// for the whole stream that ended), CUDA_ERROR_NOT_READY while some waits.
EXPORT CUresult cuStreamQuery(void *s) {
  Stream *stream = s ? streamOf(s) : &defaultStream;
  if (stream->capturing) {
    ++stats.captureViolations;
    return kCaptureUnsupported;
  }
  ++stats.streamQueries;
  CUresult r = runQueue(stream, stream->queued);
  if (r == kSuccess)
    ++stats.synchronizations;
  return r;
}
EXPORT CUresult cuEventCreate(void **event, unsigned) {
  *event = new Event();
  return kSuccess;
}
EXPORT CUresult cuEventDestroy_v2(void *event) {
  delete static_cast<Event *>(event);
  return kSuccess;
}
EXPORT CUresult cuEventRecord(void *e, void *s) {
  Stream *stream = s ? streamOf(s) : &defaultStream;
  if (!e)
    return kInvalidValue;
  if (stream->capturing) {
    ++stats.captureViolations;
    return kCaptureUnsupported;
  }
  auto *event = static_cast<Event *>(e);
  event->stream = stream;
  event->after = stream->queued;
  return kSuccess;
}
/// A real event completes as the GPU gets there; here the query is what
/// runs the stream's work up to the event (so polling makes progress).
EXPORT CUresult cuEventQuery(void *e) {
  auto *event = static_cast<Event *>(e);
  if (!event)
    return kInvalidValue;
  if (!event->stream)
    return kSuccess;
  ++stats.eventQueries;
  return runQueue(event->stream, event->after);
}
EXPORT CUresult cuStreamBeginCapture_v2(void *s, int) {
  Stream *stream = streamOf(s);
  if (!stream || stream->capturing)
    return kInvalidValue;
  stream->capturing = true;
  anyCapturing = true;
  stream->captured.clear();
  ++stats.captures;
  return kSuccess;
}
EXPORT CUresult cuStreamEndCapture(void *s, void **graph) {
  Stream *stream = streamOf(s);
  if (!stream || !stream->capturing)
    return kCaptureInvalidated;
  stream->capturing = false;
  anyCapturing = false;
  auto *g = new Graph();
  g->ops.swap(stream->captured);
  *graph = g;
  return kSuccess;
}
EXPORT CUresult cuGraphInstantiateWithFlags(void **exec, void *graph,
                                            unsigned long long) {
  *exec = new Graph(*static_cast<Graph *>(graph));
  ++stats.graphsInstantiated;
  return kSuccess;
}
EXPORT CUresult cuGraphLaunch(void *exec, void *stream) {
  Graph *g = static_cast<Graph *>(exec);
  ++stats.graphLaunches;
  // Resumable: an op that is not ready is called again at the next query.
  return enqueue(stream, [g, next = size_t(0)]() mutable {
    for (; next < g->ops.size(); ++next) {
      CUresult r = g->ops[next]();
      if (r != kSuccess) // kNotReady included: resumed at `next`
        return r;
    }
    next = 0;
    return kSuccess;
  });
}
EXPORT CUresult cuGraphExecDestroy(void *exec) {
  delete static_cast<Graph *>(exec);
  return kSuccess;
}
EXPORT CUresult cuGraphDestroy(void *graph) {
  delete static_cast<Graph *>(graph);
  return kSuccess;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case kSuccess:
    *name = "CUDA_SUCCESS";
    return kSuccess;
  case kOutOfMemory:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return kSuccess;
  case kNoBinary:
    *name = "CUDA_ERROR_NO_BINARY_FOR_GPU";
    return kSuccess;
  case kNotFound:
    *name = "CUDA_ERROR_NOT_FOUND";
    return kSuccess;
  }
  *name = "CUDA_ERROR_FAKE";
  return kSuccess;
}
EXPORT CUresult cuGetErrorString(CUresult, const char **text) {
  *text = "fake driver error";
  return kSuccess;
}

// --- cuBLASLt
// --------------------------------------------------------------------

namespace {

struct MatmulDesc {
  int compute, scale;
  int32_t transA = 0, transB = 0;
  uint32_t epilogue = 1;
  void *bias = nullptr;
};
struct Layout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

/// 16-bit elements as cuBLASLt stores them (CUDA_R_16BF, CUDA_R_16F): raw
/// bits.
struct Bf16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};

/// What a stored element is summed as: itself, or f32 for 16-bit ones
/// (cuBLASLt's CUBLAS_COMPUTE_32F), and back, rounding to nearest even.
template <typename T> struct Sum {
  using Type = T;
  static T widen(T v) { return v; }
  static T narrow(T v) { return v; }
};
template <> struct Sum<Bf16> {
  using Type = float;
  static float widen(Bf16 v) { return loomrt::bf16ToFloat(v.bits); }
  static Bf16 narrow(float f) { return {loomrt::floatToBf16(f)}; }
};
template <> struct Sum<Half> {
  using Type = float;
  static float widen(Half v) { return loomrt::halfToFloat(v.bits); }
  static Half narrow(float f) { return {loomrt::floatToHalf(f)}; }
};

/// The product with its epilogue, summed in Sum<T>::Type and rounded once
/// to T (the backend gives bf16 GEMMs no epilogue).
template <typename T>
void matmul(const MatmulDesc &d, const Layout &la, const T *a, const Layout &lb,
            const T *b, const Layout &lc, T *c) {
  using S = typename Sum<T>::Type;
  uint64_t m = lc.rows, n = lc.cols;
  uint64_t k = d.transA ? la.rows : la.cols;
  const T *bias = static_cast<const T *>(d.bias);
  for (int32_t batch = 0; batch < lc.batch; ++batch) {
    const T *ab = a + batch * la.stride;
    const T *bb = b + batch * lb.stride;
    T *cb = c + batch * lc.stride;
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t j = 0; j < n; ++j) {
        S acc = 0;
        for (uint64_t l = 0; l < k; ++l) {
          S x = Sum<T>::widen(d.transA ? ab[l + i * la.ld] : ab[i + l * la.ld]);
          S y = Sum<T>::widen(d.transB ? bb[j + l * lb.ld] : bb[l + j * lb.ld]);
          acc += x * y;
        }
        if (d.epilogue & 4)
          acc += Sum<T>::widen(bias[i]);
        if (d.epilogue & 2)
          acc = acc > S(0) ? acc : S(0);
        if (d.epilogue & 32)
          acc = S(0.5) * acc *
                (S(1) + std::tanh(S(0.7978845608028654) *
                                  (acc + S(0.044715) * acc * acc * acc)));
        cb[i + j * lc.ld] = Sum<T>::narrow(acc);
      }
  }
}

} // namespace

static int ltHandleToken;
EXPORT int cublasLtCreate(void **handle) {
  *handle = &ltHandleToken;
  return 0;
}
EXPORT int cublasLtDestroy(void *) { return 0; }
EXPORT int cublasLtMatmulDescCreate(void **desc, int compute, int scale) {
  *desc = new MatmulDesc{compute, scale};
  return 0;
}
EXPORT int cublasLtMatmulDescDestroy(void *desc) {
  delete static_cast<MatmulDesc *>(desc);
  return 0;
}
EXPORT int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf,
                                          size_t size) {
  auto *d = static_cast<MatmulDesc *>(desc);
  switch (attr) {
  case 3:
    if (size != 4)
      return 7;
    std::memcpy(&d->transA, buf, 4);
    return 0;
  case 4:
    if (size != 4)
      return 7;
    std::memcpy(&d->transB, buf, 4);
    return 0;
  case 7:
    if (size != 4)
      return 7;
    std::memcpy(&d->epilogue, buf, 4);
    return 0;
  case 8:
    if (size != sizeof(void *))
      return 7;
    std::memcpy(&d->bias, buf, sizeof(void *));
    return 0;
  }
  return 7; // CUBLAS_STATUS_INVALID_VALUE
}
EXPORT int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows,
                                      uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(rows))
    return 7;
  *layout = new Layout{type, rows, cols, ld};
  return 0;
}
EXPORT int cublasLtMatrixLayoutDestroy(void *layout) {
  delete static_cast<Layout *>(layout);
  return 0;
}
EXPORT int cublasLtMatrixLayoutSetAttribute(void *layout, int attr,
                                            const void *buf, size_t size) {
  auto *l = static_cast<Layout *>(layout);
  if (attr == 5 && size == 4) {
    std::memcpy(&l->batch, buf, 4);
    return 0;
  }
  if (attr == 6 && size == 8) {
    std::memcpy(&l->stride, buf, 8);
    return 0;
  }
  return 7;
}
static int prefToken;
EXPORT int cublasLtMatmulPreferenceCreate(void **pref) {
  *pref = &prefToken;
  return 0;
}
EXPORT int cublasLtMatmulPreferenceDestroy(void *) { return 0; }
EXPORT int cublasLtMatmulPreferenceSetAttribute(void *, int, const void *,
                                                size_t) {
  return 0;
}
EXPORT int cublasLtMatmulAlgoGetHeuristic(void *, void *desc, void *a, void *b,
                                          void *c, void *d, void *, int wanted,
                                          void *results, int *found) {
  auto *la = static_cast<Layout *>(a), *lb = static_cast<Layout *>(b),
       *lc = static_cast<Layout *>(c);
  auto *md = static_cast<MatmulDesc *>(desc);
  uint64_t am = md->transA ? la->cols : la->rows;
  uint64_t ak = md->transA ? la->rows : la->cols;
  uint64_t bk = md->transB ? lb->cols : lb->rows;
  uint64_t bn = md->transB ? lb->rows : lb->cols;
  if (c != d || ak != bk || am != lc->rows || bn != lc->cols ||
      la->batch != lc->batch || lb->batch != lc->batch || wanted < 1) {
    ++stats.badGemmShapes;
    *found = 0;
    return 0;
  }
  // cublasLtMatmulHeuristicResult_t: algo (64 bytes), workspaceSize, state.
  std::memset(results, 0, 96);
  *found = 1;
  return 0;
}
EXPORT int cublasLtMatmul(void *, void *desc, const void *alpha, const void *a,
                          void *la, const void *b, void *lb, const void *beta,
                          const void *c, void *lc, void *d, void *ld,
                          const void *, void *, size_t, void *stream) {
  auto *md = static_cast<MatmulDesc *>(desc);
  auto *layoutA = static_cast<Layout *>(la),
       *layoutB = static_cast<Layout *>(lb),
       *layoutC = static_cast<Layout *>(lc);
  if (c != d || lc != ld)
    return 7;
  // The backend always multiplies by 1 and adds 0 * C.
  if (md->scale == 0 ? (*static_cast<const float *>(alpha) != 1.0f ||
                        *static_cast<const float *>(beta) != 0.0f)
                     : (*static_cast<const double *>(alpha) != 1.0 ||
                        *static_cast<const double *>(beta) != 0.0))
    return 7;
  stats.lastComputeType = md->compute;
  ++stats.matmulsIssued;
  MatmulDesc dc = *md;
  Layout A = *layoutA, B = *layoutB, C = *layoutC;
  // Element spans, to check every access lies in device memory.
  auto span = [](const Layout &l, size_t elem) {
    return ((l.batch - 1) * l.stride + (l.cols - 1) * l.ld + l.rows) * elem;
  };
  bool half = A.type == 14 || A.type == 2;
  size_t elem = A.type == 1 ? 8 : half ? 2 : 4;
  if (half && md->epilogue != 1)
    return 7; // Loom's 16-bit GEMMs take no epilogue
  if (!deviceRange(reinterpret_cast<uintptr_t>(a), span(A, elem)) ||
      !deviceRange(reinterpret_cast<uintptr_t>(b), span(B, elem)) ||
      !deviceRange(reinterpret_cast<uintptr_t>(d), span(C, elem)))
    return 7;
  return enqueue(stream, [=] {
    traced("gemm");
    ++stats.matmulsRun;
    if (A.type == 1)
      matmul(dc, A, static_cast<const double *>(a), B,
             static_cast<const double *>(b), C, static_cast<double *>(d));
    else if (A.type == 14)
      matmul(dc, A, static_cast<const Bf16 *>(a), B,
             static_cast<const Bf16 *>(b), C, static_cast<Bf16 *>(d));
    else if (A.type == 2)
      matmul(dc, A, static_cast<const Half *>(a), B,
             static_cast<const Half *>(b), C, static_cast<Half *>(d));
    else
      matmul(dc, A, static_cast<const float *>(a), B,
             static_cast<const float *>(b), C, static_cast<float *>(d));
    return kSuccess;
  });
}
EXPORT const char *cublasLtGetStatusString(int) {
  return "fake cuBLASLt error";
}
