// Plain scalar reference for softmax cross-entropy with label smoothing and
// an ignore index (PyTorch semantics).
#pragma once

#include <cmath>
#include <cstdint>

namespace hymba::ref {

// Returns the sum of per-row losses over rows whose target != ignore_index;
// losses[N] (may be null) gets each row's loss (0 when ignored).
// loss = (1 - eps) * (-log p[y]) + eps * mean_v(-log p[v]), with
// -log p[v] = logsumexp(logits) - logits[v]. Targets must be valid.
template <typename T>
T cross_entropy_forward(T* losses, const T* logits, const int32_t* targets, int64_t N, int64_t V, T eps,
                        int32_t ignore_index = -100) {
  T total = 0;
  for (int64_t n = 0; n < N; ++n) {
    T loss = 0;
    if (targets[n] != ignore_index) {
      const T* row = logits + n * V;
      T max = row[0];
      for (int64_t v = 1; v < V; ++v) max = row[v] > max ? row[v] : max;
      T sum_exp = 0;
      for (int64_t v = 0; v < V; ++v) sum_exp += std::exp(row[v] - max);
      const T lse = max + std::log(sum_exp);
      T mean_nll = 0;
      for (int64_t v = 0; v < V; ++v) mean_nll += lse - row[v];
      mean_nll /= static_cast<T>(V);
      loss = (T(1) - eps) * (lse - row[targets[n]]) + eps * mean_nll;
    }
    if (losses) losses[n] = loss;
    total += loss;
  }
  return total;
}

}  // namespace hymba::ref
