#include "kernels/cpu/layernorm.h"

#include <cmath>

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;
// Row reductions in double, kLanes interleaved partial sums combined in a
// fixed order (as in rmsnorm.cpp): the same grouping for every call.
constexpr int64_t kLanes = 8;
// dweight / dbias are reduced over rows per block of channels, each channel's
// sum in row order whatever the thread count.
constexpr int64_t kChannelBlock = 64;

double row_sum(const float* x, int64_t C) {
  double acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(x[c + k]);
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; c < C; ++c) s += static_cast<double>(x[c]);
  return s;
}

double centered_sum_sq(const float* x, double mean, int64_t C) {
  double acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) {
      const double v = static_cast<double>(x[c + k]) - mean;
      acc[k] += v * v;
    }
  double s = 0.0;
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  for (; c < C; ++c) {
    const double v = static_cast<double>(x[c]) - mean;
    s += v * v;
  }
  return s;
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps) {
  if (C == 0) return;
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* __restrict xr = x + n * C;
    float* __restrict o = out + n * C;
    const double m = row_sum(xr, C) / static_cast<double>(C);
    const double var = centered_sum_sq(xr, m, C) / static_cast<double>(C);
    const auto r = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    const auto mf = static_cast<float>(m);
    if (mean != nullptr) mean[n] = mf;
    if (rstd != nullptr) rstd[n] = r;
    if (bias != nullptr)
      for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] - mf) * r * weight[c] + bias[c];
    else
      for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] - mf) * r * weight[c];
  }
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (C == 0) return;
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel if (N * C >= kParallelMin)
  {
    if (dx != nullptr) {
      // xhat = (x - mean) r, g = dout * w:
      // dx = r (g - mean_c(g) - xhat * mean_c(g * xhat)).
#pragma omp for schedule(static) nowait
      for (int64_t n = 0; n < N; ++n) {
        const float* __restrict g = dout + n * C;
        const float* __restrict xr = x + n * C;
        float* __restrict d = dx + n * C;
        const float r = rstd[n], m = mean[n];
        double sg[kLanes] = {}, sgx[kLanes] = {};
        int64_t c = 0;
        for (; c + kLanes <= C; c += kLanes)
          for (int64_t k = 0; k < kLanes; ++k) {
            const double gw = static_cast<double>(g[c + k] * weight[c + k]);
            sg[k] += gw;
            sgx[k] += gw * static_cast<double>((xr[c + k] - m) * r);
          }
        double a = 0.0, b = 0.0;
        for (int64_t k = 0; k < kLanes; ++k) {
          a += sg[k];
          b += sgx[k];
        }
        for (; c < C; ++c) {
          const double gw = static_cast<double>(g[c] * weight[c]);
          a += gw;
          b += gw * static_cast<double>((xr[c] - m) * r);
        }
        const auto mg = static_cast<float>(a / static_cast<double>(C));
        const auto mgx = static_cast<float>(b / static_cast<double>(C));
        for (int64_t i = 0; i < C; ++i) d[i] += r * (g[i] * weight[i] - mg - (xr[i] - m) * r * mgx);
      }
    }
    if (dweight != nullptr || dbias != nullptr) {
#pragma omp for schedule(static) nowait
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t c0 = blk * kChannelBlock;
        const int64_t width = C - c0 < kChannelBlock ? C - c0 : kChannelBlock;
        double aw[kChannelBlock] = {}, ab[kChannelBlock] = {};
        for (int64_t n = 0; n < N; ++n) {
          const float* __restrict g = dout + n * C + c0;
          const float* __restrict xr = x + n * C + c0;
          const float r = rstd[n], m = mean[n];
          for (int64_t c = 0; c < width; ++c) {
            aw[c] += static_cast<double>(g[c] * ((xr[c] - m) * r));
            ab[c] += static_cast<double>(g[c]);
          }
        }
        if (dweight != nullptr)
          for (int64_t c = 0; c < width; ++c) dweight[c0 + c] += static_cast<float>(aw[c]);
        if (dbias != nullptr)
          for (int64_t c = 0; c < width; ++c) dbias[c0 + c] += static_cast<float>(ab[c]);
      }
    }
  }
}

}  // namespace hymba::cpu
