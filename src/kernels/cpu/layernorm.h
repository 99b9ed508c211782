// LayerNorm over the last dimension, with weight and bias (GPT-2 / GPT-Neo):
// out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) with the
// biased variance. N rows, C channels, contiguous.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// mean[N] and rstd[N] are saved for the backward pass (either may be null
// when not training). bias may be null (no bias).
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps);

// dx += ..., dweight += ..., dbias += ... (any may be null). Deterministic for
// any thread count.
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);

}  // namespace hymba::cpu
