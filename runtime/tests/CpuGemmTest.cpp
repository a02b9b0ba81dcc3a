//===- CpuGemmTest.cpp - Tiled CPU GEMMs against a double reference ------===//
//
// cpuSgemm and cpuDgemm cut each product into tiles of C (CpuGemm.cpp). The
// shapes here are large enough to be cut, with sides that are not multiples
// of the tiles (the last tile of a row or column is short), in every
// transpose, batched with strides, with beta 0 (C holding NaN, which must be
// overwritten) and beta 1 (accumulated). Each result is checked against a
// double product, on oneDNN where libdnnl is installed and on OpenBLAS; and
// the f32 results must be bitwise the same on 1, 2 and 3 threads.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuGemm.h"
#include "loomrt/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace loomrt::test {
namespace {

struct Shape {
  int64_t batch, m, n, k;
  bool transA, transB;
};

// 520 x 270 x 130 (18M multiply-adds) is cut into several tiles whatever
// the core count; 37 x 29 x 11 is one tile.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({1, 520, 270, 130, ta, tb});
      out.push_back({3, 300, 410, 70, ta, tb});
      out.push_back({2, 37, 29, 11, ta, tb});
    }
  return out;
}

template <class T> struct Operands {
  std::vector<T> a, b, c;
  int64_t lda, ldb, strideA, strideB, strideC;
};

template <class T> Operands<T> operands(const Shape &s, unsigned seed) {
  Operands<T> o;
  o.lda = s.transA ? s.m : s.k;
  o.ldb = s.transB ? s.k : s.n;
  o.strideA = s.m * s.k, o.strideB = s.k * s.n, o.strideC = s.m * s.n;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  o.a.resize(s.batch * o.strideA);
  o.b.resize(s.batch * o.strideB);
  o.c.resize(s.batch * o.strideC);
  for (T &v : o.a)
    v = static_cast<T>(u(rng));
  for (T &v : o.b)
    v = static_cast<T>(u(rng));
  for (T &v : o.c)
    v = static_cast<T>(u(rng));
  return o;
}

/// Checks C (after beta) against the double product of the operands as
/// stored, within `tol` of the sum of |a||b| of each element.
template <class T>
void expectProduct(const Shape &s, const Operands<T> &o,
                   const std::vector<T> &before, double beta,
                   const std::vector<T> &c, double tol) {
  int bad = 0;
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          double x = o.a[p * o.strideA +
                         (s.transA ? l * o.lda + i : i * o.lda + l)];
          double y = o.b[p * o.strideB +
                         (s.transB ? j * o.ldb + l : l * o.ldb + j)];
          sum += x * y, mag += std::fabs(x * y);
        }
        int64_t at = p * o.strideC + i * s.n + j;
        if (beta != 0)
          sum += beta * before[at], mag += std::fabs(beta * before[at]);
        if (!(std::fabs(c[at] - sum) <= tol * (mag + 1)) && ++bad <= 3)
          ADD_FAILURE() << "C[" << p << "][" << i << "][" << j
                        << "] = " << c[at] << ", expected " << sum;
      }
  EXPECT_EQ(bad, 0);
}

std::string describe(const Shape &s, float beta) {
  return std::to_string(s.batch) + " x " + std::to_string(s.m) + "x" +
         std::to_string(s.n) + "x" + std::to_string(s.k) +
         (s.transA ? " A^T" : "") + (s.transB ? " B^T" : "") + ", beta " +
         std::to_string(int(beta));
}

std::vector<float> runSgemm(const DnnlGemm &gemm, const Shape &s,
                            const Operands<float> &o, float beta) {
  std::vector<float> c = o.c;
  if (beta == 0)
    std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  cpuSgemm(gemm, s.transA, s.transB, s.m, s.n, s.k, o.a.data(), o.lda,
           o.b.data(), o.ldb, beta, c.data(), s.n,
           GemmBatch{s.batch, o.strideA, o.strideB, o.strideC});
  return c;
}

TEST(CpuGemm, TiledSgemmIsTheProductOnEachLibrary) {
  DnnlGemm dnnl;
  dnnl.open(); // oneDNN where installed (unless LOOMRT_CPU_GEMM says not)
  DnnlGemm cblas; // never opened: OpenBLAS
  for (const DnnlGemm *gemm : {&dnnl, &cblas})
    for (const Shape &s : shapes())
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(describe(s, beta) + " on " + cpuGemmLibrary(*gemm));
        Operands<float> o = operands<float>(s, 7);
        expectProduct(s, o, o.c, beta, runSgemm(*gemm, s, o, beta), 1e-5);
      }
}

TEST(CpuGemm, TiledDgemmIsTheProduct) {
  for (const Shape &s : shapes()) {
    SCOPED_TRACE(describe(s, 0));
    Operands<double> o = operands<double>(s, 11);
    std::vector<double> c(o.c.size(),
                          std::numeric_limits<double>::quiet_NaN());
    cpuDgemm(s.transA, s.transB, s.m, s.n, s.k, o.a.data(), o.lda,
             o.b.data(), o.ldb, c.data(), s.n,
             GemmBatch{s.batch, o.strideA, o.strideB, o.strideC});
    expectProduct(s, o, o.c, 0.0, c, 1e-13);
  }
}

TEST(CpuGemm, BitwiseTheSameOnAnyThreadCount) {
  DnnlGemm dnnl;
  dnnl.open();
  DnnlGemm cblas;
  for (const DnnlGemm *gemm : {&dnnl, &cblas})
    for (const Shape &s : shapes()) {
      SCOPED_TRACE(describe(s, 1) + " on " + cpuGemmLibrary(*gemm));
      Operands<float> o = operands<float>(s, 3);
      setCpuThreads(1);
      std::vector<float> one = runSgemm(*gemm, s, o, 1.0f);
      for (int threads : {2, 3}) {
        setCpuThreads(threads);
        std::vector<float> many = runSgemm(*gemm, s, o, 1.0f);
        EXPECT_EQ(std::memcmp(one.data(), many.data(),
                              one.size() * sizeof(float)),
                  0)
            << threads << " threads";
      }
    }
}

} // namespace
} // namespace loomrt::test
