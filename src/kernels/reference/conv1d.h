// Plain scalar reference for the depthwise causal conv1d, on contiguous
// inputs, templated on the element type so tests can run it in float64.
#pragma once

#include <cstdint>

namespace hymba::ref {

// out[b, t, c] = bias[c] + sum_k weight[c, k] * x[b, t - (K-1) + k, c], with x
// zero before t = 0. x, out [B, L, C]; weight [C, K]; bias [C] or null.
template <typename T>
void conv1d_causal_forward(T* out, const T* x, const T* weight, const T* bias, int64_t B, int64_t L, int64_t C,
                           int64_t K) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) {
        T s = bias ? bias[c] : T(0);
        for (int64_t k = 0; k < K; ++k) {
          const int64_t src = t - (K - 1) + k;
          if (src >= 0) s += weight[c * K + k] * x[(b * L + src) * C + c];
        }
        out[(b * L + t) * C + c] = s;
      }
}

}  // namespace hymba::ref
