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
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/matmul.h"

namespace hymba::infer {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// Sums over a vector run in 8 independent partial sums (lane j takes
// elements j, j + 8, ...), then one fixed tree, plus the tail: GCC's vector
// type (lowered to whatever the target has) keeps the 8 sums in one
// register; written as arrays, GCC shuffles them.
using Lanes8 = float __attribute__((vector_size(32)));

inline Lanes8 load8(const float* p) {
  Lanes8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float finish8(Lanes8 p, float tail) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])) + tail;
}

inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  Lanes8 part = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) part += load8(a + i) * load8(b + i);
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return finish8(part, tail);
}

inline float sum(const float* __restrict a, int64_t n) {
  Lanes8 part = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) part += load8(a + i);
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i];
  return finish8(part, tail);
}

// dot() of one query against four keys at once: the same sums per key, but
// four independent chains keep the FMA units busy where one chain waits on
// each add.
inline void dot4(const float* __restrict q, const float* __restrict k0, const float* __restrict k1,
                 const float* __restrict k2, const float* __restrict k3, int64_t n, float* out) {
  Lanes8 p0 = {}, p1 = {}, p2 = {}, p3 = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Lanes8 qi = load8(q + i);
    p0 += qi * load8(k0 + i);
    p1 += qi * load8(k1 + i);
    p2 += qi * load8(k2 + i);
    p3 += qi * load8(k3 + i);
  }
  float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
  for (; i < n; ++i) {
    t0 += q[i] * k0[i];
    t1 += q[i] * k1[i];
    t2 += q[i] * k2[i];
    t3 += q[i] * k3[i];
  }
  out[0] = finish8(p0, t0);
  out[1] = finish8(p1, t1);
  out[2] = finish8(p2, t2);
  out[3] = finish8(p3, t3);
}

// How many key or value rows ahead the attention step asks for.
constexpr int64_t kRowsAhead = 64;

// Asks for the cache lines of n floats at p (n > 0; p need not be aligned).
inline void prefetch_floats(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
  __builtin_prefetch(p + n - 1);
}

inline Lanes8 splat8(float x) { return Lanes8{x, x, x, x, x, x, x, x}; }

inline void store8(float* p, Lanes8 v) { std::memcpy(p, &v, sizeof(v)); }

// For each of NH heads h: o[h][0..n) = sum over j of p[h][j] * v(j)[0..n),
// j in order. The heads share a KV head, so each value row is loaded once
// for all of them; columns go 16 at a time, held in registers across the
// rows.
template <int NH, typename Row>
void weighted_rows(float* const* o, const float* const* p, int64_t rows, Row v, int64_t n) {
  constexpr int64_t kChunk = 16;
  int64_t c0 = 0;
  for (; c0 + kChunk <= n; c0 += kChunk) {
    Lanes8 acc[NH][2] = {};
    for (int64_t j = 0; j < rows; ++j) {
      // Rows are a whole cache row apart (all KV heads of a token): the
      // hardware prefetcher does not keep up with the stride.
      if (j + kRowsAhead < rows) prefetch_floats(v(j + kRowsAhead) + c0, kChunk);
      const float* vj = v(j) + c0;
      const Lanes8 v0 = load8(vj), v1 = load8(vj + 8);
      for (int h = 0; h < NH; ++h) {
        const Lanes8 pj = splat8(p[h][j]);
        acc[h][0] += pj * v0;
        acc[h][1] += pj * v1;
      }
    }
    for (int h = 0; h < NH; ++h) {
      store8(o[h] + c0, acc[h][0]);
      store8(o[h] + c0 + 8, acc[h][1]);
    }
  }
  for (int h = 0; h < NH; ++h) {
    for (int64_t c = c0; c < n; ++c) o[h][c] = 0.0f;
    for (int64_t j = 0; j < rows; ++j) {
      const float* __restrict vj = v(j);
      const float pj = p[h][j];
      for (int64_t c = c0; c < n; ++c) o[h][c] += pj * vj[c];
    }
  }
}

// Query heads per attention task: the heads of one KV head are split into
// tasks of at most this many, which read each key and value row once
// (hymba-1.5b: 5 heads a KV head, tasks of 2 and 3, 10 tasks for 2 threads).
constexpr int64_t kMaxHeadsPerTask = 3;

}  // namespace

void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
            int64_t OC) {
  if (rows == 1) {
    // On a spinning team (a decode step on several threads) each thread runs
    // sgemv on its own band of rows: OpenBLAS would hand its own threads the
    // work (an OpenMP region: a wake). Bands start at multiples of kBand rows,
    // so each row meets the kernel as it does in one call over all rows.
    constexpr int64_t kBand = 16;
    if (on_spin_team() && OC >= 2 * kBand && OC * C >= kParallelMin) {
      parallel_for((OC + kBand - 1) / kBand, true, [&](int64_t first, int64_t last) {
        const int64_t o0 = first * kBand, o1 = std::min(OC, last * kBand);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(o1 - o0), static_cast<int>(C), 1.0f, w + o0 * C,
                    static_cast<int>(C), in, 1, 0.0f, out + o0, 1);
      });
      return;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(OC), static_cast<int>(C), 1.0f, w,
                static_cast<int>(C), in, 1, 0.0f, out, 1);
    return;
  }
  cpu::matmul_forward(out, ld_out, in, ld_in, w, nullptr, rows, C, OC);
}

void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K) {
  parallel_for(B, B * C * K >= kParallelMin, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
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
  });
}

void ssm_step(float* y, float* const* h, const SsmStepArgs& a) {
  const int64_t B = a.B, D = a.D, N = a.N;
  // Each row's step size and output gate first, in loops over rows that GCC
  // vectorises (one softplus and one sigmoid a row cost more, one at a time,
  // than the row's N state updates).
  thread_local std::vector<float> dt_rows, gate_rows;
  dt_rows.resize(static_cast<size_t>(B * D));
  gate_rows.resize(static_cast<size_t>(B * D));
  float* __restrict dt = dt_rows.data();
  float* __restrict gate = gate_rows.data();
  for (int64_t b = 0; b < B; ++b) {
    const float* __restrict delta = a.delta + b * D;
    for (int64_t d = 0; d < D; ++d) dt[b * D + d] = cpu::fast::softplus(delta[d] + a.delta_bias[d]);
    if (a.z != nullptr) {
      const float* __restrict z = a.z + b * a.ld_z;
      for (int64_t d = 0; d < D; ++d) gate[b * D + d] = z[d] * cpu::fast::sigmoid(z[d]);
    }
  }
  parallel_for(B * D, B * D * N >= kParallelMin, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const int64_t b = row / D, d = row % D;
      const float dt_r = dt[row];
      const float u = a.u[row];
      const float dtu = dt_r * u;
      const float* __restrict A = a.A + d * N;
      const float* __restrict Bm = a.Bm + b * a.ld_B;
      float* __restrict hs = h[b] + d * N;
      for (int64_t n = 0; n < N; ++n) hs[n] = cpu::fast::exp_nonpositive(dt_r * A[n]) * hs[n] + dtu * Bm[n];
      const float out = dot(a.Cm + b * a.ld_C, hs, N) + a.Dskip[d] * u;
      y[row] = a.z == nullptr ? out : out * gate[row];
    }
  });
}

void attention_step(float* out, int64_t ld_out, const AttnStepArgs& a) {
  const int64_t group = a.Hq / a.Hkv, ld_k = a.Hkv * a.Dqk, ld_v = a.Hkv * a.Dv;
  const int64_t parts = (group + kMaxHeadsPerTask - 1) / kMaxHeadsPerTask;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.Dqk));
  int64_t work = 0, most_keys = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    work += (a.n_cached[b] + 1) * a.Hq * (a.Dqk + a.Dv);
    most_keys = std::max(most_keys, a.n_cached[b] + 1);
  }
  parallel_for(a.B * a.Hkv * parts, work >= kParallelMin, [&](int64_t first_task, int64_t last_task) {
    // Scores then probabilities of each head of the task.
    std::vector<float> p(static_cast<size_t>(kMaxHeadsPerTask * most_keys));
    for (int64_t task = first_task; task < last_task; ++task) {
      const int64_t b = task / (a.Hkv * parts), g = task / parts % a.Hkv, part = task % parts;
      const int64_t h0 = g * group + part * group / parts, nh = (part + 1) * group / parts - part * group / parts;
      const int64_t cached = a.n_cached[b], n = cached + 1;
      auto key = [&](int64_t j) {
        return j < cached ? a.k_cache[b] + j * ld_k + g * a.Dqk : a.k_new + b * a.ld_k_new + g * a.Dqk;
      };
      auto value = [&](int64_t j) {
        return j < cached ? a.v_cache[b] + j * ld_v + g * a.Dv : a.v_new + b * a.ld_v_new + g * a.Dv;
      };
      const float* q[kMaxHeadsPerTask];
      float* probs[kMaxHeadsPerTask];
      float* o[kMaxHeadsPerTask];
      for (int64_t h = 0; h < nh; ++h) {
        q[h] = a.q + b * a.ld_q + (h0 + h) * a.Dqk;
        probs[h] = p.data() + h * most_keys;
        o[h] = out + b * ld_out + (h0 + h) * a.Dv;
      }
      int64_t first = 0;
      for (; first + 4 <= n; first += 4) {
        if (first + kRowsAhead + 4 <= n)
          for (int64_t t = first + kRowsAhead; t < first + kRowsAhead + 4; ++t) prefetch_floats(key(t), a.Dqk);
        const float *k0 = key(first), *k1 = key(first + 1), *k2 = key(first + 2), *k3 = key(first + 3);
        for (int64_t h = 0; h < nh; ++h) {
          dot4(q[h], k0, k1, k2, k3, a.Dqk, probs[h] + first);
          for (int64_t t = first; t < first + 4; ++t) probs[h][t] *= scale;
        }
      }
      for (; first < n; ++first)
        for (int64_t h = 0; h < nh; ++h) probs[h][first] = dot(q[h], key(first), a.Dqk) * scale;
      for (int64_t h = 0; h < nh; ++h) {
        float* __restrict pi = probs[h];
        float m = pi[0];
        for (int64_t j = 1; j < n; ++j) m = std::max(m, pi[j]);
        for (int64_t j = 0; j < n; ++j) pi[j] = cpu::fast::exp_nonpositive(pi[j] - m);
        const float inv = 1.0f / sum(pi, n);
        for (int64_t j = 0; j < n; ++j) pi[j] *= inv;
      }
      static_assert(kMaxHeadsPerTask == 3, "one weighted_rows per head count");
      if (nh == 1) weighted_rows<1>(o, probs, n, value, a.Dv);
      if (nh == 2) weighted_rows<2>(o, probs, n, value, a.Dv);
      if (nh == 3) weighted_rows<3>(o, probs, n, value, a.Dv);
    }
  });
}

}  // namespace hymba::infer
