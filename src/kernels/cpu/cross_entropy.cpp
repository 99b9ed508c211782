#include "kernels/cpu/cross_entropy.h"

#include <bit>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/fast_math.h"

namespace hymba::cpu {

using fast::exp_nonpositive;

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Row reductions use kLanes interleaved partial results combined in a fixed
// order, so they vectorise and give the same bits on every call.
constexpr int64_t kLanes = 8;

// max is exact and order-free, so a compiler-chosen reduction is deterministic.
float row_max(const float* row, int64_t V) {
  float m = row[0];
#pragma omp simd reduction(max : m)
  for (int64_t v = 1; v < V; ++v) m = row[v] > m ? row[v] : m;
  return m;
}

// sum_v exp(row[v] - max), accumulated in double.
double row_sum_exp(const float* row, int64_t V, float max) {
  double acc[kLanes] = {};
  int64_t v = 0;
  for (; v + kLanes <= V; v += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(exp_nonpositive(row[v + k] - max));
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; v < V; ++v) s += static_cast<double>(exp_nonpositive(row[v] - max));
  return s;
}

// sum_v row[v] in double (logits of +-1000 over 1e5 classes stay exact enough).
double row_sum(const float* row, int64_t V) {
  double acc[kLanes] = {};
  int64_t v = 0;
  for (; v + kLanes <= V; v += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(row[v + k]);
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; v < V; ++v) s += static_cast<double>(row[v]);
  return s;
}

// Lowest index holding the maximum (torch.argmax picks the first too).
int64_t first_index_of(const float* row, int64_t V, float max) {
  for (int64_t v = 0; v < V; ++v)
    if (row[v] == max) return v;
  return 0;
}

// Checked up front and serially: an exception must not escape an OpenMP region.
void check_inputs(const int32_t* targets, int64_t N, int64_t V, float label_smoothing, const char* who) {
  HYMBA_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, who, ": label_smoothing = ", label_smoothing,
              " must lie in [0, 1]");
  for (int64_t n = 0; n < N; ++n)
    HYMBA_CHECK(targets[n] == kIgnoreIndex || (targets[n] >= 0 && targets[n] < V), who, ": target ", targets[n],
                " in row ", n, " is outside [0, ", V, ") and is not the ignore index ", kIgnoreIndex);
}

}  // namespace

CrossEntropyResult cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N,
                                         int64_t V, float label_smoothing) {
  check_inputs(targets, N, V, label_smoothing, "cross_entropy_forward");
  const double eps = label_smoothing;
  // Per-row results first, then a serial sum in row order: the total does not
  // depend on the thread count.
  std::vector<double> row_loss(static_cast<size_t>(N), 0.0);
  std::vector<unsigned char> row_correct(static_cast<size_t>(N), 0);
#pragma omp parallel for schedule(static) if (N * V >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const int32_t y = targets[n];
    if (y == kIgnoreIndex) continue;
    const float* row = logits + n * V;
    const float max = row_max(row, V);
    const double lse = static_cast<double>(max) + std::log(row_sum_exp(row, V, max));
    // (1 - eps)(lse - row[y]) + eps * mean_v(lse - row[v])
    double loss = lse - (1.0 - eps) * static_cast<double>(row[y]);
    if (eps > 0.0) loss -= eps * row_sum(row, V) / static_cast<double>(V);
    row_loss[n] = loss;
    row_correct[n] = first_index_of(row, V, max) == y ? 1 : 0;
  }
  CrossEntropyResult result;
  for (int64_t n = 0; n < N; ++n) {
    if (losses != nullptr) losses[n] = static_cast<float>(row_loss[n]);
    if (targets[n] == kIgnoreIndex) continue;
    result.loss_sum += row_loss[n];
    result.scored += 1;
    result.correct += row_correct[n];
  }
  return result;
}

void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                            float label_smoothing, float dloss) {
  if (dlogits == nullptr) return;
  check_inputs(targets, N, V, label_smoothing, "cross_entropy_backward");
  // d loss / d logit_v = p_v - (1 - eps) [v == y] - eps / V
  const float smooth = V > 0 ? dloss * label_smoothing / static_cast<float>(V) : 0.0f;
  const float hit = dloss * (1.0f - label_smoothing);
#pragma omp parallel for schedule(static) if (N * V >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const int32_t y = targets[n];
    if (y == kIgnoreIndex) continue;
    const float* __restrict row = logits + n * V;
    float* __restrict d = dlogits + n * V;
    const float max = row_max(row, V);
    const float scale = static_cast<float>(static_cast<double>(dloss) / row_sum_exp(row, V, max));
    for (int64_t v = 0; v < V; ++v) d[v] += exp_nonpositive(row[v] - max) * scale - smooth;
    d[y] -= hit;
  }
}

}  // namespace hymba::cpu
