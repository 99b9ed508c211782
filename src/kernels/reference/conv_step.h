// Plain scalar reference for the causal conv1d of a decode step
// (kernels/cpu/conv_step.h), templated on the element type so tests can run
// it in float64.
#pragma once

#include <cstdint>

namespace hymba::ref {

// out[b, c] = bias[c] + sum_{k<K-1} weight[c, k] * state[b][c, k] + weight[c, K-1] * x[b, c];
// then row b's state [C, K-1] drops its oldest input and takes x[b, c].
// x rows are ld_x apart; out is [B, C]; bias may be null.
template <typename T>
void conv_step(T* out, const T* x, int64_t ld_x, T* const* state, const T* weight, const T* bias, int64_t B,
               int64_t C, int64_t K) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      T* s = state[b] + c * (K - 1);
      const T xv = x[b * ld_x + c];
      T acc = bias ? bias[c] : T(0);
      for (int64_t k = 0; k < K - 1; ++k) acc += weight[c * K + k] * s[k];
      out[b * C + c] = acc + weight[c * K + K - 1] * xv;
      for (int64_t k = 0; k + 1 < K - 1; ++k) s[k] = s[k + 1];
      if (K > 1) s[K - 2] = xv;
    }
}

}  // namespace hymba::ref
