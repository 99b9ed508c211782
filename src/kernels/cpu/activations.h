// Elementwise activations. Backward passes accumulate into dx.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// silu(x) = x * sigmoid(x)
void silu_forward(float* out, const float* x, int64_t n);
void silu_backward(float* dx, const float* dout, const float* x, int64_t n);

// SwiGLU on N rows of width I: out[r, i] = silu(gate[r, i]) * up[r, i].
// gate and up rows are ld_in floats apart (ld_in = I for separate buffers,
// 2I when gate|up come from one fused projection). out is contiguous [N, I].
// Backward: dout is contiguous [N, I]; dgate and dup share the ld_in row
// stride of gate and up (so they can be the halves of one fused gradient
// buffer) and either may be null. accumulate = false overwrites dgate / dup
// instead (never reading them), which spares zeroing a fresh buffer.
void swiglu_forward(float* out, const float* gate, const float* up, int64_t N, int64_t I, int64_t ld_in);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                     int64_t I, int64_t ld_in, bool accumulate = true);

// softplus(x) = log(1 + exp(x)), linear above 20 as in PyTorch.
void softplus_forward(float* out, const float* x, int64_t n);
void softplus_backward(float* dx, const float* dout, const float* x, int64_t n);

// GELU. gelu_tanh is the tanh approximation GPT-2 and GPT-Neo use (HF
// "gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). gelu_erf is
// the exact x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))) (HF "gelu").
// Backward: dx += dout * gelu'(x).
void gelu_tanh_forward(float* out, const float* x, int64_t n);
void gelu_tanh_backward(float* dx, const float* dout, const float* x, int64_t n);
void gelu_erf_forward(float* out, const float* x, int64_t n);
void gelu_erf_backward(float* dx, const float* dout, const float* x, int64_t n);

}  // namespace hymba::cpu
