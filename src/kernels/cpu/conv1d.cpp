// Depthwise causal conv1d. The weight is transposed once per call to [K, C] so
// every inner loop runs over contiguous channels and vectorises.
//
// Forward and dx: each output row (one token) is owned by one iteration, so
// rows are split across threads freely. dweight and dbias sum over all tokens:
// they are split by channel ranges, one per thread, each channel summing its
// tokens in order, so results do not depend on the thread count (nor on the
// ranges). Wide ranges keep each row's reads one contiguous run.
#include "kernels/cpu/conv1d.h"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace hymba::cpu {
namespace {

// dweight/dbias channel ranges are multiples of this many channels.
constexpr int64_t kChannelAlign = 16;

std::vector<float> transpose_weight(const float* weight, int64_t C, int64_t K) {
  std::vector<float> wt(static_cast<size_t>(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k) wt[k * C + c] = weight[c * K + k];
  return wt;
}

inline void multiply_add(float* __restrict dst, const float* __restrict w, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += w[i] * src[i];
}

}  // namespace

void conv1d_causal_forward(float* out, const float* x, int64_t ld_x, const float* weight, const float* bias, int64_t B,
                           int64_t T, int64_t C, int64_t K) {
  if (B == 0 || T == 0 || C == 0) return;
  const std::vector<float> wt = transpose_weight(weight, C, K);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * T; ++row) {
    const int64_t t = row % T, first_row_of_seq = row - t;
    float* o = out + row * C;
    for (int64_t c = 0; c < C; ++c) o[c] = bias != nullptr ? bias[c] : 0.0f;
    for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k)
      multiply_add(o, wt.data() + k * C, x + (first_row_of_seq + t - (K - 1) + k) * ld_x, C);
  }
}

void conv1d_causal_backward(float* dx, int64_t ld_dx, float* dweight, float* dbias, const float* dout, const float* x,
                            int64_t ld_x, const float* weight, int64_t B, int64_t T, int64_t C, int64_t K) {
  if (B == 0 || T == 0 || C == 0) return;
  if (dx != nullptr) {
    const std::vector<float> wt = transpose_weight(weight, C, K);
    // dx[s] += sum_k w[:, k] * dout[s + (K-1) - k], over output tokens inside
    // the sequence; the sum is formed first so dx receives one rounded add.
#pragma omp parallel
    {
      std::vector<float> sum(static_cast<size_t>(C));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < B * T; ++row) {
        const int64_t s = row % T, first_row_of_seq = row - s;
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int64_t k = std::max<int64_t>(0, s + K - T); k < K; ++k)
          multiply_add(sum.data(), wt.data() + k * C, dout + (first_row_of_seq + s + (K - 1) - k) * C, C);
        float* d = dx + row * ld_dx;
        for (int64_t c = 0; c < C; ++c) d[c] += sum[c];
      }
    }
  }
  if (dweight == nullptr && dbias == nullptr) return;
  const int64_t threads = omp_get_max_threads();
  const int64_t range = (C + threads * kChannelAlign - 1) / (threads * kChannelAlign) * kChannelAlign;
  const int64_t n_ranges = (C + range - 1) / range;
#pragma omp parallel
  {
    std::vector<float> dw_acc(static_cast<size_t>(K * range));
    std::vector<float> db_acc(static_cast<size_t>(range));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n_ranges; ++r) {
      const int64_t c0 = r * range, count = std::min(range, C - c0);
      std::fill(dw_acc.begin(), dw_acc.end(), 0.0f);
      std::fill(db_acc.begin(), db_acc.end(), 0.0f);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
          const float* g = dout + (b * T + t) * C + c0;
          for (int64_t j = 0; j < count; ++j) db_acc[j] += g[j];
          for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k)
            multiply_add(dw_acc.data() + k * range, g, x + (b * T + t - (K - 1) + k) * ld_x + c0, count);
        }
      for (int64_t j = 0; j < count; ++j) {
        if (dbias != nullptr) dbias[c0 + j] += db_acc[j];
        if (dweight != nullptr)
          for (int64_t k = 0; k < K; ++k) dweight[(c0 + j) * K + k] += dw_acc[k * range + j];
      }
    }
  }
}

}  // namespace hymba::cpu
