// The Mamba-1 recurrence of a decode step: the selective scan for one new
// token per row, each row (sequence) with its own state. It computes what
// selective_scan_forward (kernels/cpu/selective_scan.h) computes for the
// last row of a sequence, given the state the earlier rows left behind.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// One Mamba-1 recurrence step per row (the selective scan for T = 1):
//   dt      = softplus(delta[b, d] + delta_bias[d])
//   h[d, n] = exp(dt * A[d, n]) * h[d, n] + dt * Bm[b, n] * u[b, d]
//   y[b, d] = (sum_n Cm[b, n] * h[d, n] + Dskip[d] * u[b, d]) * silu(z[b, d])
// h[b] is row b's SSM state [D, N], updated in place. A is -exp(A_log),
// computed once by the caller. y, u and delta are contiguous [B, D]; z may
// be null (no gate).
struct SsmStepArgs {
  int64_t B = 0, D = 0, N = 0;
  const float* u = nullptr;
  const float* delta = nullptr;
  const float* delta_bias = nullptr;  // [D]
  const float* A = nullptr;           // [D, N]
  const float* Bm = nullptr; int64_t ld_B = 0;
  const float* Cm = nullptr; int64_t ld_C = 0;
  const float* Dskip = nullptr;       // [D]
  const float* z = nullptr; int64_t ld_z = 0;
};
// Rows (b, d) are independent, so the bits do not depend on the thread count.
void ssm_step(float* y, float* const* h, const SsmStepArgs& a);

}  // namespace hymba::cpu
