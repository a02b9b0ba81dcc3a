//===- CpuMatmulTest.cpp - bf16 GEMM steps against a double reference -----===//
//
// Each geometry (transposes, batches, a right operand shared by the batch)
// runs on oneDNN's matmul where libdnnl is installed and on the CBLAS
// fallback; both must equal the exact product of the bf16 operands rounded
// once to bf16, but for the last bit where the f32 sum itself rounds: at
// most one bf16 ulp from the reference, and most elements exact.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuDnnl.h"
#include "cpu/CpuMatmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace loomrt::test {
namespace {

struct Case {
  const char *name;
  int64_t batch, m, n, k;
  bool transA, transB, sharedB;
};

std::vector<uint16_t> randomBf16(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v)
    x = floatToBf16(u(rng));
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

TEST(CpuMatmul, Bf16GemmMatchesTheExactProduct) {
  const Case cases[] = {
      {"plain", 1, 17, 23, 40, false, false, false},
      {"a transposed", 1, 16, 8, 33, true, false, false},
      {"b transposed", 1, 9, 31, 64, false, true, false},
      {"both transposed", 1, 12, 12, 12, true, true, false},
      {"batched", 3, 8, 5, 16, false, false, false},
      {"batched, shared b transposed", 4, 6, 7, 24, false, true, true},
  };
  std::mt19937 rng(7);
  for (const Case &t : cases)
    for (bool dnnl : {true, false}) {
      SCOPED_TRACE(std::string(t.name) + (dnnl ? " (oneDNN if present)"
                                               : " (CBLAS)"));
      GemmStep g;
      g.batch = t.batch, g.m = t.m, g.n = t.n, g.k = t.k;
      g.transA = t.transA, g.transB = t.transB;
      g.strideA = t.m * t.k;
      g.strideB = t.sharedB ? 0 : t.k * t.n;
      g.strideC = t.m * t.n;
      std::vector<uint16_t> a = randomBf16(t.batch * t.m * t.k, rng);
      std::vector<uint16_t> b =
          randomBf16((t.sharedB ? 1 : t.batch) * t.k * t.n, rng);
      std::vector<uint16_t> c(t.batch * t.m * t.n, 0xffff);
      CpuMatmul matmul;
      std::string error;
      ASSERT_TRUE(matmul.runBf16(g, a.data(), b.data(), c.data(), dnnl,
                                 &error))
          << error;
      // Where oneDNN 2 is installed (scripts/setup.sh), it ran the GEMM.
      if (dnnl && dnnlMajorVersion() == 2)
        EXPECT_STREQ(matmul.lastLibrary(), "onednn");
      if (!dnnl)
        EXPECT_STREQ(matmul.lastLibrary(), "cblas");
      int64_t exact = 0, total = 0;
      for (int64_t i = 0; i < t.batch; ++i)
        for (int64_t r = 0; r < t.m; ++r)
          for (int64_t col = 0; col < t.n; ++col) {
            double sum = 0;
            for (int64_t x = 0; x < t.k; ++x) {
              double av = bf16ToFloat(
                  a[i * g.strideA + (t.transA ? x * t.m + r : r * t.k + x)]);
              double bv = bf16ToFloat(
                  b[i * g.strideB +
                    (t.transB ? col * t.k + x : x * t.n + col)]);
              sum += av * bv;
            }
            uint16_t want = floatToBf16(static_cast<float>(sum));
            uint16_t got = c[i * g.strideC + r * t.n + col];
            // One ulp: neighbouring bit patterns of the same sign.
            EXPECT_LE(std::abs(int(got) - int(want)), 1)
                << "element " << i << "," << r << "," << col << ": got "
                << bf16ToFloat(got) << ", want " << bf16ToFloat(want);
            exact += got == want;
            ++total;
          }
      EXPECT_GE(exact * 10, total * 9) << exact << " of " << total
                                       << " exact";
    }
}

} // namespace
} // namespace loomrt::test
