// Eight float (or int32) lanes as one value: the GCC/Clang vector extension,
// one AVX register (SSE pairs without AVX); sixteen as Vec16. Kernels written in plain C++ use
// it where GCC, with its default -ftrapping-math, would leave a loop scalar
// (selects, maxima) or keep accumulators as arrays it spills.
#pragma once

#include <cstdint>
#include <cstring>

namespace hymba::cpu {

using Vec8 = float __attribute__((vector_size(32)));
using Int8 = int32_t __attribute__((vector_size(32)));

inline Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof(v)); }

inline Vec8 splat8(float x) { return Vec8{x, x, x, x, x, x, x, x}; }

// Sixteen float lanes: one AVX-512 register, or an AVX2 pair. Lane-wise
// arithmetic gives the same bits at either width.
using Vec16 = float __attribute__((vector_size(64)));

inline Vec16 load16(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store16(float* p, Vec16 v) { std::memcpy(p, &v, sizeof(v)); }

// The lane sums of eight vectors, as one vector: lane i is the sum of a[i]'s
// lanes in the tree ((0+1) + (2+3)) + ((4+5) + (6+7)). Transposing costs 7
// adds and 14 shuffles for the eight sums, where summing each vector apart
// spends 7 adds and as many extracts on each.
inline Vec8 lane_sums8(const Vec8* a) {
  auto pairs = [](Vec8 x, Vec8 y) {
    return __builtin_shufflevector(x, y, 0, 8, 2, 10, 4, 12, 6, 14) +
           __builtin_shufflevector(x, y, 1, 9, 3, 11, 5, 13, 7, 15);
  };
  auto quads = [](Vec8 x, Vec8 y) {
    return __builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15);
  };
  const Vec8 lo = quads(pairs(a[0], a[1]), pairs(a[2], a[3]));
  const Vec8 hi = quads(pairs(a[4], a[5]), pairs(a[6], a[7]));
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(lo, hi, 4, 5, 6, 7, 12, 13, 14, 15);
}

}  // namespace hymba::cpu
