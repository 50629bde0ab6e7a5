// Counter-based random numbers: a value is a pure function of (seed, stream,
// index), so any backend, device or thread computes the same number for the
// same element without sharing generator state.
#pragma once

#include "llvm/ADT/StringRef.h"

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

// Standard normals by Box-Muller on two counter-based uniforms: element i is
// sqrt(-2 log(1 - u(2i))) * cos(2 pi u(2i + 1)). out[j] is the normal of
// index first + j. The logarithm and cosine are mgc's own (Random.cpp), so
// the values are the same on every machine and instruction set, and the
// loop vectorises.
void standardNormals(uint64_t seed, uint64_t stream, uint64_t first,
                     int64_t count, double *out);

inline double standardNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  double z;
  standardNormals(seed, stream, index, 1, &z);
  return z;
}

} // namespace mgc
