//===- CpuSoftmaxMath.h - Vectorizable exp, max and sums for softmaxes ----===//
//
// The row operations of the CPU backend's softmaxes (the attention steps'
// online softmax, the linear_cross_entropy steps' log-softmax): written as
// plain loops over independent lanes so that the compiler vectorizes them
// for whatever target the caller is compiled for. They are always inlined,
// so a caller built for AVX-512 (a target attribute) gets AVX-512 code and
// nothing compiled for it leaks to a baseline caller.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUSOFTMAXMATH_H
#define LOOMRT_SRC_CPU_CPUSOFTMAXMATH_H

#include <cstdint>
#include <cstring>
#include <limits>

#ifndef LOOMRT_INLINE
#if defined(__clang__) || defined(__GNUC__)
#define LOOMRT_INLINE inline __attribute__((always_inline))
#else
#define LOOMRT_INLINE inline
#endif
#endif

namespace loomrt::softmax {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

/// exp(x) in f32 for the softmax (x <= 0 there), branch-free so that loops
/// over it vectorize: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by Cephes'
/// expf polynomial (relative error ~1e-7), 2^n through the exponent bits.
/// Below -87 (and -inf, a masked score) it is 0; NaN stays NaN.
LOOMRT_INLINE float expF32(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // Adding 1.5 * 2^23 rounds to an integer in the default rounding mode.
  const float kRound = 12582912.0f;
  float c = x > -87.0f ? x : -87.0f; // NaN too: n below must be finite
  c = c < 88.0f ? c : 88.0f;
  float n = (c * kLog2e + kRound) - kRound;
  float r = c - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x != x ? x : (x < -87.0f ? 0.0f : p * scale);
}

/// Lanes of the reductions below: independent partial results, so the
/// loops vectorize without reassociating floating-point sums.
constexpr int kLanes = 16;

/// max(a, b), NaN if either is: a NaN score must not pass for a masked
/// one (whose row would then quietly become 0).
LOOMRT_INLINE float maxNaN(float a, float b) {
  return a != a ? a : (b > a || b != b ? b : a);
}

/// max(x[0 .. n)) (NaN if one is); -inf for none.
LOOMRT_INLINE float rowMax(const float *x, int64_t n) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l)
    lanes[l] = kMinusInf;
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] = maxNaN(lanes[l], x[c + l]);
  for (; c < n; ++c)
    lanes[0] = maxNaN(lanes[0], x[c]);
  float m = lanes[0];
  for (int l = 1; l < kLanes; ++l)
    m = maxNaN(m, lanes[l]);
  return m;
}

/// x[c] = exp(x[c] - shift) for c < n; returns their sum.
LOOMRT_INLINE float expRow(float *x, int64_t n, float shift) {
  float lanes[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      float e = expF32(x[c + l] - shift);
      x[c + l] = e;
      lanes[l] += e;
    }
  for (; c < n; ++c) {
    float e = expF32(x[c] - shift);
    x[c] = e;
    lanes[0] += e;
  }
  float sum = 0;
  for (int l = 0; l < kLanes; ++l)
    sum += lanes[l];
  return sum;
}

} // namespace loomrt::softmax

#endif // LOOMRT_SRC_CPU_CPUSOFTMAXMATH_H
