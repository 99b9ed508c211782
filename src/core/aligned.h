// Cache-line aligned float storage, used for parameter blocks and arenas.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace hymba {

inline constexpr std::size_t kAlignment = 64;

struct AlignedFree {
  void operator()(float* p) const noexcept { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;

// Allocates n floats, zero-filled, 64-byte aligned. n == 0 gives nullptr.
inline AlignedFloats make_aligned_floats(std::size_t n) {
  if (n == 0) return AlignedFloats(nullptr);
  std::size_t bytes = (n * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return AlignedFloats(static_cast<float*>(p));
}

}  // namespace hymba
