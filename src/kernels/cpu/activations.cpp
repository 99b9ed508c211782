#include "kernels/cpu/activations.h"

#include "kernels/cpu/fast_math.h"

#include <bit>
#include <cmath>

namespace hymba::cpu {

using fast::sigmoid;
using fast::softplus;

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

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
  // d softplus / dx = sigmoid(x), which is exactly 1 above 20.
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] += dout[i] * sigmoid(x[i]);
}

}  // namespace hymba::cpu
