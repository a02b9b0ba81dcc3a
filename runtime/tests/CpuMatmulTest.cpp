//===- CpuMatmulTest.cpp - 16-bit GEMM steps against a double reference ---===//
//
// Each geometry (transposes, batches, a right operand shared by the batch)
// runs, in bf16 and in f16, on oneDNN's matmul where libdnnl is installed
// and on the CBLAS fallback; both must equal the exact product of the
// 16-bit operands rounded once to 16 bits, but for the last bit where the
// f32 sum itself rounds: at most one ulp from the reference, and most
// elements exact. The f16 conversions (Half.h) are checked against the
// compiler's own _Float16 where it has one.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuDnnl.h"
#include "cpu/CpuMatmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace loomrt::test {
namespace {

struct Case {
  const char *name;
  int64_t batch, m, n, k;
  bool transA, transB, sharedB;
};

std::vector<uint16_t> random16(size_t n, bool f16, std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v)
    x = f16 ? floatToHalf(u(rng)) : floatToBf16(u(rng));
  return v;
}

TEST(CpuMatmul, Bf16RoundTrip) {
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(-3.5f)), -3.5f);
  // 1 + 2^-8 lies halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  EXPECT_TRUE(std::isinf(bf16ToFloat(floatToBf16(INFINITY))));
}

TEST(CpuMatmul, HalfRoundTrip) {
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(65504.0f)), 65504.0f);
  // 1 + 2^-11 lies halfway between two f16 values: ties go to even (1.0).
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 3.0f / 2048)), 1.0f + 4.0f / 2048);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(65520.0f)))); // the tie
  EXPECT_EQ(halfToFloat(floatToHalf(65519.0f)), 65504.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(std::ldexp(1.0f, -24))),
            std::ldexp(1.0f, -24)); // the smallest subnormal
  EXPECT_EQ(halfToFloat(floatToHalf(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_TRUE(std::signbit(halfToFloat(floatToHalf(-0.0f))));
#ifdef __FLT16_MANT_DIG__
  // Every f16 widens as _Float16 does; floats of every magnitude narrow as
  // _Float16 rounds them.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    _Float16 v;
    uint16_t bits = uint16_t(h);
    std::memcpy(&v, &bits, 2);
    float want = static_cast<float>(v), got = halfToFloat(bits);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << h;
    else
      EXPECT_EQ(got, want) << h;
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t fbits = any(rng);
    float f;
    std::memcpy(&f, &fbits, 4);
    if (std::isnan(f))
      continue;
    _Float16 v = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &v, 2);
    ASSERT_EQ(floatToHalf(f), want) << f;
  }
#endif
}

TEST(CpuMatmul, HalfGemmsMatchTheExactProduct) {
  const Case cases[] = {
      {"plain", 1, 17, 23, 40, false, false, false},
      {"a transposed", 1, 16, 8, 33, true, false, false},
      {"b transposed", 1, 9, 31, 64, false, true, false},
      {"both transposed", 1, 12, 12, 12, true, true, false},
      {"batched", 3, 8, 5, 16, false, false, false},
      {"batched, shared b transposed", 4, 6, 7, 24, false, true, true},
  };
  std::mt19937 rng(7);
  for (bool f16 : {false, true})
  for (const Case &t : cases)
    for (bool dnnl : {true, false}) {
      SCOPED_TRACE(std::string(t.name) + (f16 ? ", f16" : ", bf16") +
                   (dnnl ? " (oneDNN if present)" : " (CBLAS)"));
      auto widen = f16 ? halfToFloat : bf16ToFloat;
      auto narrow = f16 ? floatToHalf : floatToBf16;
      GemmStep g;
      g.batch = t.batch, g.m = t.m, g.n = t.n, g.k = t.k;
      g.transA = t.transA, g.transB = t.transB;
      g.strideA = t.m * t.k;
      g.strideB = t.sharedB ? 0 : t.k * t.n;
      g.strideC = t.m * t.n;
      std::vector<uint16_t> a = random16(t.batch * t.m * t.k, f16, rng);
      std::vector<uint16_t> b =
          random16((t.sharedB ? 1 : t.batch) * t.k * t.n, f16, rng);
      std::vector<uint16_t> c(t.batch * t.m * t.n, 0xffff);
      CpuMatmul matmul;
      std::string error;
      ASSERT_TRUE(matmul.runHalf(g, f16, a.data(), b.data(), c.data(), dnnl,
                                 &error))
          << error;
      // Where oneDNN 2 is installed (scripts/setup.sh), it ran the bf16
      // GEMM on CPUs with AVX-512 (avx512_core: its bf16 matmul needs it;
      // elsewhere, e.g. an AMD EPYC with AVX2 alone, the CBLAS path runs);
      // its f16 matmul needs avx512_fp16, which few CPUs have.
      bool avx512core = __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512dq");
      if (dnnl && !f16 && dnnlMajorVersion() == 2 && avx512core)
        EXPECT_STREQ(matmul.lastLibrary(), "onednn");
      if (!dnnl)
        EXPECT_STREQ(matmul.lastLibrary(), "cblas");
      int64_t exact = 0, total = 0;
      for (int64_t i = 0; i < t.batch; ++i)
        for (int64_t r = 0; r < t.m; ++r)
          for (int64_t col = 0; col < t.n; ++col) {
            double sum = 0;
            for (int64_t x = 0; x < t.k; ++x) {
              double av = widen(
                  a[i * g.strideA + (t.transA ? x * t.m + r : r * t.k + x)]);
              double bv = widen(
                  b[i * g.strideB +
                    (t.transB ? col * t.k + x : x * t.n + col)]);
              sum += av * bv;
            }
            uint16_t want = narrow(static_cast<float>(sum));
            uint16_t got = c[i * g.strideC + r * t.n + col];
            // One ulp: neighbouring bit patterns of the same sign.
            EXPECT_LE(std::abs(int(got) - int(want)), 1)
                << "element " << i << "," << r << "," << col << ": got "
                << widen(got) << ", want " << widen(want);
            exact += got == want;
            ++total;
          }
      EXPECT_GE(exact * 10, total * 9) << exact << " of " << total
                                       << " exact";
    }
}

} // namespace
} // namespace loomrt::test
