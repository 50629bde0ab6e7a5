// Counter-based random numbers: a value is a pure function of (seed, stream,
// index), so any backend, device or thread computes the same number for the
// same element without sharing generator state.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>

namespace mgc {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of a name: the stream of a parameter.
inline uint64_t hashName(llvm::StringRef name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t randomBits(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(seed ^ splitmix64(stream)) + index);
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return (randomBits(seed, stream, index) >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller on two counter-based uniforms.
inline double standardNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform01(seed, stream, 2 * index);
  double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
}

} // namespace mgc
