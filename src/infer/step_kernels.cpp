// Decode-step kernels. Plain loops written so GCC vectorises them without
// -ffast-math: exponentials use the branch-free polynomials of fast_math.h
// (libm's expf is a scalar call), and sums over a vector run in eight
// independent partial sums (a single running sum is a reassociation GCC will
// not vectorise).
#include "infer/step_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/matmul.h"

namespace hymba::infer {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  constexpr int kParts = 8;
  float part[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int j = 0; j < kParts; ++j) part[j] += a[i + j] * b[i + j];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7])) + tail;
}

inline float sum(const float* __restrict a, int64_t n) {
  constexpr int kParts = 8;
  float part[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int j = 0; j < kParts; ++j) part[j] += a[i + j];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7])) + tail;
}

}  // namespace

void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
            int64_t OC) {
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(OC), static_cast<int>(C), 1.0f, w,
                static_cast<int>(C), in, 1, 0.0f, out, 1);
    return;
  }
  cpu::matmul_forward(out, ld_out, in, ld_in, w, nullptr, rows, C, OC);
}

void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K) {
#pragma omp parallel for schedule(static) if (B * C * K >= kParallelMin)
  for (int64_t b = 0; b < B; ++b) {
    float* st = state[b];
    for (int64_t c = 0; c < C; ++c) {
      const float* w = weight + c * K;
      float* s = st + c * (K - 1);
      const float xv = x[b * ld_x + c];
      // Same order as the full convolution: bias, then taps oldest first.
      float acc = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t k = 0; k < K - 1; ++k) acc += w[k] * s[k];
      acc += w[K - 1] * xv;
      out[b * C + c] = acc;
      for (int64_t k = 0; k + 1 < K - 1; ++k) s[k] = s[k + 1];
      if (K > 1) s[K - 2] = xv;
    }
  }
}

void ssm_step(float* y, float* const* h, const SsmStepArgs& a) {
  const int64_t B = a.B, D = a.D, N = a.N;
#pragma omp parallel for schedule(static) if (B * D * N >= kParallelMin)
  for (int64_t row = 0; row < B * D; ++row) {
    const int64_t b = row / D, d = row % D;
    const float dt = cpu::fast::softplus(a.delta[row] + a.delta_bias[d]);
    const float u = a.u[row];
    const float dtu = dt * u;
    const float* __restrict A = a.A + d * N;
    const float* __restrict Bm = a.Bm + b * a.ld_B;
    float* __restrict hs = h[b] + d * N;
    for (int64_t n = 0; n < N; ++n) hs[n] = cpu::fast::exp_nonpositive(dt * A[n]) * hs[n] + dtu * Bm[n];
    const float out = dot(a.Cm + b * a.ld_C, hs, N) + a.Dskip[d] * u;
    if (a.z == nullptr) {
      y[row] = out;
    } else {
      const float z = a.z[b * a.ld_z + d];
      y[row] = out * (z * cpu::fast::sigmoid(z));
    }
  }
}

void attention_step(float* out, int64_t ld_out, const AttnStepArgs& a) {
  const int64_t group = a.Hq / a.Hkv, ld_k = a.Hkv * a.Dqk, ld_v = a.Hkv * a.Dv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.Dqk));
  int64_t work = 0, most_keys = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    work += (a.n_cached[b] + 1) * a.Hq * (a.Dqk + a.Dv);
    most_keys = std::max(most_keys, a.n_cached[b] + 1);
  }
#pragma omp parallel if (work >= kParallelMin)
  {
    // Scores then probabilities of one (row, query head). A task per query
    // head, not per KV head: hymba-1.5b has 5 KV heads, which two threads
    // would split 3 : 2.
    std::vector<float> p(static_cast<size_t>(most_keys));
#pragma omp for schedule(static)
    for (int64_t task = 0; task < a.B * a.Hq; ++task) {
      const int64_t b = task / a.Hq, h = task % a.Hq, g = h / group;
      const int64_t cached = a.n_cached[b], n = cached + 1;
      const float* q = a.q + b * a.ld_q + h * a.Dqk;
      auto key = [&](int64_t j) {
        return j < cached ? a.k_cache[b] + j * ld_k + g * a.Dqk : a.k_new + b * a.ld_k_new + g * a.Dqk;
      };
      auto value = [&](int64_t j) {
        return j < cached ? a.v_cache[b] + j * ld_v + g * a.Dv : a.v_new + b * a.ld_v_new + g * a.Dv;
      };
      float* __restrict pi = p.data();
      for (int64_t j = 0; j < n; ++j) pi[j] = dot(q, key(j), a.Dqk) * scale;
      float m = pi[0];
      for (int64_t j = 1; j < n; ++j) m = std::max(m, pi[j]);
      for (int64_t j = 0; j < n; ++j) pi[j] = cpu::fast::exp_nonpositive(pi[j] - m);
      const float inv = 1.0f / sum(pi, n);
      for (int64_t j = 0; j < n; ++j) pi[j] *= inv;
      float* __restrict o = out + b * ld_out + h * a.Dv;
      for (int64_t c = 0; c < a.Dv; ++c) o[c] = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const float* __restrict v = value(j);
        const float pj = pi[j];
        for (int64_t c = 0; c < a.Dv; ++c) o[c] += pj * v[c];
      }
    }
  }
}

}  // namespace hymba::infer
