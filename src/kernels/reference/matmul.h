// Plain scalar reference for linear layers, templated on the element type so
// tests can run it in float64 for finite differences.
#pragma once

#include <cstdint>

namespace hymba::ref {

// out[BT, OC] = inp[BT, C] @ weight[OC, C]^T + bias (bias may be null)
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t BT, int64_t C, int64_t OC) {
  for (int64_t r = 0; r < BT; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      T s = bias ? bias[o] : T(0);
      for (int64_t c = 0; c < C; ++c) s += inp[r * C + c] * weight[o * C + c];
      out[r * OC + o] = s;
    }
}

}  // namespace hymba::ref
