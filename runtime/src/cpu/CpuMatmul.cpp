//===- CpuMatmul.cpp - 16-bit GEMM steps: oneDNN's matmul, or CBLAS ------===//

#include "CpuMatmul.h"
#include "CpuDnnl.h"
#include "CpuDnnlApi.h"
#include "CpuGemm.h"


#include <array>
#include <cstring>
#include <map>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace loomrt {

namespace {
// Whole arrays of f16 <-> f32, eight at a time with the F16C instructions
// where the CPU has them (the scalar conversions of Half.h otherwise):
// widening and narrowing dominate an f16 GEMM on the CBLAS path.
#if defined(__x86_64__)
bool haveF16c() {
  static const bool have = [] {
    // AVX as the compiler's runtime checks it (with the OS saving the YMM
    // state), F16C from CPUID leaf 1.
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C);
  }();
  return have;
}

__attribute__((target("avx,f16c"))) void widenF16c(const uint16_t *in,
                                                   float *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(in + i))));
  for (; i < n; ++i)
    out[i] = halfToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void narrowF16c(const float *in,
                                                    uint16_t *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i),
                                     _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    out[i] = floatToHalf(in[i]);
}
#else
bool haveF16c() { return false; }
void widenF16c(const uint16_t *, float *, size_t) {}
void narrowF16c(const float *, uint16_t *, size_t) {}
#endif

void widen(bool f16, const uint16_t *in, float *out, size_t n) {
  if (f16 && haveF16c())
    return widenF16c(in, out, n);
  for (size_t i = 0; i < n; ++i)
    out[i] = f16 ? halfToFloat(in[i]) : bf16ToFloat(in[i]);
}

void narrow(bool f16, const float *in, uint16_t *out, size_t n) {
  if (f16 && haveF16c())
    return narrowF16c(in, out, n);
  for (size_t i = 0; i < n; ++i)
    out[i] = f16 ? floatToHalf(in[i]) : floatToBf16(in[i]);
}
} // namespace

#if LOOMRT_HAVE_DNNL_HEADERS
/// One matmul primitive per geometry, over memories whose data handles are
/// set at each run (the arena's addresses).
struct CpuMatmul::Dnnl : DnnlSession {
  struct Prepared {
    dnnl_primitive_t matmul = nullptr;
    dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
  };
  std::map<std::array<int64_t, 10>, Prepared> prepared;

  void release(Prepared &p) {
    for (dnnl_memory_t m : {p.a, p.b, p.c})
      if (m)
        api.dnnl_memory_destroy(m);
    if (p.matmul)
      api.dnnl_primitive_destroy(p.matmul);
    p = Prepared{};
  }
  ~Dnnl() {
    for (auto &entry : prepared)
      release(entry.second);
  }

  /// [batch, rows, cols] of `type` with the plan's strides; a transposed
  /// operand is stored [cols, rows].
  bool describe(dnnl_memory_desc_t &md, dnnl_data_type_t type, int64_t batch,
                int64_t rows, int64_t cols, uint64_t batchStride,
                bool transposed) {
    dnnl_dims_t dims = {batch, rows, cols};
    dnnl_dims_t strides = {batchStride ? int64_t(batchStride) : rows * cols,
                           transposed ? 1 : cols, transposed ? rows : 1};
    return api.dnnl_memory_desc_init_by_strides(&md, 3, dims, type,
                                                strides) == dnnl_success;
  }

  bool prepare(const GemmStep &g, dnnl_data_type_t type, Prepared &p) {
    dnnl_memory_desc_t a, b, c;
    int64_t batchB = g.strideB == 0 ? 1 : g.batch;
    if (!describe(a, type, g.batch, g.m, g.k, g.strideA, g.transA) ||
        !describe(b, type, batchB, g.k, g.n, g.strideB, g.transB) ||
        !describe(c, type, g.batch, g.m, g.n, g.strideC, false))
      return false;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = nullptr;
    bool ok =
        api.dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &c) ==
            dnnl_success &&
        api.dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) ==
            dnnl_success &&
        api.dnnl_primitive_create(&p.matmul, pd) == dnnl_success &&
        api.dnnl_memory_create(&p.a, &a, engine, DNNL_MEMORY_NONE) ==
            dnnl_success &&
        api.dnnl_memory_create(&p.b, &b, engine, DNNL_MEMORY_NONE) ==
            dnnl_success &&
        api.dnnl_memory_create(&p.c, &c, engine, DNNL_MEMORY_NONE) ==
            dnnl_success;
    if (pd)
      api.dnnl_primitive_desc_destroy(pd);
    return ok;
  }

  /// 1: ran; 0: no primitive for this geometry; -1: oneDNN failed.
  int run(const GemmStep &g, bool f16, const uint16_t *a, const uint16_t *b,
          uint16_t *c) {
    std::array<int64_t, 10> key = {f16,
                                  g.batch,
                                  g.m,
                                  g.n,
                                  g.k,
                                  g.transA,
                                  g.transB,
                                  int64_t(g.strideA),
                                  int64_t(g.strideB),
                                  int64_t(g.strideC)};
    auto it = prepared.find(key);
    if (it == prepared.end()) {
      Prepared &p = prepared[key];
      if (!prepare(g, f16 ? dnnl_f16 : dnnl_bf16, p))
        release(p); // remembered as unsupported
      it = prepared.find(key);
    }
    Prepared &p = it->second;
    if (!p.matmul)
      return 0;
    if (api.dnnl_memory_set_data_handle(p.a, const_cast<uint16_t *>(a)) !=
            dnnl_success ||
        api.dnnl_memory_set_data_handle(p.b, const_cast<uint16_t *>(b)) !=
            dnnl_success ||
        api.dnnl_memory_set_data_handle(p.c, c) != dnnl_success)
      return -1;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p.a},
                               {DNNL_ARG_WEIGHTS, p.b},
                               {DNNL_ARG_DST, p.c}};
    return api.dnnl_primitive_execute(p.matmul, stream, 3, args) ==
                       dnnl_success &&
                   api.dnnl_stream_wait(stream) == dnnl_success
               ? 1
               : -1;
  }
};
#else
struct CpuMatmul::Dnnl {
  bool start(void *) { return false; }
  int run(const GemmStep &, bool, const uint16_t *, const uint16_t *,
          uint16_t *) {
    return 0;
  }
};
#endif

CpuMatmul::CpuMatmul() = default;
CpuMatmul::~CpuMatmul() = default;

bool CpuMatmul::runHalf(const GemmStep &g, bool f16, const uint16_t *a,
                        const uint16_t *b, uint16_t *c, bool useDnnl,
                        std::string *error) noexcept {
  if (useDnnl && !dnnlTried) {
    dnnlTried = true;
    if (void *lib = dnnlLibrary()) {
      dnnl.reset(new (std::nothrow) Dnnl);
      if (dnnl && !dnnl->start(lib))
        dnnl.reset();
    }
  }
  if (useDnnl && dnnl) {
    int ran = dnnl->run(g, f16, a, b, c);
    if (ran == 1) {
      last = "onednn";
      return true;
    }
    if (ran < 0) {
      if (error)
        *error = std::string("oneDNN's ") + (f16 ? "f16" : "bf16") +
                 " matmul failed";
      return false;
    }
  }
  // Widen to f32 (exact), multiply with the CBLAS, round to 16 bits.
  last = "cblas";
  int64_t aRows = g.transA ? g.k : g.m, aCols = g.transA ? g.m : g.k;
  int64_t bRows = g.transB ? g.n : g.k, bCols = g.transB ? g.k : g.n;
  std::vector<float> fa, fb, fc;
  try {
    fa.resize(aRows * aCols), fb.resize(bRows * bCols), fc.resize(g.m * g.n);
  } catch (...) {
    if (error)
      *error = "out of memory widening a 16-bit GEMM's operands";
    return false;
  }
  for (int64_t i = 0; i < g.batch; ++i) {
    widen(f16, a + i * g.strideA, fa.data(), fa.size());
    widen(f16, b + i * g.strideB, fb.data(), fb.size());
    cpuSgemm(DnnlGemm(), g.transA, g.transB, g.m, g.n, g.k, fa.data(), aCols,
             fb.data(), bCols, 0.0f, fc.data(), g.n);
    narrow(f16, fc.data(), c + i * g.strideC, fc.size());
  }
  return true;
}

} // namespace loomrt
