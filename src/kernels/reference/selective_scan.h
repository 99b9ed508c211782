// Plain scalar reference for the Mamba-1 selective scan: the sequential
// recurrence exactly as written in kernels/cpu/selective_scan.h, on contiguous
// inputs, templated on the element type so tests can run it in float64.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/reference/activations.h"  // softplus (PyTorch: beta 1, threshold 20)

namespace hymba::ref {

// Inputs: u, delta, z [B, L, D]; Bm, Cm [B, L, N]; A_log [D, N]; delta_bias,
// Dskip [D]; h0 [B, D, N]. delta_bias, Dskip, z, h0 may be null. Outputs:
// y [B, L, D] and, if non-null, h_last [B, D, N] (the state after token L-1).
template <typename T>
void selective_scan_forward(T* y, T* h_last, const T* u, const T* delta, const T* delta_bias, bool delta_softplus,
                            const T* A_log, const T* Bm, const T* Cm, const T* Dskip, const T* z, const T* h0,
                            int64_t B, int64_t L, int64_t D, int64_t N) {
  std::vector<T> h(N);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t n = 0; n < N; ++n) h[n] = h0 ? h0[(b * D + d) * N + n] : T(0);
      for (int64_t t = 0; t < L; ++t) {
        const int64_t row = b * L + t;
        T dt = delta[row * D + d] + (delta_bias ? delta_bias[d] : T(0));
        if (delta_softplus) dt = softplus(dt);
        const T ut = u[row * D + d];
        T out = Dskip ? Dskip[d] * ut : T(0);
        for (int64_t n = 0; n < N; ++n) {
          const T A = -std::exp(A_log[d * N + n]);
          h[n] = std::exp(dt * A) * h[n] + dt * Bm[row * N + n] * ut;
          out += Cm[row * N + n] * h[n];
        }
        if (z) {
          const T zt = z[row * D + d];
          out *= zt / (T(1) + std::exp(-zt));
        }
        y[row * D + d] = out;
      }
      if (h_last)
        for (int64_t n = 0; n < N; ++n) h_last[(b * D + d) * N + n] = h[n];
    }
}

}  // namespace hymba::ref
