// Plain scalar reference for LayerNorm with weight and (optional) bias:
// out = (x - mean) / sqrt(var + eps) * weight + bias, biased variance.
#pragma once

#include <cmath>
#include <cstdint>

namespace hymba::ref {

template <typename T>
void layernorm_forward(T* out, const T* x, const T* weight, const T* bias, int64_t N, int64_t C, T eps) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T mean = 0;
    for (int64_t c = 0; c < C; ++c) mean += xr[c];
    mean /= static_cast<T>(C);
    T var = 0;
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<T>(C);
    const T rstd = T(1) / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c)
      out[n * C + c] = (xr[c] - mean) * rstd * weight[c] + (bias != nullptr ? bias[c] : T(0));
  }
}

}  // namespace hymba::ref
