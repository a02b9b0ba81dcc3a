//===- CpuConv.cpp - Conv steps on oneDNN, or direct loops ----------------===//

#include "CpuConv.h"
#include "CpuDnnl.h"
#include "CpuDnnlApi.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <new>
#include <vector>

#if LOOMRT_HAVE_DNNL_HEADERS
#include <oneapi/dnnl/dnnl.h>
#endif

namespace loomrt {

ConvShape convShape(const ConvStep &step, const PlanBuffer &x,
                    const PlanBuffer &w, const PlanBuffer &y) noexcept {
  // NCHW: C at 1, H at 2, W at 3; NHWC: H at 1, W at 2, C at 3.
  int ci = step.channelsLast ? 3 : 1, hi = step.channelsLast ? 1 : 2;
  ConvShape s;
  s.n = x.shape[0], s.c = x.shape[ci], s.h = x.shape[hi],
  s.w = x.shape[hi + 1];
  s.o = w.shape[0], s.kh = w.shape[2], s.kw = w.shape[3];
  s.oh = y.shape[hi], s.ow = y.shape[hi + 1];
  return s;
}

void referenceConv(const ConvStep &step, const ConvShape &s, float *x,
                   float *w, float *y) noexcept {
  const int64_t groups = step.groups, cg = s.c / groups, og = s.o / groups;
  const int64_t sh = step.strides[0], sw = step.strides[1];
  const int64_t dh = step.dilations[0], dw = step.dilations[1];
  const int64_t pt = step.padding[0], pl = step.padding[1];
  const ConvDirection dir = step.direction;
  // Offsets of element (n, c, y, x) of x ([n, c, h, w]) and of y ([n, o,
  // oh, ow]) in the step's layout.
  const bool cl = step.channelsLast;
  auto xAt = [&](int64_t n, int64_t c, int64_t iy, int64_t ix) {
    return cl ? ((n * s.h + iy) * s.w + ix) * s.c + c
              : ((n * s.c + c) * s.h + iy) * s.w + ix;
  };
  auto yAt = [&](int64_t n, int64_t o, int64_t oy, int64_t ox) {
    return cl ? ((n * s.oh + oy) * s.ow + ox) * s.o + o
              : ((n * s.o + o) * s.oh + oy) * s.ow + ox;
  };
  if (dir == ConvDirection::BackwardData)
    std::memset(x, 0, sizeof(float) * s.n * s.c * s.h * s.w);
  if (dir == ConvDirection::BackwardWeights)
    std::memset(w, 0, sizeof(float) * s.o * cg * s.kh * s.kw);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o) {
      const int64_t c0 = (o / og) * cg;
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          float *out = y + yAt(n, o, oy, ox);
          float sum = 0.0f;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < s.kh; ++i) {
              int64_t iy = oy * sh + i * dh - pt;
              if (iy < 0 || iy >= s.h)
                continue;
              for (int64_t j = 0; j < s.kw; ++j) {
                int64_t ix = ox * sw + j * dw - pl;
                if (ix < 0 || ix >= s.w)
                  continue;
                float *in = x + xAt(n, c0 + ci, iy, ix);
                float *f = w + ((o * cg + ci) * s.kh + i) * s.kw + j;
                if (dir == ConvDirection::Forward)
                  sum += *in * *f;
                else if (dir == ConvDirection::BackwardData)
                  *in += *out * *f;
                else
                  *f += *out * *in;
              }
            }
          if (dir == ConvDirection::Forward)
            *out = sum;
        }
    }
}

#if LOOMRT_HAVE_DNNL_HEADERS

namespace {
/// A 64-byte aligned buffer that only grows.
struct Workspace {
  void *data = nullptr;
  size_t bytes = 0;
  ~Workspace() { std::free(data); }
  void *reserve(size_t n) {
    if (n <= bytes)
      return data;
    std::free(data);
    data = std::aligned_alloc(64, (n + 63) / 64 * 64);
    bytes = data ? n : 0;
    return data;
  }
};
} // namespace

struct CpuConv::Dnnl : DnnlSession {

  /// One operand of a primitive: the plan's plain layout, the primitive's,
  /// and the reorder between them when they differ.
  struct Operand {
    int arg = 0;                  ///< DNNL_ARG_* of the convolution
    bool written = false;         ///< the convolution's output
    dnnl_memory_t user = nullptr; ///< over the arena
    dnnl_memory_t inner = nullptr; ///< over a workspace, if reordered
    dnnl_primitive_t reorder = nullptr;
    size_t innerBytes = 0;
  };
  /// A convolution primitive for one geometry and direction; operands in
  /// the order x, w, y.
  struct Prepared {
    dnnl_primitive_t conv = nullptr;
    Operand operands[3];
  };
  std::map<std::array<int64_t, 20>, Prepared> prepared;
  Workspace workspaces[3]; ///< reordered x, w, y (steps run one at a time)

  /// Destroys what `p` holds and empties it.
  void release(Prepared &p) {
    for (Operand &o : p.operands) {
      if (o.reorder)
        api.dnnl_primitive_destroy(o.reorder);
      if (o.inner)
        api.dnnl_memory_destroy(o.inner);
      if (o.user)
        api.dnnl_memory_destroy(o.user);
    }
    if (p.conv)
      api.dnnl_primitive_destroy(p.conv);
    p = Prepared{};
  }

  ~Dnnl() {
    for (auto &entry : prepared)
      release(entry.second);
  }

  /// Plain memory descriptors of the plan's x, w, y (and `any` ones for the
  /// primitive to choose).
  void describe(const ConvStep &step, const ConvShape &s,
                dnnl_memory_desc_t plain[3], dnnl_memory_desc_t any[3]) {
    dnnl_dims_t x = {s.n, s.c, s.h, s.w}, y = {s.n, s.o, s.oh, s.ow};
    int64_t g = step.groups;
    dnnl_dims_t w4 = {s.o, s.c / g, s.kh, s.kw};
    dnnl_dims_t w5 = {g, s.o / g, s.c / g, s.kh, s.kw};
    int wRank = g == 1 ? 4 : 5;
    const int64_t *w = g == 1 ? w4 : w5;
    dnnl_format_tag_t wTag = g == 1 ? dnnl_oihw : dnnl_goihw;
    dnnl_format_tag_t act = step.channelsLast ? dnnl_nhwc : dnnl_nchw;
    api.dnnl_memory_desc_init_by_tag(&plain[0], 4, x, dnnl_f32, act);
    api.dnnl_memory_desc_init_by_tag(&plain[1], wRank, w, dnnl_f32, wTag);
    api.dnnl_memory_desc_init_by_tag(&plain[2], 4, y, dnnl_f32, act);
    api.dnnl_memory_desc_init_by_tag(&any[1], wRank, w, dnnl_f32,
                                     dnnl_format_tag_any);
    // NCHW activations go through oneDNN's blocked layouts (any: reordered
    // in and out); NHWC ones are convolved as they are (ResNet-18's
    // convolutions: 486 -> 417 ms per training step on 2 threads,
    // docs/performance.md).
    if (step.channelsLast) {
      any[0] = plain[0];
      any[2] = plain[2];
      return;
    }
    api.dnnl_memory_desc_init_by_tag(&any[0], 4, x, dnnl_f32,
                                     dnnl_format_tag_any);
    api.dnnl_memory_desc_init_by_tag(&any[2], 4, y, dnnl_f32,
                                     dnnl_format_tag_any);
  }

  /// The convolution primitive descriptor for `step` (the forward one for
  /// `direction`), or null.
  dnnl_primitive_desc_t descriptor(const ConvStep &step,
                                   ConvDirection direction,
                                   const dnnl_memory_desc_t any[3],
                                   const_dnnl_primitive_desc_t hint) {
    // oneDNN counts dilation from 0 (no dilation).
    dnnl_dims_t strides = {step.strides[0], step.strides[1]};
    dnnl_dims_t dilates = {step.dilations[0] - 1, step.dilations[1] - 1};
    dnnl_dims_t padL = {step.padding[0], step.padding[1]};
    dnnl_dims_t padR = {step.padding[2], step.padding[3]};
    dnnl_convolution_desc_t desc;
    dnnl_status_t st;
    if (direction == ConvDirection::Forward)
      st = api.dnnl_dilated_convolution_forward_desc_init(
          &desc, dnnl_forward_training, dnnl_convolution_direct, &any[0],
          &any[1], nullptr, &any[2], strides, dilates, padL, padR);
    else if (direction == ConvDirection::BackwardData)
      st = api.dnnl_dilated_convolution_backward_data_desc_init(
          &desc, dnnl_convolution_direct, &any[0], &any[1], &any[2], strides,
          dilates, padL, padR);
    else
      st = api.dnnl_dilated_convolution_backward_weights_desc_init(
          &desc, dnnl_convolution_direct, &any[0], &any[1], nullptr, &any[2],
          strides, dilates, padL, padR);
    dnnl_primitive_desc_t pd = nullptr;
    if (st != dnnl_success ||
        api.dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, hint) !=
            dnnl_success)
      return nullptr;
    return pd;
  }

  /// Creates the primitive and reorders for one geometry; false if oneDNN
  /// has none (the caller then runs the reference loops).
  bool prepare(const ConvStep &step, const ConvShape &s, Prepared &p) {
    dnnl_memory_desc_t plain[3], any[3];
    describe(step, s, plain, any);
    dnnl_primitive_desc_t forward =
        descriptor(step, ConvDirection::Forward, any, nullptr);
    if (!forward)
      return false;
    dnnl_primitive_desc_t pd = forward;
    if (step.direction != ConvDirection::Forward) {
      pd = descriptor(step, step.direction, any, forward);
      api.dnnl_primitive_desc_destroy(forward);
      if (!pd)
        return false;
    }
    static const dnnl_query_t queries[3][3] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md},
        {dnnl_query_src_md, dnnl_query_diff_weights_md,
         dnnl_query_diff_dst_md}};
    static const int args[3][3] = {
        {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
        {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST}};
    int d = static_cast<int>(step.direction);
    int written = d == 0 ? 2 : d == 1 ? 0 : 1;
    bool ok = api.dnnl_primitive_create(&p.conv, pd) == dnnl_success;
    for (int i = 0; ok && i < 3; ++i) {
      Operand &o = p.operands[i];
      o.arg = args[d][i];
      o.written = i == written;
      const dnnl_memory_desc_t *inner =
          api.dnnl_primitive_desc_query_md(pd, queries[d][i], 0);
      ok = inner && api.dnnl_memory_create(&o.user, &plain[i], engine,
                                           DNNL_MEMORY_NONE) == dnnl_success;
      if (!ok || api.dnnl_memory_desc_equal(inner, &plain[i]))
        continue;
      o.innerBytes = api.dnnl_memory_desc_get_size(inner);
      dnnl_primitive_desc_t rpd = nullptr;
      const dnnl_memory_desc_t *from = o.written ? inner : &plain[i];
      const dnnl_memory_desc_t *to = o.written ? &plain[i] : inner;
      ok = api.dnnl_memory_create(&o.inner, inner, engine, DNNL_MEMORY_NONE) ==
               dnnl_success &&
           api.dnnl_reorder_primitive_desc_create(&rpd, from, engine, to,
                                                  engine, nullptr) ==
               dnnl_success &&
           api.dnnl_primitive_create(&o.reorder, rpd) == dnnl_success;
      if (rpd)
        api.dnnl_primitive_desc_destroy(rpd);
    }
    api.dnnl_primitive_desc_destroy(pd);
    return ok;
  }

  Prepared *find(const ConvStep &step, const ConvShape &s) {
    std::array<int64_t, 20> key = {
        static_cast<int64_t>(step.direction),
        s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow,
        step.strides[0], step.strides[1], step.padding[0], step.padding[1],
        step.padding[2], step.padding[3], step.dilations[0],
        step.dilations[1], step.groups, step.channelsLast ? 1 : 0};
    auto it = prepared.find(key);
    if (it != prepared.end())
      return it->second.conv ? &it->second : nullptr;
    Prepared &p = prepared[key];
    if (!prepare(step, s, p)) {
      // Remembered as unsupported (a null primitive), its parts released.
      release(p);
      return nullptr;
    }
    return &p;
  }

  bool execute(dnnl_primitive_t primitive, int n, const dnnl_exec_arg_t *a) {
    return api.dnnl_primitive_execute(primitive, stream, n, a) ==
           dnnl_success;
  }

  /// 1: ran; 0: no primitive for this step; -1: oneDNN failed.
  int run(const ConvStep &step, const ConvShape &s, float *x, float *w,
          float *y) {
    Prepared *p = find(step, s);
    if (!p)
      return 0;
    float *data[3] = {x, w, y};
    dnnl_exec_arg_t args[3];
    for (int i = 0; i < 3; ++i) {
      Operand &o = p->operands[i];
      api.dnnl_memory_set_data_handle(o.user, data[i]);
      args[i] = {o.arg, o.user};
      if (!o.reorder)
        continue;
      void *inner = workspaces[i].reserve(o.innerBytes);
      if (!inner)
        return -1;
      api.dnnl_memory_set_data_handle(o.inner, inner);
      args[i].memory = o.inner;
      dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o.user}, {DNNL_ARG_TO, o.inner}};
      if (!o.written && !execute(o.reorder, 2, r))
        return -1;
    }
    if (!execute(p->conv, 3, args))
      return -1;
    for (Operand &o : p->operands)
      if (o.written && o.reorder) {
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, o.inner},
                                {DNNL_ARG_TO, o.user}};
        if (!execute(o.reorder, 2, r))
          return -1;
      }
    return api.dnnl_stream_wait(stream) == dnnl_success ? 1 : -1;
  }
};

#else

struct CpuConv::Dnnl {
  bool start(void *) { return false; }
  int run(const ConvStep &, const ConvShape &, float *, float *, float *) {
    return 0;
  }
};

#endif // LOOMRT_HAVE_DNNL_HEADERS

CpuConv::CpuConv() = default;
CpuConv::~CpuConv() = default;

const char *CpuConv::library() noexcept {
  if (!opened) {
    opened = true;
    const char *choice = std::getenv("LOOMRT_CPU_CONV");
    void *lib = choice && std::strcmp(choice, "reference") == 0
                    ? nullptr
                    : dnnlLibrary();
    if (lib) {
      dnnl.reset(new (std::nothrow) Dnnl);
      if (dnnl && !dnnl->start(lib))
        dnnl.reset();
    }
    // Said once: without it a CNN trains many times slower, and nothing
    // else would tell why.
    if (!dnnl && !(choice && std::strcmp(choice, "reference") == 0))
      std::fprintf(stderr,
                   "loomrt: note: no usable oneDNN 2 (libdnnl.so.2): "
                   "convolutions run on reference loops, one thread, much "
                   "slower (install libdnnl2; docs/loom-run.md)\n");
  }
  return dnnl ? "onednn" : "reference";
}

bool CpuConv::run(const ConvStep &step, const ConvShape &shape, float *x,
                  float *w, float *y, std::string *error) noexcept {
  library();
  int ran = 0;
  try {
    if (dnnl)
      ran = dnnl->run(step, shape, x, w, y);
  } catch (...) {
    ran = -1;
  }
  if (ran < 0) {
    if (error) {
      try {
        *error = std::string("oneDNN failed to run a ") +
                 convDirectionName(step.direction) + " convolution";
      } catch (...) {
      }
    }
    return false;
  }
  if (ran == 0) {
    referenceConv(step, shape, x, w, y);
    ++fallbacks;
  }
  return true;
}

} // namespace loomrt
