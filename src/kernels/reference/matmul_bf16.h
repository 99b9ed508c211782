// Plain reference for bf16 weights (kernels/cpu/matmul_bf16.h): the weights
// widened one by one, the product summed in double.
#pragma once

#include <cstdint>
#include <vector>

#include "core/float_formats.h"

namespace hymba::ref {

// out[R, OC] = x[R, C] · widen(W)^T + bias, in double.
inline std::vector<double> matmul_bf16(const float* x, const uint16_t* w, const float* bias, int64_t R, int64_t C,
                                       int64_t OC) {
  std::vector<double> out(static_cast<size_t>(R * OC));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int64_t c = 0; c < C; ++c) sum += double{x[r * C + c]} * bf16_to_f32(w[o * C + c]);
      out[static_cast<size_t>(r * OC + o)] = sum;
    }
  return out;
}

}  // namespace hymba::ref
