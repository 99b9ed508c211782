// Plain scalar reference for the Mamba-1 recurrence of a decode step
// (kernels/cpu/ssm_step.h): the selective scan's recurrence for one token,
// templated on the element type so tests can run it in float64.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/reference/activations.h"  // softplus (PyTorch: beta 1, threshold 20), silu

namespace hymba::ref {

// The fields of cpu::SsmStepArgs: u, delta, y [B, D]; Bm, Cm, z rows ld_B,
// ld_C, ld_z apart; A = -exp(A_log) [D, N]; delta_bias, Dskip [D]; z may be
// null (no gate).
template <typename T>
struct SsmStepArgs {
  int64_t B = 0, D = 0, N = 0;
  const T* u = nullptr;
  const T* delta = nullptr;
  const T* delta_bias = nullptr;
  const T* A = nullptr;
  const T* Bm = nullptr; int64_t ld_B = 0;
  const T* Cm = nullptr; int64_t ld_C = 0;
  const T* Dskip = nullptr;
  const T* z = nullptr; int64_t ld_z = 0;
};

// dt = softplus(delta + delta_bias); h = exp(dt * A) * h + dt * Bm * u;
// y = (Cm . h + Dskip * u) * silu(z). h[b] is row b's state [D, N], updated
// in place.
template <typename T>
void ssm_step(T* y, T* const* h, const SsmStepArgs<T>& a) {
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t d = 0; d < a.D; ++d) {
      const T u = a.u[b * a.D + d];
      const T dt = softplus(a.delta[b * a.D + d] + a.delta_bias[d]);
      T* hs = h[b] + d * a.N;
      T out = 0;
      for (int64_t n = 0; n < a.N; ++n) {
        hs[n] = std::exp(dt * a.A[d * a.N + n]) * hs[n] + dt * a.Bm[b * a.ld_B + n] * u;
        out += a.Cm[b * a.ld_C + n] * hs[n];
      }
      out += a.Dskip[d] * u;
      y[b * a.D + d] = a.z ? out * silu(a.z[b * a.ld_z + d]) : out;
    }
}

}  // namespace hymba::ref
