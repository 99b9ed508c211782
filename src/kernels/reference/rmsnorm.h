// Plain scalar reference for RMSNorm: out = x / sqrt(mean(x^2) + eps) * weight.
#pragma once

#include <cmath>
#include <cstdint>

namespace hymba::ref {

template <typename T>
void rmsnorm_forward(T* out, const T* x, const T* weight, int64_t N, int64_t C, T eps) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T sum_sq = 0;
    for (int64_t c = 0; c < C; ++c) sum_sq += xr[c] * xr[c];
    const T rstd = T(1) / std::sqrt(sum_sq / static_cast<T>(C) + eps);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = xr[c] * rstd * weight[c];
  }
}

}  // namespace hymba::ref
