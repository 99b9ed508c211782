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

}  // namespace hymba::cpu
