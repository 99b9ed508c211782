#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "kernels/cpu/attention.h"
#include "kernels/reference/attention.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

// Fast float32 forward vs the float32 reference (different summation order
// and exp implementation).
constexpr double kForwardTol = 1e-5;
// Absolute tolerance on the log-sum-exp (values are O(1..10)).
constexpr double kLseTol = 1e-5;
// Fast float32 backward vs float64 central finite differences of the reference.
constexpr double kGradTol = 3e-5;

struct AttnCase {
  int64_t B, Tq, Tk, q_offset, Hq, Hkv, Dqk, Dv, window, num_meta;
  float scale = 0.0f;  // 0: 1/sqrt(Dqk)
};

std::ostream& operator<<(std::ostream& os, const AttnCase& c) {
  return os << "B" << c.B << " Tq" << c.Tq << " Tk" << c.Tk << " off" << c.q_offset << " Hq" << c.Hq << " Hkv"
            << c.Hkv << " Dqk" << c.Dqk << " Dv" << c.Dv << " window" << c.window << " meta" << c.num_meta
            << " scale" << c.scale;
}

ref::AttnShape ref_shape(const AttnCase& c) {
  return {c.B, c.Tq, c.Tk, c.q_offset, c.Hq, c.Hkv, c.Dqk, c.Dv, c.window, c.num_meta, c.scale};
}

// Contiguous inputs for one case; q/k/v drawn at random (never zero).
struct AttnData {
  AttnCase c;
  std::vector<float> q, k, v;

  AttnData(const AttnCase& shape, uint64_t seed) : c(shape) {
    Rng rng(seed);
    q = random_floats(c.B * c.Tq * c.Hq * c.Dqk, rng);
    k = random_floats(c.B * c.Tk * c.Hkv * c.Dqk, rng);
    v = random_floats(c.B * c.Tk * c.Hkv * c.Dv, rng);
  }
  size_t out_size() const { return c.B * c.Tq * c.Hq * c.Dv; }
  size_t lse_size() const { return c.B * c.Hq * c.Tq; }

  cpu::AttnArgs args() const {
    cpu::AttnArgs a;
    a.B = c.B, a.Tq = c.Tq, a.Tk = c.Tk, a.q_offset = c.q_offset;
    a.Hq = c.Hq, a.Hkv = c.Hkv, a.Dqk = c.Dqk, a.Dv = c.Dv;
    a.q = q.data(), a.ld_q = c.Hq * c.Dqk;
    a.k = k.data(), a.ld_k = c.Hkv * c.Dqk;
    a.v = v.data(), a.ld_v = c.Hkv * c.Dv;
    a.window = c.window, a.num_meta = c.num_meta, a.scale = c.scale;
    return a;
  }
};

struct ForwardResult {
  std::vector<float> out, lse;
};

ForwardResult run_forward(const AttnData& d) {
  ForwardResult r{std::vector<float>(d.out_size()), std::vector<float>(d.lse_size())};
  cpu::attention_forward(r.out.data(), d.c.Hq * d.c.Dv, r.lse.data(), d.args());
  return r;
}

struct Grads {
  std::vector<float> dq, dk, dv;
};

// Runs the backward onto copies of `initial` (non-zero, to check +=).
Grads run_backward(const AttnData& d, const ForwardResult& fwd, const std::vector<float>& dout, const Grads& initial) {
  Grads g = initial;
  const AttnCase& c = d.c;
  cpu::attention_backward(g.dq.data(), c.Hq * c.Dqk, g.dk.data(), c.Hkv * c.Dqk, g.dv.data(), c.Hkv * c.Dv,
                          dout.data(), c.Hq * c.Dv, fwd.out.data(), c.Hq * c.Dv, fwd.lse.data(), d.args());
  return g;
}

Grads random_grads(const AttnData& d, Rng& rng) {
  return {random_floats(d.q.size(), rng), random_floats(d.k.size(), rng), random_floats(d.v.size(), rng)};
}

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differs bitwise";
}

class AttentionForward : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionForward, MatchesReference) {
  const AttnData d(GetParam(), 11);
  const ForwardResult fast = run_forward(d);
  std::vector<float> ref_out(d.out_size()), ref_lse(d.lse_size());
  ref::attention_forward(ref_out.data(), ref_lse.data(), d.q.data(), d.k.data(), d.v.data(), ref_shape(d.c));
  test::expect_close(fast.out, ref_out, kForwardTol, "out");
  for (size_t i = 0; i < ref_lse.size(); ++i) ASSERT_NEAR(fast.lse[i], ref_lse[i], kLseTol) << "lse [" << i << "]";

  // Without lse (inference) the output is the same.
  std::vector<float> out_no_lse(d.out_size());
  cpu::attention_forward(out_no_lse.data(), d.c.Hq * d.c.Dv, nullptr, d.args());
  expect_bitwise_equal(out_no_lse, fast.out, "out without lse");
}

// Query blocks are 24 and key tiles 64 wide: T values straddle both, and
// windows/meta counts place the meta prefix and window band apart or merged.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionForward,
    ::testing::Values(AttnCase{1, 1, 1, 0, 1, 1, 4, 4, 0, 0},          // single token
                      AttnCase{2, 5, 5, 0, 4, 2, 8, 8, 0, 0},          // GQA 2, global
                      AttnCase{1, 13, 13, 0, 3, 1, 8, 16, 4, 0},       // GQA 3, window < T, Dqk != Dv
                      AttnCase{1, 37, 37, 0, 4, 2, 16, 8, 8, 3},       // window + meta
                      AttnCase{1, 70, 70, 0, 2, 1, 8, 12, 16, 20},     // meta > window
                      AttnCase{1, 70, 70, 0, 3, 1, 5, 7, 1, 0},        // window 1: diagonal only
                      AttnCase{2, 70, 70, 0, 4, 4, 64, 128, 0, 0},     // official head dims, global
                      AttnCase{1, 200, 200, 0, 2, 1, 16, 16, 40, 10},  // meta and band disjoint
                      AttnCase{1, 130, 130, 0, 2, 2, 32, 32, 300, 5},  // window > T
                      AttnCase{2, 1, 50, 49, 4, 2, 8, 8, 0, 0},        // decode, global
                      AttnCase{1, 1, 150, 149, 3, 1, 16, 32, 32, 8},   // decode, window + meta
                      AttnCase{1, 7, 40, 33, 2, 1, 8, 8, 10, 4},       // chunk against a cache
                      AttnCase{1, 2, 90, 88, 2, 1, 8, 8, 16, 0},       // decode, window only
                      AttnCase{1, 2, 4, 10, 2, 1, 4, 4, 3, 2},         // queries past the cache: meta only
                      AttnCase{1, 40, 140, 100, 2, 1, 8, 8, 0, 0},     // long cache, global
                      AttnCase{1, 30, 30, 0, 2, 1, 8, 8, 12, 2, 0.7f}));  // explicit scale

class AttentionBackward : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionBackward, MatchesFiniteDifferencesAndAccumulates) {
  const AttnData d(GetParam(), 21);
  const AttnCase& c = d.c;
  Rng rng(22);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads initial = random_grads(d, rng);
  const ForwardResult fwd = run_forward(d);
  const Grads g = run_backward(d, fwd, dout, initial);

  auto qd = to_double(d.q), kd = to_double(d.k), vd = to_double(d.v), w = to_double(dout);
  std::vector<double> out(d.out_size());
  auto loss = [&] {
    ref::attention_forward<double>(out.data(), nullptr, qd.data(), kd.data(), vd.data(), ref_shape(c));
    return test::weighted_sum(out, w);
  };
  test::expect_grad_matches(loss, qd, minus(g.dq, initial.dq), kGradTol, "dq");
  test::expect_grad_matches(loss, kd, minus(g.dk, initial.dk), kGradTol, "dk");
  test::expect_grad_matches(loss, vd, minus(g.dv, initial.dv), kGradTol, "dv");
}

// Small head dims keep the finite differences (one reference forward per
// input element and sign) fast.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionBackward,
    ::testing::Values(AttnCase{1, 1, 1, 0, 1, 1, 3, 2, 0, 0},       // single token
                      AttnCase{2, 5, 5, 0, 4, 2, 4, 3, 0, 0},       // GQA 2, B 2, Dqk != Dv
                      AttnCase{1, 13, 13, 0, 3, 1, 4, 6, 4, 2},     // GQA 3, window + meta
                      AttnCase{1, 37, 37, 0, 2, 1, 4, 4, 8, 10},    // meta > window
                      AttnCase{1, 70, 70, 0, 1, 1, 3, 5, 16, 3},    // crosses query blocks and key tiles
                      AttnCase{1, 70, 70, 0, 2, 1, 2, 2, 0, 0},     // global over several tiles
                      AttnCase{1, 1, 20, 19, 2, 1, 4, 4, 0, 0},     // decode
                      AttnCase{1, 3, 20, 17, 4, 2, 4, 4, 5, 2},     // chunk vs cache, window + meta
                      AttnCase{1, 2, 4, 10, 2, 1, 4, 4, 3, 2},      // queries past the cache: meta only
                      AttnCase{1, 30, 30, 0, 2, 1, 4, 4, 12, 2, 0.7f}));  // explicit scale

TEST(Attention, WindowAtLeastTEqualsGlobal) {
  const AttnCase global{2, 45, 45, 0, 4, 2, 8, 8, 0, 0};
  const AttnData d(global, 31);
  const ForwardResult base = run_forward(d);
  Rng rng(32);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads zero{std::vector<float>(d.q.size()), std::vector<float>(d.k.size()), std::vector<float>(d.v.size())};
  const Grads base_grads = run_backward(d, base, dout, zero);
  for (int64_t window : {45, 46, 1000}) {
    for (int64_t num_meta : {0, 7}) {
      AttnData wd = d;
      wd.c.window = window, wd.c.num_meta = num_meta;
      const ForwardResult r = run_forward(wd);
      expect_bitwise_equal(r.out, base.out, "out");
      expect_bitwise_equal(r.lse, base.lse, "lse");
      const Grads gr = run_backward(wd, r, dout, zero);
      expect_bitwise_equal(gr.dq, base_grads.dq, "dq");
      expect_bitwise_equal(gr.dk, base_grads.dk, "dk");
      expect_bitwise_equal(gr.dv, base_grads.dv, "dv");
    }
  }
}

TEST(Attention, StridedSlicesInsideFusedBuffers) {
  const AttnCase c{2, 35, 35, 0, 4, 2, 8, 12, 9, 3};
  const AttnData d(c, 41);
  Rng rng(42);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads initial = random_grads(d, rng);
  const ForwardResult fwd = run_forward(d);
  const Grads expect = run_backward(d, fwd, dout, initial);

  // Fused projection row: [pad 1 | q | k | v | pad 2]; same for the grads.
  const int64_t q_cols = c.Hq * c.Dqk, k_cols = c.Hkv * c.Dqk, v_cols = c.Hkv * c.Dv;
  const int64_t q_at = 1, k_at = q_at + q_cols, v_at = k_at + k_cols, ld_qkv = v_at + v_cols + 2;
  const int64_t out_at = 3, ld_out = out_at + c.Hq * c.Dv + 4;
  const int64_t rows_q = c.B * c.Tq, rows_k = c.B * c.Tk;
  constexpr float kSentinel = 1234.5f;
  std::vector<float> qkv(rows_q * ld_qkv, kSentinel), grads(rows_q * ld_qkv, kSentinel);
  std::vector<float> wide_out(rows_q * ld_out, kSentinel), wide_dout(rows_q * ld_out, kSentinel);
  for (int64_t r = 0; r < rows_q; ++r) {
    for (int64_t x = 0; x < q_cols; ++x) qkv[r * ld_qkv + q_at + x] = d.q[r * q_cols + x];
    for (int64_t x = 0; x < q_cols; ++x) grads[r * ld_qkv + q_at + x] = initial.dq[r * q_cols + x];
    for (int64_t x = 0; x < c.Hq * c.Dv; ++x) wide_dout[r * ld_out + out_at + x] = dout[r * c.Hq * c.Dv + x];
  }
  for (int64_t r = 0; r < rows_k; ++r) {
    for (int64_t x = 0; x < k_cols; ++x) qkv[r * ld_qkv + k_at + x] = d.k[r * k_cols + x];
    for (int64_t x = 0; x < v_cols; ++x) qkv[r * ld_qkv + v_at + x] = d.v[r * v_cols + x];
    for (int64_t x = 0; x < k_cols; ++x) grads[r * ld_qkv + k_at + x] = initial.dk[r * k_cols + x];
    for (int64_t x = 0; x < v_cols; ++x) grads[r * ld_qkv + v_at + x] = initial.dv[r * v_cols + x];
  }
  const std::vector<float> grads_before = grads, out_before = wide_out;

  cpu::AttnArgs a = d.args();
  a.q = qkv.data() + q_at, a.k = qkv.data() + k_at, a.v = qkv.data() + v_at;
  a.ld_q = a.ld_k = a.ld_v = ld_qkv;
  std::vector<float> lse(d.lse_size());
  cpu::attention_forward(wide_out.data() + out_at, ld_out, lse.data(), a);
  cpu::attention_backward(grads.data() + q_at, ld_qkv, grads.data() + k_at, ld_qkv, grads.data() + v_at, ld_qkv,
                          wide_dout.data() + out_at, ld_out, wide_out.data() + out_at, ld_out, lse.data(), a);

  expect_bitwise_equal(lse, fwd.lse, "lse");
  for (int64_t r = 0; r < rows_q; ++r)
    for (int64_t x = 0; x < ld_out; ++x) {
      const int64_t col = x - out_at;
      const float want = col >= 0 && col < c.Hq * c.Dv ? fwd.out[r * c.Hq * c.Dv + col] : out_before[r * ld_out + x];
      ASSERT_EQ(wide_out[r * ld_out + x], want) << "out row " << r << " col " << x;
    }
  for (int64_t r = 0; r < rows_q; ++r)
    for (int64_t x = 0; x < ld_qkv; ++x) {
      float want = grads_before[r * ld_qkv + x];
      if (x >= q_at && x < k_at) want = expect.dq[r * q_cols + x - q_at];
      if (x >= k_at && x < v_at) want = expect.dk[r * k_cols + x - k_at];
      if (x >= v_at && x < v_at + v_cols) want = expect.dv[r * v_cols + x - v_at];
      ASSERT_EQ(grads[r * ld_qkv + x], want) << "grad row " << r << " col " << x;
    }
}

TEST(Attention, NullGradientPointersAreSkipped) {
  const AttnCase c{1, 20, 20, 0, 2, 1, 4, 4, 6, 2};
  const AttnData d(c, 51);
  Rng rng(52);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads initial = random_grads(d, rng);
  const ForwardResult fwd = run_forward(d);
  const Grads all = run_backward(d, fwd, dout, initial);
  const int64_t ld_o = c.Hq * c.Dv;
  Grads only_dk = initial;
  cpu::attention_backward(nullptr, 0, only_dk.dk.data(), c.Hkv * c.Dqk, nullptr, 0, dout.data(), ld_o,
                          fwd.out.data(), ld_o, fwd.lse.data(), d.args());
  expect_bitwise_equal(only_dk.dk, all.dk, "dk alone");
  expect_bitwise_equal(only_dk.dq, initial.dq, "dq untouched");
  expect_bitwise_equal(only_dk.dv, initial.dv, "dv untouched");
  Grads dq_dv = initial;
  cpu::attention_backward(dq_dv.dq.data(), c.Hq * c.Dqk, nullptr, 0, dq_dv.dv.data(), c.Hkv * c.Dv, dout.data(),
                          ld_o, fwd.out.data(), ld_o, fwd.lse.data(), d.args());
  expect_bitwise_equal(dq_dv.dq, all.dq, "dq without dk");
  expect_bitwise_equal(dq_dv.dv, all.dv, "dv without dk");
}

TEST(Attention, QueryWithoutVisibleKeysGetsZeros) {
  // Queries at positions 10, 11 with window 3 over 4 cached keys: nothing visible.
  const AttnCase c{1, 2, 4, 10, 2, 1, 4, 4, 3, 0};
  const AttnData d(c, 61);
  const ForwardResult fwd = run_forward(d);
  for (float x : fwd.out) EXPECT_EQ(x, 0.0f);
  for (float x : fwd.lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  Rng rng(62);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads zero{std::vector<float>(d.q.size()), std::vector<float>(d.k.size()), std::vector<float>(d.v.size())};
  const Grads g = run_backward(d, fwd, dout, zero);
  for (const auto* grad : {&g.dq, &g.dk, &g.dv})
    for (float x : *grad) EXPECT_EQ(x, 0.0f);
}

TEST(Attention, DeterministicAcrossRunsAndThreadCounts) {
  const AttnCase c{2, 150, 150, 0, 4, 2, 16, 24, 40, 6};
  const AttnData d(c, 71);
  Rng rng(72);
  const std::vector<float> dout = random_floats(d.out_size(), rng);
  const Grads initial = random_grads(d, rng);
  const int saved_threads = num_threads();
  auto run = [&](int threads) {
    set_num_threads(threads);
    const ForwardResult fwd = run_forward(d);
    return std::make_pair(fwd, run_backward(d, fwd, dout, initial));
  };
  const auto first = run(2);
  for (int threads : {2, 1, 3}) {
    const auto again = run(threads);
    expect_bitwise_equal(again.first.out, first.first.out, "out");
    expect_bitwise_equal(again.first.lse, first.first.lse, "lse");
    expect_bitwise_equal(again.second.dq, first.second.dq, "dq");
    expect_bitwise_equal(again.second.dk, first.second.dk, "dk");
    expect_bitwise_equal(again.second.dv, first.second.dv, "dv");
  }
  set_num_threads(saved_threads);
}

TEST(Attention, RejectsIndivisibleHeads) {
  const AttnCase c{1, 4, 4, 0, 3, 2, 4, 4, 0, 0};
  const AttnData d(c, 81);
  std::vector<float> out(d.out_size());
  EXPECT_THROW(cpu::attention_forward(out.data(), c.Hq * c.Dv, nullptr, d.args()), Error);
}

}  // namespace
}  // namespace hymba
