// Decode-step kernels. Plain loops written so GCC vectorises them without
// -ffast-math: exponentials use the branch-free polynomials of fast_math.h
// (libm's expf is a scalar call), and sums over a vector run in eight
// independent partial sums (a single running sum is a reassociation GCC will
// not vectorise).
#include "infer/step_kernels.h"


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/vec8.h"

namespace hymba::infer {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// Sums over a vector run in 8 independent partial sums (lane j takes
// elements j, j + 8, ...), then one fixed tree, plus the tail: the vector
// type (kernels/cpu/vec8.h) keeps the 8 sums in one register; written as
// arrays, GCC shuffles them.
using cpu::load8;
using cpu::splat8;
using cpu::store8;
using cpu::Vec8;

inline float finish8(Vec8 p, float tail) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])) + tail;
}

inline float sum(const float* __restrict a, int64_t n) {
  Vec8 part = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) part += load8(a + i);
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i];
  return finish8(part, tail);
}

// The lane sums of eight vectors, as one vector: lane i is the sum of a[i]'s
// lanes, pairs first (a transposing tree: 7 adds and 14 shuffles for eight
// sums where finish8 spends 7 adds and as many extracts on each; the same
// tree as finish8 for each sum).
inline Vec8 lane_sums8(const Vec8* a) {
  auto pairs = [](Vec8 x, Vec8 y) {
    return __builtin_shufflevector(x, y, 0, 8, 2, 10, 4, 12, 6, 14) +
           __builtin_shufflevector(x, y, 1, 9, 3, 11, 5, 13, 7, 15);
  };
  auto quads = [](Vec8 x, Vec8 y) {
    return __builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15);
  };
  const Vec8 lo = quads(pairs(a[0], a[1]), pairs(a[2], a[3]));
  const Vec8 hi = quads(pairs(a[4], a[5]), pairs(a[6], a[7]));
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(lo, hi, 4, 5, 6, 7, 12, 13, 14, 15);
}

// For each of NH heads h: o[h][0..n) = sum over j of p[h][j] * v[j][0..n),
// j in order. The heads share a KV head, so each value row is loaded once
// for all of them; columns go 16 at a time, held in registers across the
// rows.
template <int NH>
void weighted_rows(float* const* o, const float* const* p, int64_t rows, const float* const* v, int64_t n) {
  constexpr int64_t kChunk = 16;
  int64_t c0 = 0;
  for (; c0 + kChunk <= n; c0 += kChunk) {
    Vec8 acc[NH][2] = {};
    for (int64_t j = 0; j < rows; ++j) {
      const float* vj = v[j] + c0;
      const Vec8 v0 = load8(vj), v1 = load8(vj + 8);
      for (int h = 0; h < NH; ++h) {
        const Vec8 pj = splat8(p[h][j]);
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
      const float* __restrict vj = v[j];
      const float pj = p[h][j];
      for (int64_t c = c0; c < n; ++c) o[h][c] += pj * vj[c];
    }
  }
}

// Heads given to one weighted_rows call: a KV head's query heads go in
// slices of at most this many (hymba-1.5b: 5 heads a KV head, one slice).
constexpr int64_t kMaxHeadsPerSlice = 6;

void weighted_rows_any(int64_t nh, float* const* o, const float* const* p, int64_t rows, const float* const* v,
                       int64_t n) {
  static_assert(kMaxHeadsPerSlice == 6, "one weighted_rows per head count");
  switch (nh) {
    case 1: return weighted_rows<1>(o, p, rows, v, n);
    case 2: return weighted_rows<2>(o, p, rows, v, n);
    case 3: return weighted_rows<3>(o, p, rows, v, n);
    case 4: return weighted_rows<4>(o, p, rows, v, n);
    case 5: return weighted_rows<5>(o, p, rows, v, n);
    default: return weighted_rows<6>(o, p, rows, v, n);
  }
}

// Keys per attention task: each sequence's keys are cut into runs of this
// many, whatever the thread count, so a sequence's result does not depend
// on the threads or on the other sequences of its step. A task reads its
// keys' whole cache rows (every KV head) front to back.
constexpr int64_t kKeysPerTask = 32;

// One task's share of the attention of one sequence, every query head:
// s[h * kKeysPerTask + i] = scale * q_h . key(i), then, per head, the run's
// largest score m[h], the sum l[h] of exp(s - m[h]) and
// o[h] = sum of exp(s - m[h]) * value(i). key(i)/value(i) are whole cache rows.
struct KeyRun {
  const float* const* k_rows;
  const float* const* v_rows;
  int64_t count;
};

void attend_run(const AttnStepArgs& a, const float* q, const KeyRun& run, float scale, float* s, float* m, float* l,
                float* o) {
  const int64_t group = a.Hq / a.Hkv;
  // Scores, eight keys at a time (a short last block repeats its last key
  // and keeps only its own).
  for (int64_t j0 = 0; j0 < run.count; j0 += 8) {
    const int64_t valid = std::min<int64_t>(8, run.count - j0);
    const float* k[8];
    for (int64_t i = 0; i < 8; ++i) k[i] = run.k_rows[j0 + std::min(i, valid - 1)];
    for (int64_t h = 0; h < a.Hq; ++h) {
      const int64_t off = h / group * a.Dqk;
      const float* qh = q + h * a.Dqk;
      Vec8 acc[8] = {};
      int64_t d = 0;
      for (; d + 8 <= a.Dqk; d += 8) {
        const Vec8 qv = load8(qh + d);
        for (int i = 0; i < 8; ++i) acc[i] += qv * load8(k[i] + off + d);
      }
      Vec8 r = lane_sums8(acc);
      for (; d < a.Dqk; ++d)
        for (int i = 0; i < 8; ++i) r[i] += qh[d] * k[i][off + d];
      r *= splat8(scale);
      float* sh = s + h * kKeysPerTask + j0;
      for (int64_t i = 0; i < valid; ++i) sh[i] = r[i];
    }
  }
  for (int64_t h = 0; h < a.Hq; ++h) {
    float* __restrict sh = s + h * kKeysPerTask;
    float most = sh[0];
    for (int64_t i = 1; i < run.count; ++i) most = std::max(most, sh[i]);
    for (int64_t i = 0; i < run.count; ++i) sh[i] = cpu::fast::exp_nonpositive(sh[i] - most);
    m[h] = most;
    l[h] = sum(sh, run.count);
  }
  // Values: each KV head's query heads in slices.
  const float* v[kKeysPerTask];
  for (int64_t g = 0; g < a.Hkv; ++g) {
    for (int64_t i = 0; i < run.count; ++i) v[i] = run.v_rows[i] + g * a.Dv;
    const int64_t slices = (group + kMaxHeadsPerSlice - 1) / kMaxHeadsPerSlice;
    for (int64_t slice = 0; slice < slices; ++slice) {
      const int64_t h0 = g * group + slice * group / slices, h1 = g * group + (slice + 1) * group / slices;
      float* outs[kMaxHeadsPerSlice];
      const float* probs[kMaxHeadsPerSlice];
      for (int64_t h = h0; h < h1; ++h) {
        outs[h - h0] = o + h * a.Dv;
        probs[h - h0] = s + h * kKeysPerTask;
      }
      weighted_rows_any(h1 - h0, outs, probs, run.count, v, a.Dv);
    }
  }
}

}  // namespace

void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
            int64_t OC) {
  if (rows == 1) {
    // A decode step's product of one row: rows summed in one fixed order
    // (kernels/cpu/matmul_bf16.h), so the bits depend neither on the threads
    // nor on OpenBLAS, whose sgemv sums a row one way in a group of four
    // and another way in the ragged rest of the band its threads give it.
    cpu::matmul_f32_rows(out, ld_out, in, ld_in, w, nullptr, 1, C, OC);
    return;
  }
  cpu::matmul_forward(out, ld_out, in, ld_in, w, nullptr, rows, C, OC);
}

namespace {

// conv_step's rows [first, last) (row = b * C + c); K_FIXED > 0 is K known
// at compile time (Mamba's d_conv of 4), where the tap loops unroll.
template <int64_t K_FIXED>
void conv_rows(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight,
               const float* bias, int64_t C, int64_t k_runtime, int64_t first, int64_t last) {
  const int64_t K = K_FIXED > 0 ? K_FIXED : k_runtime;
  for (int64_t row = first; row < last; ++row) {
    const int64_t b = row / C, c = row % C;
    const float* w = weight + c * K;
    float* s = state[b] + c * (K - 1);
    const float xv = x[b * ld_x + c];
    // Same order as the full convolution: bias, then taps oldest first.
    float acc = bias != nullptr ? bias[c] : 0.0f;
    for (int64_t k = 0; k < K - 1; ++k) acc += w[k] * s[k];
    acc += w[K - 1] * xv;
    out[row] = acc;
    for (int64_t k = 0; k + 1 < K - 1; ++k) s[k] = s[k + 1];
    if (K > 1) s[K - 2] = xv;
  }
}

}  // namespace

void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K) {
  // Channels are independent: a step of one sequence splits them too.
  parallel_for(B * C, B * C * K >= kParallelMin, [&](int64_t first, int64_t last) {
    if (K == 4)
      conv_rows<4>(out, x, ld_x, state, weight, bias, C, K, first, last);
    else
      conv_rows<0>(out, x, ld_x, state, weight, bias, C, K, first, last);
  });
}

void ssm_step(float* y, float* const* h, const SsmStepArgs& a) {
  const int64_t D = a.D, N = a.N;
  // Rows (b, d) in runs of 8 of one sequence: each row's step size and gate
  // first, in loops GCC vectorises (a softplus and a sigmoid a row, one at a
  // time, cost more than the row's N state updates), then the state updates,
  // and the 8 rows' sums C . h in one lane_sums8 (the same pairs-first tree
  // as finish8, the order the sums had before).
  const int64_t runs_per_row = (D + 7) / 8;
  parallel_for(a.B * runs_per_row, a.B * D * N >= kParallelMin, [&](int64_t first, int64_t last) {
    for (int64_t run = first; run < last; ++run) {
      const int64_t b = run / runs_per_row, d0 = run % runs_per_row * 8, nd = std::min<int64_t>(8, D - d0);
      const float* __restrict u = a.u + b * D + d0;
      const float* __restrict delta = a.delta + b * D + d0;
      float dt[8], gate[8];
      for (int64_t i = 0; i < nd; ++i) dt[i] = cpu::fast::softplus(delta[i] + a.delta_bias[d0 + i]);
      if (a.z != nullptr) {
        const float* __restrict z = a.z + b * a.ld_z + d0;
        for (int64_t i = 0; i < nd; ++i) gate[i] = z[i] * cpu::fast::sigmoid(z[i]);
      }
      const float* __restrict Bm = a.Bm + b * a.ld_B;
      const float* __restrict Cm = a.Cm + b * a.ld_C;
      Vec8 parts[8] = {};
      float tails[8] = {};
      for (int64_t i = 0; i < nd; ++i) {
        const float dt_r = dt[i], dtu = dt_r * u[i];
        const float* __restrict A = a.A + (d0 + i) * N;
        float* __restrict hs = h[b] + (d0 + i) * N;
        for (int64_t n = 0; n < N; ++n) hs[n] = cpu::fast::exp_nonpositive(dt_r * A[n]) * hs[n] + dtu * Bm[n];
        int64_t n = 0;
        for (; n + 8 <= N; n += 8) parts[i] += load8(Cm + n) * load8(hs + n);
        for (; n < N; ++n) tails[i] += Cm[n] * hs[n];
      }
      const Vec8 sums = lane_sums8(parts);
      float* __restrict yr = y + b * D + d0;
      for (int64_t i = 0; i < nd; ++i) {
        const float out = (sums[i] + tails[i]) + a.Dskip[d0 + i] * u[i];
        yr[i] = a.z == nullptr ? out : out * gate[i];
      }
    }
  });
}

void attention_step(float* out, int64_t ld_out, const AttnStepArgs& a) {
  const int64_t Hq = a.Hq, Dv = a.Dv, ld_k = a.Hkv * a.Dqk, ld_v = a.Hkv * a.Dv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.Dqk));
  // Tasks: runs of kKeysPerTask keys of each sequence (its cache rows, then
  // its new row), each leaving per head a largest score, a sum and a
  // weighted value row; the runs of a sequence then merge in order.
  thread_local std::vector<int64_t> first_task;
  thread_local std::vector<float> partials;
  first_task.assign(static_cast<size_t>(a.B + 1), 0);
  int64_t work = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t keys = a.n_cached[b] + 1, runs = (keys + kKeysPerTask - 1) / kKeysPerTask;
    first_task[static_cast<size_t>(b + 1)] = first_task[static_cast<size_t>(b)] + runs;
    work += keys * Hq * (a.Dqk + Dv);
  }
  const int64_t tasks = first_task.back(), per_task = Hq * (Dv + 2);
  partials.resize(static_cast<size_t>(tasks * per_task));
  float* const part = partials.data();
  const int64_t* const firsts = first_task.data();
  parallel_for(tasks, work >= kParallelMin, [&](int64_t first, int64_t last) {
    // Each thread's scores, kept: a step runs this for every attention layer.
    thread_local std::vector<float> s;
    s.resize(static_cast<size_t>(Hq * kKeysPerTask));
    const float* k_rows[kKeysPerTask];
    const float* v_rows[kKeysPerTask];
    int64_t b = 0;
    for (int64_t task = first; task < last; ++task) {
      while (firsts[b + 1] <= task) ++b;
      const int64_t cached = a.n_cached[b], j0 = (task - firsts[b]) * kKeysPerTask;
      const int64_t count = std::min(kKeysPerTask, cached + 1 - j0);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t j = j0 + i;
        k_rows[i] = j < cached ? a.k_cache[b] + j * ld_k : a.k_new + b * a.ld_k_new;
        v_rows[i] = j < cached ? a.v_cache[b] + j * ld_v : a.v_new + b * a.ld_v_new;
      }
      float* t = part + task * per_task;
      attend_run(a, a.q + b * a.ld_q, KeyRun{k_rows, v_rows, count}, scale, s.data(), t, t + Hq, t + 2 * Hq);
    }
  });
  // Merge each sequence's runs in order: rescale each run to the largest
  // score of all, sum, divide by the sum of weights.
  parallel_for(a.B, work >= kParallelMin && a.B > 1, [&](int64_t b_first, int64_t b_last) {
    for (int64_t b = b_first; b < b_last; ++b) {
      const int64_t t0 = firsts[b], t1 = firsts[b + 1];
      for (int64_t h = 0; h < Hq; ++h) {
        float most = part[t0 * per_task + h];
        for (int64_t t = t0 + 1; t < t1; ++t) most = std::max(most, part[t * per_task + h]);
        float* __restrict o = out + b * ld_out + h * Dv;
        float total = 0.0f;
        for (int64_t t = t0; t < t1; ++t) {
          const float* run = part + t * per_task;
          const float w = cpu::fast::exp_nonpositive(run[h] - most);
          total += w * run[Hq + h];
          const float* __restrict ro = run + 2 * Hq + h * Dv;
          if (t == t0)
            for (int64_t c = 0; c < Dv; ++c) o[c] = w * ro[c];
          else
            for (int64_t c = 0; c < Dv; ++c) o[c] += w * ro[c];
        }
        const float inv = 1.0f / total;
        for (int64_t c = 0; c < Dv; ++c) o[c] *= inv;
      }
    }
  });
}

}  // namespace hymba::infer
