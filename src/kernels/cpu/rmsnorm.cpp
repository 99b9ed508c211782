#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Row reductions are accumulated in double, in kLanes interleaved partial sums
// combined in a fixed order: the grouping is the same for every call (unlike a
// compiler-chosen reduction, which may peel for alignment), and the inner loop
// vectorises.
constexpr int64_t kLanes = 8;

double sum_of_squares(const float* x, int64_t C) {
  double acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(x[c + k]) * x[c + k];
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; c < C; ++c) s += static_cast<double>(x[c]) * x[c];
  return s;
}

// sum_c a[c] * b[c] * x[c]
double triple_dot(const float* a, const float* b, const float* x, int64_t C) {
  double acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(a[c + k] * b[c + k]) * x[c + k];
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; c < C; ++c) s += static_cast<double>(a[c] * b[c]) * x[c];
  return s;
}

// dweight is reduced over rows per block of channels (double accumulators, so
// long batches lose nothing), so each channel's sum runs in row order
// regardless of the thread count.
constexpr int64_t kChannelBlock = 64;

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C,
                     float eps) {
  if (C == 0) return;
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* __restrict xr = x + n * C;
    float* __restrict o = out + n * C;
    const float r =
        static_cast<float>(1.0 / std::sqrt(sum_of_squares(xr, C) / static_cast<double>(C) + static_cast<double>(eps)));
    if (rstd != nullptr) rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) o[c] = xr[c] * r * weight[c];
  }
}

void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  if (C == 0) return;
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  // One parallel region for both gradients (one wake-up of the pool); they
  // write disjoint outputs, so neither loop waits for the other.
#pragma omp parallel if (N * C >= kParallelMin)
  {
    if (dx != nullptr) {
      // out_c = x_c r w_c with r = (mean(x^2) + eps)^(-1/2), dr/dx_c = -r^3 x_c / C:
      // dx_c = r (g_c w_c) - r^3 / C * x_c * sum_k g_k w_k x_k.
#pragma omp for schedule(static) nowait
      for (int64_t n = 0; n < N; ++n) {
        const float* __restrict g = dout + n * C;
        const float* __restrict xr = x + n * C;
        float* __restrict d = dx + n * C;
        const float r = rstd[n];
        const double dot = triple_dot(g, weight, xr, C);
        const float coef = static_cast<float>(dot * r * r * r / static_cast<double>(C));
        for (int64_t c = 0; c < C; ++c) d[c] += r * (g[c] * weight[c]) - coef * xr[c];
      }
    }
    if (dweight != nullptr) {
      // dweight_c = sum_n g[n, c] * x[n, c] * r[n]
#pragma omp for schedule(static) nowait
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t c0 = blk * kChannelBlock;
        const int64_t width = C - c0 < kChannelBlock ? C - c0 : kChannelBlock;
        double acc[kChannelBlock] = {};
        for (int64_t n = 0; n < N; ++n) {
          const float* __restrict g = dout + n * C + c0;
          const float* __restrict xr = x + n * C + c0;
          const float r = rstd[n];
          for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<double>(g[c] * xr[c] * r);
        }
        for (int64_t c = 0; c < width; ++c) dweight[c0 + c] += static_cast<float>(acc[c]);
      }
    }
  }
}

}  // namespace hymba::cpu
