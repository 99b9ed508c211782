// Single-token kernels for cached decoding: one new row per sequence, each
// sequence with its own cache (so every per-sequence state is passed as a
// pointer per row). They compute what the full-sequence kernels compute for
// the last row of a sequence, given the state the earlier rows left behind.
#pragma once

#include <cstdint>

namespace hymba::infer {

// out[rows, OC] = in[rows, C] @ w[OC, C]^T (row strides ld_out, ld_in), the
// model graph's LinearFn. One row goes through the row-dot kernel of bf16
// weights on float32 (kernels/cpu/matmul_bf16.h: a fixed summation order, so
// the same bits on any team or thread count; OpenBLAS's sgemm with one row
// packs the whole weight on every call and runs 4-5x slower); more rows use
// the graph's matmul kernel.
void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
            int64_t OC);

// Causal conv1d for one new input per row. state[b] is [C, K-1], the last
// K-1 inputs of row b's sequence (oldest first, zeros before the start):
//   out[b, c] = bias[c] + sum_{k<K-1} w[c, k] * state[b][c, k] + w[c, K-1] * x[b, c]
// then the state shifts by one and takes x[b, :]. weight is [C, K] (bias may
// be null); x rows are ld_x floats apart; out is contiguous [B, C].
void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K);

// One Mamba-1 recurrence step per row (the selective scan for T = 1):
//   dt      = softplus(delta[b, d] + delta_bias[d])
//   h[d, n] = exp(dt * A[d, n]) * h[d, n] + dt * Bm[b, n] * u[b, d]
//   y[b, d] = (sum_n Cm[b, n] * h[d, n] + Dskip[d] * u[b, d]) * silu(z[b, d])
// h[b] is row b's SSM state [D, N], updated in place. A is -exp(A_log),
// computed once by the caller. y, u and delta are contiguous [B, D].
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
void ssm_step(float* y, float* const* h, const SsmStepArgs& a);

// One query per row against the row's cached keys plus its own new key:
// row b attends to n_cached[b] cache rows and then (k_new, v_new) of row b.
// Every key is visible (the cache holds exactly the window), and softmax does
// not depend on key order, so a ring buffer can be passed as it lies.
// Query head h reads key/value head h / (Hq / Hkv); scale 1/sqrt(Dqk).
struct AttnStepArgs {
  int64_t B = 0, Hq = 0, Hkv = 0, Dqk = 0, Dv = 0;
  const float* q = nullptr; int64_t ld_q = 0;          // [B, Hq * Dqk], RoPE applied
  const float* k_new = nullptr; int64_t ld_k_new = 0;  // [B, Hkv * Dqk], RoPE applied
  const float* v_new = nullptr; int64_t ld_v_new = 0;  // [B, Hkv * Dv]
  const float* const* k_cache = nullptr;               // per row: [n_cached[b], Hkv * Dqk]
  const float* const* v_cache = nullptr;               // per row: [n_cached[b], Hkv * Dv]
  const int64_t* n_cached = nullptr;
};
// out[b, h * Dv + j] at out + b * ld_out.
void attention_step(float* out, int64_t ld_out, const AttnStepArgs& a);

}  // namespace hymba::infer
