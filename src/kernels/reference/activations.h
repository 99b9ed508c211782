// Plain scalar references for the elementwise activations.
#pragma once

#include <cmath>
#include <cstdint>

namespace hymba::ref {

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
T silu(T x) {
  return x * sigmoid(x);
}

// PyTorch softplus (beta 1, threshold 20).
template <typename T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

// GELU, tanh approximation (GPT-2's "gelu_new").
template <typename T>
T gelu_tanh(T x) {
  const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
}

// GELU, exact: x * Phi(x).
template <typename T>
T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x / std::sqrt(T(2))));
}

template <typename T>
void gelu_tanh_forward(T* out, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(x[i]);
}

template <typename T>
void gelu_erf_forward(T* out, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_erf(x[i]);
}

template <typename T>
void silu_forward(T* out, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(x[i]);
}

template <typename T>
void softplus_forward(T* out, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = softplus(x[i]);
}

// out[r, i] = silu(gate[r, i]) * up[r, i]; gate/up rows ld_in apart, out contiguous.
template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t N, int64_t I, int64_t ld_in) {
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < I; ++i) out[r * I + i] = silu(gate[r * ld_in + i]) * up[r * ld_in + i];
}

}  // namespace hymba::ref
