// The causal conv1d of a decode step: one new input per row, each row
// (sequence) with its own state. It computes what conv1d_causal_forward
// (kernels/cpu/conv1d.h) computes for the last row of a sequence, given the
// inputs the earlier rows left in the state.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// Causal conv1d for one new input per row. state[b] is [C, K-1], the last
// K-1 inputs of row b's sequence (oldest first, zeros before the start):
//   out[b, c] = bias[c] + sum_{k<K-1} w[c, k] * state[b][c, k] + w[c, K-1] * x[b, c]
// then the state shifts by one and takes x[b, :]. weight is [C, K] (bias may
// be null); x rows are ld_x floats apart; out is contiguous [B, C]. Channels
// are independent, so the bits do not depend on the thread count.
void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K);

}  // namespace hymba::cpu
