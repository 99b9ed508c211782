// The forward ops the model graph calls, for two element types:
//   Ops<float>  -> the fast CPU kernels (src/kernels/cpu)
//   Ops<double> -> the scalar references (src/kernels/reference)
// The same graph code therefore runs as the fast float32 model and as a
// float64 reference model, whose finite differences check the whole-model
// backward. Only float has a backward (model/backward.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/selective_scan.h"
#include "kernels/reference/activations.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/conv1d.h"
#include "kernels/reference/cross_entropy.h"
#include "kernels/reference/embedding.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/selective_scan.h"

namespace hymba {

template <typename T>
struct AttnParams {
  int64_t B = 0, T_ = 0, Hq = 0, Hkv = 0, Dqk = 0, Dv = 0, window = 0, num_meta = 0;
  bool window_symmetric = false, meta_sees_all = false;  // the config's two leaks
  float dropout = 0.0f;  // attention dropout rate and seed (training only)
  uint64_t dropout_seed = 0;
  const T* q = nullptr; int64_t ld_q = 0;
  const T* k = nullptr; int64_t ld_k = 0;
  const T* v = nullptr; int64_t ld_v = 0;
};

template <typename T>
struct ScanParams {
  int64_t B = 0, T_ = 0, D = 0, N = 0;
  const T* u = nullptr;
  const T* delta = nullptr;  // contiguous [B,T,D]
  const T* delta_bias = nullptr;
  const T* A_log = nullptr;
  const T* Bm = nullptr; int64_t ld_B = 0;
  const T* Cm = nullptr; int64_t ld_C = 0;
  const T* Dskip = nullptr;
  const T* z = nullptr; int64_t ld_z = 0;
};

struct LossStats {
  double loss_sum = 0.0;
  int64_t scored = 0;
  int64_t correct = 0;
};

template <typename T>
struct Ops;

template <>
struct Ops<float> {
  static void embedding(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C) {
    cpu::embedding_forward(out, ids, table, N, V, C);
  }
  static void rmsnorm(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, double eps) {
    cpu::rmsnorm_forward(out, rstd, x, w, N, C, static_cast<float>(eps));
  }
  static void layernorm(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                        int64_t N, int64_t C, double eps) {
    cpu::layernorm_forward(out, mean, rstd, x, w, b, N, C, static_cast<float>(eps));
  }
  static void positions(float* x, const float* table, int64_t S, int64_t P, int64_t C) {
    cpu::position_embedding_forward(x, table, nullptr, S, P, C);
  }
  static void gelu(float* out, const float* x, int64_t n, bool exact) {
    if (exact) cpu::gelu_erf_forward(out, x, n);
    else cpu::gelu_tanh_forward(out, x, n);
  }
  static void matmul(float* out, int64_t ldo, const float* in, int64_t ldi, const float* w, int64_t BT, int64_t C,
                     int64_t OC) {
    cpu::matmul_forward(out, ldo, in, ldi, w, nullptr, BT, C, OC);
  }
  static cpu::AttnArgs attn_args(const AttnParams<float>& p) {
    cpu::AttnArgs a;
    a.B = p.B;
    a.Tq = a.Tk = p.T_;
    a.Hq = p.Hq;
    a.Hkv = p.Hkv;
    a.Dqk = p.Dqk;
    a.Dv = p.Dv;
    a.q = p.q;
    a.ld_q = p.ld_q;
    a.k = p.k;
    a.ld_k = p.ld_k;
    a.v = p.v;
    a.ld_v = p.ld_v;
    a.window = p.window;
    a.num_meta = p.num_meta;
    a.window_symmetric = p.window_symmetric;
    a.meta_sees_all = p.meta_sees_all;
    a.dropout = p.dropout;
    a.dropout_seed = p.dropout_seed;
    return a;
  }
  static void attention(float* out, int64_t ldo, float* lse, const AttnParams<float>& p) {
    cpu::attention_forward(out, ldo, lse, attn_args(p));
  }
  static void conv1d(float* out, const float* x, int64_t ldx, const float* w, const float* b, int64_t B, int64_t T,
                     int64_t C, int64_t K) {
    cpu::conv1d_causal_forward(out, x, ldx, w, b, B, T, C, K);
  }
  static void silu(float* out, const float* x, int64_t n) { cpu::silu_forward(out, x, n); }
  static cpu::ScanArgs scan_args(const ScanParams<float>& p) {
    cpu::ScanArgs a;
    a.B = p.B;
    a.T = p.T_;
    a.D = p.D;
    a.N = p.N;
    a.u = p.u;
    a.ld_u = p.D;
    a.delta = p.delta;
    a.ld_delta = p.D;
    a.delta_bias = p.delta_bias;
    a.delta_softplus = true;
    a.A_log = p.A_log;
    a.Bm = p.Bm;
    a.ld_B = p.ld_B;
    a.Cm = p.Cm;
    a.ld_C = p.ld_C;
    a.Dskip = p.Dskip;
    a.z = p.z;
    a.ld_z = p.ld_z;
    return a;
  }
  static void scan(float* y, float* chunk_states, const ScanParams<float>& p) {
    cpu::selective_scan_forward(y, chunk_states, nullptr, scan_args(p));
  }
  static void swiglu(float* out, const float* gate, const float* up, int64_t N, int64_t I, int64_t ld) {
    cpu::swiglu_forward(out, gate, up, N, I, ld);
  }
  static LossStats cross_entropy(const float* logits, const int32_t* targets, int64_t N, int64_t V, double ls) {
    cpu::CrossEntropyResult r = cpu::cross_entropy_forward(nullptr, logits, targets, N, V, static_cast<float>(ls));
    return {r.loss_sum, r.scored, r.correct};
  }
};

// Reference ops: contiguous scalar code; strided operands are gathered first.
template <>
struct Ops<double> {
  using V = std::vector<double>;
  static V gather(const double* p, int64_t ld, int64_t rows, int64_t cols) {
    V out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = p[r * ld + c];
    return out;
  }
  static void scatter(double* p, int64_t ld, const V& src, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) p[r * ld + c] = src[r * cols + c];
  }
  static void embedding(double* out, const int32_t* ids, const double* table, int64_t N, int64_t, int64_t C) {
    ref::embedding_forward(out, ids, table, N, C);
  }
  static void rmsnorm(double* out, double*, const double* x, const double* w, int64_t N, int64_t C, double eps) {
    ref::rmsnorm_forward(out, x, w, N, C, eps);
  }
  static void layernorm(double* out, double*, double*, const double* x, const double* w, const double* b, int64_t N,
                        int64_t C, double eps) {
    ref::layernorm_forward(out, x, w, b, N, C, eps);
  }
  static void positions(double* x, const double* table, int64_t S, int64_t, int64_t C) {
    ref::position_embedding_forward(x, table, static_cast<const int64_t*>(nullptr), S, C);
  }
  static void gelu(double* out, const double* x, int64_t n, bool exact) {
    if (exact) ref::gelu_erf_forward(out, x, n);
    else ref::gelu_tanh_forward(out, x, n);
  }
  static void matmul(double* out, int64_t ldo, const double* in, int64_t ldi, const double* w, int64_t BT, int64_t C,
                     int64_t OC) {
    V x = gather(in, ldi, BT, C), y(static_cast<size_t>(BT * OC));
    ref::matmul_forward(y.data(), x.data(), w, static_cast<const double*>(nullptr), BT, C, OC);
    scatter(out, ldo, y, BT, OC);
  }
  static void rope(double* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, double theta) {
    ref::rope_forward(x, ld, B, T, H, D, static_cast<const int64_t*>(nullptr), theta);
  }
  static void attention(double* out, int64_t ldo, double*, const AttnParams<double>& p) {
    const int64_t R = p.B * p.T_;
    V q = gather(p.q, p.ld_q, R, p.Hq * p.Dqk), k = gather(p.k, p.ld_k, R, p.Hkv * p.Dqk),
      v = gather(p.v, p.ld_v, R, p.Hkv * p.Dv), o(static_cast<size_t>(R * p.Hq * p.Dv));
    ref::AttnShape s;
    s.B = p.B;
    s.Tq = s.Tk = p.T_;
    s.Hq = p.Hq;
    s.Hkv = p.Hkv;
    s.Dqk = p.Dqk;
    s.Dv = p.Dv;
    s.window = p.window;
    s.num_meta = p.num_meta;
    s.window_symmetric = p.window_symmetric;
    s.meta_sees_all = p.meta_sees_all;
    s.dropout = p.dropout;
    s.dropout_seed = p.dropout_seed;
    ref::attention_forward(o.data(), static_cast<double*>(nullptr), q.data(), k.data(), v.data(), s);
    scatter(out, ldo, o, R, p.Hq * p.Dv);
  }
  static void conv1d(double* out, const double* x, int64_t ldx, const double* w, const double* b, int64_t B,
                     int64_t T, int64_t C, int64_t K) {
    V xs = gather(x, ldx, B * T, C);
    ref::conv1d_causal_forward(out, xs.data(), w, b, B, T, C, K);
  }
  static void silu(double* out, const double* x, int64_t n) { ref::silu_forward(out, x, n); }
  static void scan(double* y, double*, const ScanParams<double>& p) {
    const int64_t R = p.B * p.T_;
    V Bm = gather(p.Bm, p.ld_B, R, p.N), Cm = gather(p.Cm, p.ld_C, R, p.N);
    V z = p.z ? gather(p.z, p.ld_z, R, p.D) : V();
    ref::selective_scan_forward(y, static_cast<double*>(nullptr), p.u, p.delta, p.delta_bias, true, p.A_log,
                                Bm.data(), Cm.data(), p.Dskip, p.z ? z.data() : nullptr,
                                static_cast<const double*>(nullptr), p.B, p.T_, p.D, p.N);
  }
  static void swiglu(double* out, const double* gate, const double* up, int64_t N, int64_t I, int64_t ld) {
    ref::swiglu_forward(out, gate, up, N, I, ld);
  }
  static LossStats cross_entropy(const double* logits, const int32_t* targets, int64_t N, int64_t V_, double ls) {
    LossStats s;
    s.loss_sum = ref::cross_entropy_forward(static_cast<double*>(nullptr), logits, targets, N, V_, ls);
    for (int64_t n = 0; n < N; ++n) s.scored += targets[n] != cpu::kIgnoreIndex;
    return s;
  }
};

}  // namespace hymba
