// Masked multi-head attention with GQA, computed flash-style: online softmax
// over key tiles, no T x T score or mask tensor; the forward saves only the
// log-sum-exp per (query, head) and the backward recomputes scores.
// Mask for query position i and key position j:
//   j <= i  AND  (i - j < window  OR  j < num_meta)        (window <= 0: global)
// unless one of the two leaks is on (window_symmetric: |i - j| < window;
// meta_sees_all: queries i < num_meta see every key); the rules are
// kernels/reference/attention_mask.h's. Optional dropout on the attention
// probabilities, its mask a hash of (seed, b, h, i, j) drawn again by the
// backward. Query head h reads key/value head h / (Hq / Hkv).
#pragma once

#include <cstdint>

namespace hymba::cpu {

struct AttnArgs {
  int64_t B = 0;
  int64_t Tq = 0;        // queries per sequence
  int64_t Tk = 0;        // keys per sequence (Tk = Tq for training)
  int64_t q_offset = 0;  // query i sits at absolute position q_offset + i; key j at j
  int64_t Hq = 0, Hkv = 0, Dqk = 0, Dv = 0;
  const float* q = nullptr; int64_t ld_q = 0;  // q[b,i,h,:] at q + (b*Tq + i)*ld_q + h*Dqk
  const float* k = nullptr; int64_t ld_k = 0;  // k[b,j,g,:] at k + (b*Tk + j)*ld_k + g*Dqk
  const float* v = nullptr; int64_t ld_v = 0;  // v[b,j,g,:] at v + (b*Tk + j)*ld_v + g*Dv
  int64_t window = 0;    // <= 0: global causal attention
  int64_t num_meta = 0;  // keys j < num_meta stay visible to every later query
  float scale = 0.0f;    // 0 means 1/sqrt(Dqk)
  bool window_symmetric = false;  // local queries also see the window - 1 following keys (a leak)
  bool meta_sees_all = false;     // meta queries (i < num_meta) see every key (a leak)
  float dropout = 0.0f;           // rate of dropout on the probabilities (0: none; training only)
  uint64_t dropout_seed = 0;
};

// out[b,i,h,:] at out + (b*Tq + i)*ld_out + h*Dv. lse: [B, Hq, Tq] (may be
// null for inference). A query with no visible key gets zeros (cannot happen
// when q_offset + i < Tk, since the diagonal is always visible).
void attention_forward(float* out, int64_t ld_out, float* lse, const AttnArgs& a);

// dq/dk/dv accumulate (+=) with the same layouts as q/k/v (row strides given);
// any may be null. out and lse come from the forward with the same args.
// Deterministic for any thread count (parallel over (b, kv head)).
void attention_backward(float* dq, int64_t ld_dq, float* dk, int64_t ld_dk, float* dv, int64_t ld_dv,
                        const float* dout, int64_t ld_dout, const float* out, int64_t ld_out, const float* lse,
                        const AttnArgs& a);

}  // namespace hymba::cpu
