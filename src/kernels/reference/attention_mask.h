// Which keys a query sees, and which attention probabilities dropout keeps:
// the one definition the fast kernel (kernels/cpu/attention.cpp) and the
// scalar reference (reference/attention.h) both follow.
//
// Query at absolute position p, key at position j < Tk:
//   meta_sees_all and p < num_meta:        every key (seed 002's meta-token leak)
//   otherwise the key is visible when
//     (j < num_meta and j <= p)             the meta prefix, causally
//     or in the band:  window <= 0:         j <= p (global causal)
//                      window_symmetric:    |p - j| < window (seed 000's suspected leak)
//                      else:                0 <= p - j < window
// The two leaks let queries read later keys: training and evaluation only.
#pragma once

#include <cstdint>

namespace hymba::ref {

struct MaskRules {
  int64_t window = 0;    // <= 0: global causal
  int64_t num_meta = 0;  // keys j < num_meta stay visible to every query at or after them
  bool window_symmetric = false;
  bool meta_sees_all = false;
};

inline bool attention_visible(int64_t p, int64_t j, const MaskRules& m) {
  if (m.meta_sees_all && p < m.num_meta) return true;
  if (j < m.num_meta && j <= p) return true;
  if (m.window <= 0) return j <= p;
  if (m.window_symmetric) return p - j < m.window && j - p < m.window;
  return j <= p && p - j < m.window;
}

// Attention dropout: a probability is kept (and scaled by 1 / (1 - rate))
// or zeroed by a hash of (seed, batch, query head, query position, key), so
// the forward, the backward and a recomputed forward draw the same mask
// without storing a T x T tensor. splitmix64's finaliser mixes each step.
inline uint64_t dropout_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One row's key, mixed once per (batch, head, query position).
inline uint64_t dropout_row_key(uint64_t seed, int64_t b, int64_t h, int64_t p) {
  return dropout_mix(dropout_mix(dropout_mix(seed ^ static_cast<uint64_t>(b)) ^ static_cast<uint64_t>(h)) ^
                     static_cast<uint64_t>(p));
}

// Whether the probability of key j in that row survives: its top 24 bits,
// read as a uniform in [0, 1), at or above the rate (as Rng::uniform() >= p).
inline bool dropout_keeps(uint64_t row_key, int64_t j, float rate) {
  const uint64_t bits = dropout_mix(row_key ^ static_cast<uint64_t>(j)) >> 40;
  return static_cast<float>(bits) * (1.0f / 16777216.0f) >= rate;
}

}  // namespace hymba::ref
