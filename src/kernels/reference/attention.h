// Plain scalar reference for masked multi-head attention with GQA, templated
// on the element type so tests can run it in float64 for finite differences.
// It materialises the full [Tq, Tk] score matrix and mask per head: obviously
// correct, quadratic, for tests only. Tensors are contiguous:
//   q [B, Tq, Hq, Dqk], k [B, Tk, Hkv, Dqk], v [B, Tk, Hkv, Dv],
//   out [B, Tq, Hq, Dv], lse [B, Hq, Tq].
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/reference/attention_mask.h"

namespace hymba::ref {

struct AttnShape {
  int64_t B = 0, Tq = 0, Tk = 0, q_offset = 0;
  int64_t Hq = 0, Hkv = 0, Dqk = 0, Dv = 0;
  int64_t window = 0;    // <= 0: global causal
  int64_t num_meta = 0;  // keys j < num_meta visible to every query at or after them
  double scale = 0.0;    // 0 means 1/sqrt(Dqk)
  bool window_symmetric = false;  // the leaks of reference/attention_mask.h
  bool meta_sees_all = false;
  float dropout = 0.0f;       // attention dropout rate (0: none)
  uint64_t dropout_seed = 0;  // its mask's seed
  MaskRules mask() const { return {window, num_meta, window_symmetric, meta_sees_all}; }
};

// out = dropout(softmax(scale * q k^T + mask)) v per head; lse (may be null) receives
// log(sum(exp(scale * scores))) over visible keys. A query that sees no key
// gets zeros and lse = -inf.
template <typename T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttnShape& s) {
  const T scale = s.scale != 0.0 ? T(s.scale) : T(1) / std::sqrt(T(s.Dqk));
  const int64_t group = s.Hq / s.Hkv;
  std::vector<T> scores(s.Tq * s.Tk);
  std::vector<bool> mask(s.Tq * s.Tk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          const T* qi = q + ((b * s.Tq + i) * s.Hq + h) * s.Dqk;
          const T* kj = k + ((b * s.Tk + j) * s.Hkv + g) * s.Dqk;
          T dot = 0;
          for (int64_t d = 0; d < s.Dqk; ++d) dot += qi[d] * kj[d];
          scores[i * s.Tk + j] = scale * dot;
          mask[i * s.Tk + j] = attention_visible(s.q_offset + i, j, s.mask());
        }
      for (int64_t i = 0; i < s.Tq; ++i) {
        T* o = out + ((b * s.Tq + i) * s.Hq + h) * s.Dv;
        for (int64_t d = 0; d < s.Dv; ++d) o[d] = 0;
        T max_score = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < s.Tk; ++j)
          if (mask[i * s.Tk + j] && scores[i * s.Tk + j] > max_score) max_score = scores[i * s.Tk + j];
        T denom = 0;
        for (int64_t j = 0; j < s.Tk; ++j)
          if (mask[i * s.Tk + j]) denom += std::exp(scores[i * s.Tk + j] - max_score);
        if (lse != nullptr) lse[(b * s.Hq + h) * s.Tq + i] = max_score + std::log(denom);
        if (denom == 0) continue;
        const uint64_t row_key = dropout_row_key(s.dropout_seed, b, h, s.q_offset + i);
        for (int64_t j = 0; j < s.Tk; ++j) {
          if (!mask[i * s.Tk + j]) continue;
          T p = std::exp(scores[i * s.Tk + j] - max_score) / denom;
          // Dropout acts on the probabilities after the softmax (lse is unchanged).
          if (s.dropout > 0) p *= dropout_keeps(row_key, j, s.dropout) ? T(1) / (T(1) - T(s.dropout)) : T(0);
          const T* vj = v + ((b * s.Tk + j) * s.Hkv + g) * s.Dv;
          for (int64_t d = 0; d < s.Dv; ++d) o[d] += p * vj[d];
        }
      }
    }
}

}  // namespace hymba::ref
