// Depthwise causal 1-D convolution over time (Mamba's conv1d, groups = C):
//   out[b, t, c] = bias[c] + sum_{k<K} weight[c, k] * x[b, t - (K-1) + k, c]
// with x = 0 before t = 0. weight is [C, K] (HF conv1d.weight [C, 1, K]).
// x rows (tokens) are ld_x floats apart, so the Mamba x-slice of a fused
// in_proj output is read in place; out is contiguous [B, T, C].
#pragma once

#include <cstdint>

namespace hymba::cpu {

void conv1d_causal_forward(float* out, const float* x, int64_t ld_x, const float* weight, const float* bias,
                           int64_t B, int64_t T, int64_t C, int64_t K);

// dx (row stride ld_dx) += ..., dweight [C, K] += ..., dbias [C] += ...
// (any may be null). Deterministic for any thread count.
void conv1d_causal_backward(float* dx, int64_t ld_dx, float* dweight, float* dbias, const float* dout,
                            const float* x, int64_t ld_x, const float* weight, int64_t B, int64_t T, int64_t C,
                            int64_t K);

}  // namespace hymba::cpu
