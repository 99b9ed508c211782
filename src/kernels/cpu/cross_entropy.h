// Softmax cross-entropy over V classes for N rows, with label smoothing and
// an ignore index. loss_n = (1-eps)*(-log p[y]) + eps * mean_v(-log p[v]),
// averaged over the rows whose target is not kIgnoreIndex.
#pragma once

#include <cstdint>

namespace hymba::cpu {

inline constexpr int32_t kIgnoreIndex = -100;

struct CrossEntropyResult {
  double loss_sum = 0.0;   // sum of per-row losses over scored rows
  int64_t scored = 0;      // rows whose target != kIgnoreIndex
  int64_t correct = 0;     // scored rows whose argmax equals the target
  double mean() const { return scored > 0 ? loss_sum / static_cast<double>(scored) : 0.0; }
};

// losses[N] (may be null) receives each row's loss (0 for ignored rows).
// Throws hymba::Error naming the first target outside [0, V) that is not ignored.
CrossEntropyResult cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N,
                                         int64_t V, float label_smoothing);

// dlogits += dloss * d(sum of row losses)/dlogits; ignored rows get nothing.
// For the mean loss pass dloss = 1 / scored.
void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                            float label_smoothing, float dloss);

}  // namespace hymba::cpu
