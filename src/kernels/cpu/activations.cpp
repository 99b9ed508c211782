#include "kernels/cpu/activations.h"

#include <bit>
#include <cmath>

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// exp(x) for x <= 0, branch-free so that loops calling it vectorise (std::exp
// does not without -ffast-math). Cephes expf: round x / ln2 to n, a degree-6
// polynomial on the remainder, times 2^n built from bits. About 1 ulp on
// [-87, 0]; exactly 0 below -87, where exp(x) < 1.7e-38.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  constexpr float kMin = -87.0f;              // keeps 2^n a normal float
  const float xc = x < kMin ? kMin : x;
  const float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < kMin ? 0.0f : p * scale;
}

// log(u) for u in [1, 2]: halve above sqrt(2) so m lies in [1/sqrt2, sqrt2],
// then log(m) = 2 atanh(s) with s = (m - 1) / (m + 1), |s| <= 0.172, whose odd
// series truncated after s^9 is exact to float precision.
inline float log_1_to_2(float u) {
  constexpr float kSqrt2 = 1.41421356237f, kLn2 = 0.69314718056f;
  const bool halve = u > kSqrt2;
  const float m = halve ? u * 0.5f : u;
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  const float series = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  return (halve ? kLn2 : 0.0f) + 2.0f * s * series;
}

// log(1 + e) for e in [0, 1], accurate for tiny e: u = 1 + e rounds, but
// log(u) * e / (u - 1) cancels that rounding (Goldberg's trick).
inline float log1p_unit(float e) {
  const float u = 1.0f + e;
  return u == 1.0f ? e : log_1_to_2(u) * e / (u - 1.0f);
}

// 1 / (1 + exp(-x)) from exp(-|x|) <= 1, which never overflows.
inline float sigmoid(float x) {
  const float e = exp_nonpositive(-std::fabs(x));
  const float inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}

constexpr float kSoftplusThreshold = 20.0f;  // PyTorch: linear above this

inline float softplus(float x) {
  const float smooth = std::fmax(x, 0.0f) + log1p_unit(exp_nonpositive(-std::fabs(x)));
  return x > kSoftplusThreshold ? x : smooth;
}

}  // namespace

void silu_forward(float* __restrict out, const float* __restrict x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * sigmoid(x[i]);
}

void silu_backward(float* __restrict dx, const float* __restrict dout, const float* __restrict x, int64_t n) {
  if (dx == nullptr) return;
  // d silu / dx = s + x s (1 - s) = s (1 + x (1 - s))
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(x[i]);
    dx[i] += dout[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

void swiglu_forward(float* out, const float* gate, const float* up, int64_t N, int64_t I, int64_t ld_in) {
#pragma omp parallel for schedule(static) if (N * I >= kParallelMin)
  for (int64_t r = 0; r < N; ++r) {
    const float* __restrict g = gate + r * ld_in;
    const float* __restrict u = up + r * ld_in;
    float* __restrict o = out + r * I;
    for (int64_t i = 0; i < I; ++i) o[i] = g[i] * sigmoid(g[i]) * u[i];
  }
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                     int64_t I, int64_t ld_in) {
  if (dgate == nullptr && dup == nullptr) return;
  // dgate and dup may be column slices of one fused buffer, so rows of each
  // are ld_in apart too.
#pragma omp parallel for schedule(static) if (N * I >= kParallelMin)
  for (int64_t r = 0; r < N; ++r) {
    const float* __restrict g = gate + r * ld_in;
    const float* __restrict u = up + r * ld_in;
    const float* __restrict d = dout + r * I;
    if (dgate != nullptr) {
      float* __restrict dg = dgate + r * ld_in;
      for (int64_t i = 0; i < I; ++i) {
        const float s = sigmoid(g[i]);
        dg[i] += d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      }
    }
    if (dup != nullptr) {
      float* __restrict du = dup + r * ld_in;
      for (int64_t i = 0; i < I; ++i) du[i] += d[i] * g[i] * sigmoid(g[i]);
    }
  }
}

void softplus_forward(float* __restrict out, const float* __restrict x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = softplus(x[i]);
}

void softplus_backward(float* __restrict dx, const float* __restrict dout, const float* __restrict x, int64_t n) {
  if (dx == nullptr) return;
  // d softplus / dx = sigmoid(x); exactly 1 on the linear branch.
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] += dout[i] * (x[i] > kSoftplusThreshold ? 1.0f : sigmoid(x[i]));
}

}  // namespace hymba::cpu
