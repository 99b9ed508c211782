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

namespace {

// One row of the SwiGLU backward: d/dgate = dout * up * s * (1 + g (1 - s)),
// d/dup = dout * g * s, with s = sigmoid(g) computed once for both.
template <bool kGate, bool kUp, bool kAccumulate>
void swiglu_backward_row(float* __restrict dg, float* __restrict du, const float* __restrict d,
                         const float* __restrict g, const float* __restrict u, int64_t I) {
  for (int64_t i = 0; i < I; ++i) {
    const float s = sigmoid(g[i]);
    if constexpr (kGate) {
      const float v = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      dg[i] = kAccumulate ? dg[i] + v : v;
    }
    if constexpr (kUp) {
      const float v = d[i] * g[i] * s;
      du[i] = kAccumulate ? du[i] + v : v;
    }
  }
}

template <bool kGate, bool kUp, bool kAccumulate>
void swiglu_backward_rows(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                          int64_t I, int64_t ld_in) {
#pragma omp parallel for schedule(static) if (N * I >= kParallelMin)
  for (int64_t r = 0; r < N; ++r)
    swiglu_backward_row<kGate, kUp, kAccumulate>(kGate ? dgate + r * ld_in : nullptr, kUp ? dup + r * ld_in : nullptr,
                                                 dout + r * I, gate + r * ld_in, up + r * ld_in, I);
}

}  // namespace

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                     int64_t I, int64_t ld_in, bool accumulate) {
  // dgate and dup may be column slices of one fused buffer, so rows of each
  // are ld_in apart too.
  if (dgate != nullptr && dup != nullptr) {
    if (accumulate) swiglu_backward_rows<true, true, true>(dgate, dup, dout, gate, up, N, I, ld_in);
    else swiglu_backward_rows<true, true, false>(dgate, dup, dout, gate, up, N, I, ld_in);
  } else if (dgate != nullptr) {
    if (accumulate) swiglu_backward_rows<true, false, true>(dgate, dup, dout, gate, up, N, I, ld_in);
    else swiglu_backward_rows<true, false, false>(dgate, dup, dout, gate, up, N, I, ld_in);
  } else if (dup != nullptr) {
    if (accumulate) swiglu_backward_rows<false, true, true>(dgate, dup, dout, gate, up, N, I, ld_in);
    else swiglu_backward_rows<false, true, false>(dgate, dup, dout, gate, up, N, I, ld_in);
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

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

}  // namespace

void gelu_tanh_forward(float* __restrict out, const float* __restrict x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  }
}

void gelu_tanh_backward(float* __restrict dx, const float* __restrict dout, const float* __restrict x, int64_t n) {
  if (dx == nullptr) return;
  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)).
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] += dout[i] * g;
  }
}

void gelu_erf_forward(float* __restrict out, const float* __restrict x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void gelu_erf_backward(float* __restrict dx, const float* __restrict dout, const float* __restrict x, int64_t n) {
  if (dx == nullptr) return;
  // d/dx = Phi(x) + x phi(x).
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float g = 0.5f * (1.0f + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] += dout[i] * g;
  }
}

}  // namespace hymba::cpu
