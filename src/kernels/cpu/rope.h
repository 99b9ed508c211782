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

// Training rotates every sequence from position 0, with the same angles for
// Q and K of every layer, forward and backward: rope_table computes their
// cos/sin once ([T, D/2] each, position-major) and the *_table variants rotate
// from it, bit-identical to rope_forward / rope_backward with pos0 null.
void rope_table(float* cos_t, float* sin_t, int64_t T, int64_t D, float theta);
void rope_forward_table(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const float* cos_t,
                        const float* sin_t);
void rope_backward_table(float* dx, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const float* cos_t,
                         const float* sin_t);

}  // namespace hymba::cpu
