//===- Half.h - bf16 and f16 <-> f32, bit by bit ---------------*- C++ -*-===//
//
// The runtime's 16-bit conversions, with no compiler support for _Float16 or
// __bf16 needed: widening is exact; narrowing rounds to nearest even, keeps
// NaN a NaN and sends values past the largest finite one to infinity.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_HALF_H
#define LOOMRT_SRC_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loomrt {

inline float bf16ToFloat(uint16_t v) noexcept {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it one
    return uint16_t((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

/// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float halfToFloat(uint16_t h) noexcept {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24, exact
    float f = std::ldexp(float(mantissa), -24);
    return sign ? -f : f;
  }
  uint32_t bits = exponent == 31
                      ? sign | 0x7f800000u | (mantissa << 13)
                      : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToHalf(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  if (magnitude >= 0x477ff000u) // rounds past 65504: infinity
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) { // below 2^-14: a multiple of 2^-24
    float scaled = std::fabs(f) * 16777216.0f; // exact
    return sign | uint16_t(std::nearbyint(scaled));
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a carry into the exponent is the right result.
  magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);
  return sign | uint16_t(magnitude >> 13);
}

} // namespace loomrt

#endif // LOOMRT_SRC_HALF_H
