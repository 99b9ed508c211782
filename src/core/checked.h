// Overflow-checked size arithmetic. Sizes come from user files (config.json,
// safetensors headers, flags); a product that wraps around would size a buffer
// too small and turn into a crash or a silently empty tensor, so every size
// product goes through these and a wrap becomes a one-line hymba::Error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "core/error.h"

namespace hymba {

// a * b, or hymba::Error "<what> = a x b overflows 64-bit integers".
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) fail(what, " = ", a, " x ", b, " overflows 64-bit integers");
  return out;
}

// a + b, or hymba::Error "<what> = a + b overflows 64-bit integers".
inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) fail(what, " = ", a, " + ", b, " overflows 64-bit integers");
  return out;
}

// The product of every factor, checked at each step.
inline int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view what) {
  int64_t out = 1;
  for (int64_t f : factors) out = checked_mul(out, f, what);
  return out;
}

}  // namespace hymba
