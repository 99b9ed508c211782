// RMSNorm over the last dimension: out = x * rstd * weight,
// rstd = 1 / sqrt(mean(x^2) + eps). N rows, C channels, contiguous.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// rstd[N] is saved for the backward pass (may be null when not training).
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C,
                     float eps);

// dx += ..., dweight += ... (either may be null). Deterministic for any
// thread count.
void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* weight,
                      const float* rstd, int64_t N, int64_t C);

}  // namespace hymba::cpu
