// The attention of a decode step (attention_step.h). Plain loops written so
// GCC vectorises them without -ffast-math: exponentials use the branch-free
// polynomials of fast_math.h (libm's expf is a scalar call), and sums over a
// vector run in eight independent partial sums (a single running sum is a
// reassociation GCC will not vectorise).
#include "kernels/cpu/attention_step.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/vec8.h"

namespace hymba::cpu {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// Sums over a vector run in 8 independent partial sums (lane j takes
// elements j, j + 8, ...), then one fixed tree, plus the tail: the vector
// type (kernels/cpu/vec8.h) keeps the 8 sums in one register; written as
// arrays, GCC shuffles them.
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
    for (int64_t i = 0; i < run.count; ++i) sh[i] = fast::exp_nonpositive(sh[i] - most);
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
          const float w = fast::exp_nonpositive(run[h] - most);
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

}  // namespace hymba::cpu
