// Plain scalar reference for the attention of a decode step
// (kernels/cpu/attention_step.h): one query per row against the row's cached
// keys and its own new key, templated on the element type so tests can run
// it in float64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hymba::ref {

// The fields of cpu::AttnStepArgs: q [B, Hq * Dqk], k_new [B, Hkv * Dqk],
// v_new [B, Hkv * Dv] (rows ld_* apart); row b's cache holds n_cached[b] rows
// of keys [Hkv * Dqk] and values [Hkv * Dv].
template <typename T>
struct AttnStepArgs {
  int64_t B = 0, Hq = 0, Hkv = 0, Dqk = 0, Dv = 0;
  const T* q = nullptr; int64_t ld_q = 0;
  const T* k_new = nullptr; int64_t ld_k_new = 0;
  const T* v_new = nullptr; int64_t ld_v_new = 0;
  const T* const* k_cache = nullptr;
  const T* const* v_cache = nullptr;
  const int64_t* n_cached = nullptr;
};

// out[b, h * Dv + j] (rows ld_out apart) = softmax over the keys of
// scale * q_h . key, times the values; key j < n_cached[b] is cache row j,
// key n_cached[b] the row's new key. Query head h reads KV head h / (Hq / Hkv);
// scale 1/sqrt(Dqk).
template <typename T>
void attention_step(T* out, int64_t ld_out, const AttnStepArgs<T>& a) {
  const int64_t group = a.Hq / a.Hkv, ld_k = a.Hkv * a.Dqk, ld_v = a.Hkv * a.Dv;
  const T scale = T(1) / std::sqrt(T(a.Dqk));
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t keys = a.n_cached[b] + 1;
    const auto key = [&](int64_t j) {
      return j < a.n_cached[b] ? a.k_cache[b] + j * ld_k : a.k_new + b * a.ld_k_new;
    };
    const auto value = [&](int64_t j) {
      return j < a.n_cached[b] ? a.v_cache[b] + j * ld_v : a.v_new + b * a.ld_v_new;
    };
    std::vector<T> scores(static_cast<size_t>(keys));
    for (int64_t h = 0; h < a.Hq; ++h) {
      const T* qh = a.q + b * a.ld_q + h * a.Dqk;
      const int64_t g = h / group;
      for (int64_t j = 0; j < keys; ++j) {
        T dot = 0;
        for (int64_t d = 0; d < a.Dqk; ++d) dot += qh[d] * key(j)[g * a.Dqk + d];
        scores[static_cast<size_t>(j)] = scale * dot;
      }
      const T most = *std::max_element(scores.begin(), scores.end());
      T total = 0;
      for (T& s : scores) {
        s = std::exp(s - most);
        total += s;
      }
      T* o = out + b * ld_out + h * a.Dv;
      for (int64_t c = 0; c < a.Dv; ++c) {
        T sum = 0;
        for (int64_t j = 0; j < keys; ++j) sum += scores[static_cast<size_t>(j)] * value(j)[g * a.Dv + c];
        o[c] = sum / total;
      }
    }
  }
}

}  // namespace hymba::ref
