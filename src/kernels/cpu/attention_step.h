// Attention of a decode step: one new query per row, each row (sequence)
// with its own cache of keys and values. It computes what attention_forward
// (kernels/cpu/attention.h) computes for the last row of a sequence, given
// the keys and values the earlier rows left in the cache.
#pragma once

#include <cstdint>

namespace hymba::cpu {

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

// out[b, h * Dv + j] at out + b * ld_out. Each sequence's keys are cut into
// runs of a fixed length whatever the thread count, and the runs merge in
// order, so a row's bits depend neither on the threads nor on the other
// rows of the step.
void attention_step(float* out, int64_t ld_out, const AttnStepArgs& a);

}  // namespace hymba::cpu
