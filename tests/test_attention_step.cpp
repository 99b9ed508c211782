// The attention of a decode step (kernels/cpu/attention_step.h): against its
// plain reference (kernels/reference/attention_step.h) in float64 on ragged
// shapes, against the full masked attention with the cache passed as a ring,
// and the same bits on any thread count and whatever the other rows of the
// step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_step.h"
#include "kernels/reference/attention_step.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::rel_error;

// The single-token kernels against the full-sequence kernels on one layer.
constexpr double kStepRelTol = 2e-5;
// Against the float64 reference: float32 sums and the fast exp.
constexpr double kReferenceRelTol = 1e-5;
// What the floats between output rows hold, and must still hold after.
constexpr float kPad = -7.0f;

// Shapes: tails only (head dims under 8 and 16); whole runs of 8 and 16
// with key counts on and off the blocks of 8 and over one task's 32 keys
// (runs merged); both at once (Dqk 20, Dv 40); 74 keys (three runs) with 7
// query heads a KV head (value slices of 4 and 3). Heads: 2 a KV head, 5
// (one slice), 1.
TEST(AttentionStep, OverARingEqualsMaskedAttention) {
  struct Shape {
    int64_t S, Dqk, Dv, Hq, Hkv;
  };
  for (const Shape shape :
       {Shape{13, 6, 5, 4, 2}, Shape{38, 64, 64, 10, 2}, Shape{23, 20, 40, 3, 3}, Shape{74, 16, 24, 14, 2}})
  for (int64_t window : {0, 1, 4}) {
    const int64_t S = shape.S, Hq = shape.Hq, Hkv = shape.Hkv, Dqk = shape.Dqk, Dv = shape.Dv, M = 2;
    Rng rng(9);
    const auto q = random_floats(S * Hq * Dqk, rng), k = random_floats(S * Hkv * Dqk, rng),
               v = random_floats(S * Hkv * Dv, rng);
    SCOPED_TRACE("S " + std::to_string(S) + " Dqk " + std::to_string(Dqk) + " Dv " + std::to_string(Dv) + " Hq " +
                 std::to_string(Hq) + " Hkv " + std::to_string(Hkv) + " window " + std::to_string(window));
    cpu::AttnArgs fa;
    fa.B = 1;
    fa.Tq = fa.Tk = S;
    fa.Hq = Hq;
    fa.Hkv = Hkv;
    fa.Dqk = Dqk;
    fa.Dv = Dv;
    fa.q = q.data();
    fa.ld_q = Hq * Dqk;
    fa.k = k.data();
    fa.ld_k = Hkv * Dqk;
    fa.v = v.data();
    fa.ld_v = Hkv * Dv;
    fa.window = window;
    fa.num_meta = M;
    std::vector<float> full(S * Hq * Dv);
    cpu::attention_forward(full.data(), Hq * Dv, nullptr, fa);
    // The last query's visible keys, in a scrambled (ring-like) order, minus the current one.
    const int64_t i = S - 1;
    std::vector<int64_t> rows;
    for (int64_t j = 0; j < i; ++j)
      if (j < M || window == 0 || i - j < window) rows.push_back(j);
    std::rotate(rows.begin() + std::min<int64_t>(M, rows.size()), rows.begin() + std::min<int64_t>(M + 2, rows.size()),
                rows.end());
    std::vector<float> kc, vc;
    for (int64_t j : rows) {
      kc.insert(kc.end(), k.begin() + j * Hkv * Dqk, k.begin() + (j + 1) * Hkv * Dqk);
      vc.insert(vc.end(), v.begin() + j * Hkv * Dv, v.begin() + (j + 1) * Hkv * Dv);
    }
    const float* kp[] = {kc.data()};
    const float* vp[] = {vc.data()};
    const int64_t n[] = {static_cast<int64_t>(rows.size())};
    cpu::AttnStepArgs a;
    a.B = 1;
    a.Hq = Hq;
    a.Hkv = Hkv;
    a.Dqk = Dqk;
    a.Dv = Dv;
    a.q = q.data() + i * Hq * Dqk;
    a.ld_q = Hq * Dqk;
    a.k_new = k.data() + i * Hkv * Dqk;
    a.ld_k_new = Hkv * Dqk;
    a.v_new = v.data() + i * Hkv * Dv;
    a.ld_v_new = Hkv * Dv;
    a.k_cache = kp;
    a.v_cache = vp;
    a.n_cached = n;
    std::vector<float> out(Hq * Dv);
    cpu::attention_step(out.data(), Hq * Dv, a);
    EXPECT_LE(rel_error(out.data(), full.data() + i * Hq * Dv, Hq * Dv, 1.0), kStepRelTol);
  }
}

// One step's operands for B rows: q, k_new and v_new rows padded by 3
// floats past their heads (strided, as slices of the fused projection), and
// each row's own cache of n_cached[b] keys and values.
template <typename T>
struct AttnStepData {
  int64_t B = 0, Hq = 0, Hkv = 0, Dqk = 0, Dv = 0;
  std::vector<T> q, k_new, v_new;
  std::vector<std::vector<T>> k_cache, v_cache;
  std::vector<int64_t> n_cached;
  std::vector<const T*> k_rows, v_rows;

  AttnStepData() = default;
  // The same operands in another element type (the reference's float64).
  template <typename U>
  explicit AttnStepData(const AttnStepData<U>& o)
      : B(o.B), Hq(o.Hq), Hkv(o.Hkv), Dqk(o.Dqk), Dv(o.Dv), q(o.q.begin(), o.q.end()),
        k_new(o.k_new.begin(), o.k_new.end()), v_new(o.v_new.begin(), o.v_new.end()), n_cached(o.n_cached) {
    for (const auto& rows : o.k_cache) k_cache.emplace_back(rows.begin(), rows.end());
    for (const auto& rows : o.v_cache) v_cache.emplace_back(rows.begin(), rows.end());
  }

  int64_t ld_q() const { return Hq * Dqk + 3; }
  int64_t ld_k() const { return Hkv * Dqk + 3; }
  int64_t ld_v() const { return Hkv * Dv + 3; }
  template <typename Args>
  Args args() {
    k_rows.clear();
    v_rows.clear();
    for (int64_t b = 0; b < B; ++b) {
      k_rows.push_back(k_cache[static_cast<size_t>(b)].data());
      v_rows.push_back(v_cache[static_cast<size_t>(b)].data());
    }
    Args a;
    a.B = B;
    a.Hq = Hq;
    a.Hkv = Hkv;
    a.Dqk = Dqk;
    a.Dv = Dv;
    a.q = q.data();
    a.ld_q = ld_q();
    a.k_new = k_new.data();
    a.ld_k_new = ld_k();
    a.v_new = v_new.data();
    a.ld_v_new = ld_v();
    a.k_cache = k_rows.data();
    a.v_cache = v_rows.data();
    a.n_cached = n_cached.data();
    return a;
  }
};

AttnStepData<float> random_step(int64_t Hq, int64_t Hkv, int64_t Dqk, int64_t Dv, const std::vector<int64_t>& n_cached,
                                Rng& rng) {
  AttnStepData<float> s;
  s.B = static_cast<int64_t>(n_cached.size());
  s.Hq = Hq;
  s.Hkv = Hkv;
  s.Dqk = Dqk;
  s.Dv = Dv;
  s.n_cached = n_cached;
  s.q = random_floats(s.B * s.ld_q(), rng);
  s.k_new = random_floats(s.B * s.ld_k(), rng);
  s.v_new = random_floats(s.B * s.ld_v(), rng);
  for (const int64_t n : n_cached) {
    s.k_cache.push_back(random_floats(n * Hkv * Dqk, rng));
    s.v_cache.push_back(random_floats(n * Hkv * Dv, rng));
  }
  return s;
}

// Shapes as OverARingEqualsMaskedAttention's, several rows a step: an empty
// cache, key counts on and off the blocks of 8, one task's 32 keys and more
// (runs merged). Output rows are 5 floats apart past their heads; those
// floats must stay as they were.
TEST(AttentionStep, MatchesTheReferenceOnRaggedShapes) {
  struct Shape {
    int64_t Dqk, Dv, Hq, Hkv;
  };
  const std::vector<int64_t> n_cached = {0, 7, 31, 32, 70};
  for (const Shape shape : {Shape{6, 5, 4, 2}, Shape{64, 64, 10, 2}, Shape{20, 40, 3, 3}, Shape{16, 24, 14, 2}}) {
    SCOPED_TRACE("Dqk " + std::to_string(shape.Dqk) + " Dv " + std::to_string(shape.Dv) + " Hq " +
                 std::to_string(shape.Hq) + " Hkv " + std::to_string(shape.Hkv));
    Rng rng(5);
    AttnStepData<float> fast = random_step(shape.Hq, shape.Hkv, shape.Dqk, shape.Dv, n_cached, rng);
    AttnStepData<double> ref(fast);
    const int64_t width = shape.Hq * shape.Dv, ld_out = width + 5, B = fast.B;
    std::vector<float> out(static_cast<size_t>(B * ld_out), kPad);
    std::vector<double> out_ref(static_cast<size_t>(B * width));
    cpu::attention_step(out.data(), ld_out, fast.args<cpu::AttnStepArgs>());
    ref::attention_step(out_ref.data(), width, ref.args<ref::AttnStepArgs<double>>());
    test::expect_close(test::unstrided(out, B, width, ld_out, kPad), out_ref, kReferenceRelTol, "out");
  }
}

// Each sequence's keys go in runs of a fixed length, whatever the thread
// count; a row's bits do not depend on the other rows of its step either
// (a sequence gives the same tokens decoded alone or in a batch).
TEST(AttentionStep, SameBitsOnAnyThreadCountAndAloneOrInABatch) {
  Rng rng(17);
  AttnStepData<float> s = random_step(5, 1, 48, 40, {100, 41}, rng);
  const int64_t width = s.Hq * s.Dv;
  const auto run = [&](AttnStepData<float>& data) {
    std::vector<float> out(static_cast<size_t>(data.B * width));
    cpu::attention_step(out.data(), width, data.args<cpu::AttnStepArgs>());
    return out;
  };
  test::expect_same_bits_on_any_thread_count([&] { return run(s); });
  const std::vector<float> batch = run(s);
  for (int64_t b = 0; b < s.B; ++b) {
    AttnStepData<float> alone = s;
    alone.B = 1;
    alone.q.erase(alone.q.begin(), alone.q.begin() + b * s.ld_q());
    alone.k_new.erase(alone.k_new.begin(), alone.k_new.begin() + b * s.ld_k());
    alone.v_new.erase(alone.v_new.begin(), alone.v_new.begin() + b * s.ld_v());
    alone.k_cache = {s.k_cache[static_cast<size_t>(b)]};
    alone.v_cache = {s.v_cache[static_cast<size_t>(b)]};
    alone.n_cached = {s.n_cached[static_cast<size_t>(b)]};
    const std::vector<float> one = run(alone);
    EXPECT_EQ(std::memcmp(one.data(), batch.data() + b * width, one.size() * sizeof(float)), 0) << "row " << b;
  }
}

}  // namespace
}  // namespace hymba
