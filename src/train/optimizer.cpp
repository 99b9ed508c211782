#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace hymba {

void adamw_step(ParamTable& table, const AdamWConfig& cfg, double lr, int64_t t) {
  HYMBA_CHECK(table.has_grads() && table.has_optimizer(), "optimizer: model has no gradients or moments");
  const float b1 = static_cast<float>(cfg.beta1), b2 = static_cast<float>(cfg.beta2);
  // Bias corrections folded into the step size, as in the Adam paper.
  const double c1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(t));
  const double c2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(t));
  const float step = static_cast<float>(lr * std::sqrt(c2) / c1);
  const float eps_hat = static_cast<float>(cfg.eps * std::sqrt(c2));
  // One parallel region for the whole table (waking the pool once, not once
  // per tensor); tensors are independent, so no barrier between them.
#pragma omp parallel
  table.for_each([&](ParamSlot& s) {
    const bool decays = cfg.decay_all || s.info.weight_decay;
    const float decay = decays ? static_cast<float>(1.0 - lr * cfg.weight_decay) : 1.0f;
    const int64_t n = s.numel();
    float* __restrict w = s.value;
    float* __restrict g = s.grad;
    float* __restrict m = s.m;
    float* __restrict v = s.v;
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      w[i] = w[i] * decay - step * m[i] / (std::sqrt(v[i]) + eps_hat);
    }
  });
}

double grad_global_norm(const ParamTable& table) {
  HYMBA_CHECK(table.has_grads(), "optimizer: model has no gradients");
  const float* g = table.grads_block();
  const int64_t n = table.total_floats();
  // Fixed-size chunks summed in index order: independent of the thread count.
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += static_cast<double>(g[i]) * g[i];
    partial[static_cast<size_t>(c)] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return std::sqrt(total);
}

void scale_grads(ParamTable& table, float s) {
  float* g = table.grads_block();
  const int64_t n = table.total_floats();
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) g[i] *= s;
}

double clip_grad_norm(ParamTable& table, double max_norm) {
  const double norm = grad_global_norm(table);
  if (max_norm > 0 && norm > max_norm && std::isfinite(norm))
    scale_grads(table, static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

double LrSchedule::at(int64_t s) const {
  if (warmup > 0 && s < warmup) return peak * static_cast<double>(s + 1) / static_cast<double>(warmup);
  if (total <= warmup) return peak;
  const double progress = std::clamp(static_cast<double>(s - warmup) / static_cast<double>(total - warmup), 0.0, 1.0);
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace hymba
