// Rotary position embedding, rotate-half convention (GPT-NeoX / Llama / HF):
// for i < D/2, with f_i = theta^(-2i/D) and angle = pos * f_i,
//   y[i]       = x[i] * cos - x[i + D/2] * sin
//   y[i + D/2] = x[i + D/2] * cos + x[i] * sin
// Applied in place to x laid out as [B, T, H, D] where consecutive tokens are
// ld floats apart (ld >= H * D; lets Q/K be rotated inside a fused projection).
#pragma once

#include <cstdint>

namespace hymba::cpu {

// Token t of sequence b sits at position pos0[b] + t (pos0 null = all zero).
void rope_forward(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0,
                  float theta);

// The gradient of a rotation is the inverse rotation: transforms dx in place
// from d(rotated) to d(input).
void rope_backward(float* dx, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0,
                   float theta);

}  // namespace hymba::cpu
