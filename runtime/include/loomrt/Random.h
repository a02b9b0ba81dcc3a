//===- Random.h - The counter-based random numbers of Loom ------*- C++ -*-===//
//
// One generator for everything random in a Loom program, shared by the
// reference interpreter (lib/Interp), the generated kernels (which compute
// the same arithmetic: lib/Conversion/LoomToLinalg/Elementwise.cpp), the
// runtime's fused kernels and its trainer: a number is a pure function of
// (seed, stream, index), so the forward, the backward and recomputation
// draw the same one, in any order, on any thread.
//
//   splitmix64(x):  z = x + 0x9E3779B97F4A7C15;
//                   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//                   z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//                   z ^ (z >> 31)            (wrapping uint64 arithmetic)
//   key  = splitmix64(uint64(seed) ^ uint64(stream) * 0x9E3779B97F4A7C15)
//   u(i) = double(splitmix64(key + uint64(i)) >> 40) * 2^-24    in [0, 1)
//
// u has 24 random bits, so it is exact in f32 too. loom.dropout drops
// element i when u(i) < ratio (LoomOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_RANDOM_H
#define LOOMRT_RANDOM_H

#include <cstdint>

namespace loomrt {

inline uint64_t splitmix64(uint64_t x) noexcept {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The key of one random op's stream under one seed.
inline uint64_t randomStreamKey(int64_t seed, int64_t stream) noexcept {
  return splitmix64(static_cast<uint64_t>(seed) ^
                    (static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull));
}

/// The uniform number u(index) of the stream whose key is `key`.
inline float randomUniform(uint64_t key, int64_t index) noexcept {
  return static_cast<float>(splitmix64(key + static_cast<uint64_t>(index)) >>
                            40) *
         0x1p-24f;
}

} // namespace loomrt

#endif // LOOMRT_RANDOM_H
