// The attention kernel's mask variants (the two leaks: a symmetric window and
// meta tokens that see every key) and its dropout on the probabilities:
// reach against a brute-force mask, forward against the reference, backward
// against float64 finite differences with the same (fixed) dropout mask.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/reference/attention.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

constexpr double kForwardTol = 1e-5;
constexpr double kGradTol = 3e-5;

struct Variant {
  int64_t B, T, Hq, Hkv, D, window, num_meta;
  bool symmetric, meta_all;
  float dropout;
};

std::ostream& operator<<(std::ostream& os, const Variant& v) {
  return os << "B" << v.B << " T" << v.T << " Hq" << v.Hq << " Hkv" << v.Hkv << " D" << v.D << " window" << v.window
            << " meta" << v.num_meta << (v.symmetric ? " symmetric" : "") << (v.meta_all ? " meta-sees-all" : "")
            << " dropout" << v.dropout;
}

constexpr uint64_t kDropSeed = 0x5eed;

cpu::AttnArgs args_of(const Variant& v, const float* q, const float* k, const float* val, int64_t Dv) {
  cpu::AttnArgs a;
  a.B = v.B, a.Tq = a.Tk = v.T, a.Hq = v.Hq, a.Hkv = v.Hkv, a.Dqk = v.D, a.Dv = Dv;
  a.q = q, a.ld_q = v.Hq * v.D, a.k = k, a.ld_k = v.Hkv * v.D, a.v = val, a.ld_v = v.Hkv * Dv;
  a.window = v.window, a.num_meta = v.num_meta;
  a.window_symmetric = v.symmetric, a.meta_sees_all = v.meta_all;
  a.dropout = v.dropout, a.dropout_seed = kDropSeed;
  return a;
}

ref::AttnShape shape_of(const Variant& v, int64_t Dv) {
  ref::AttnShape s;
  s.B = v.B, s.Tq = s.Tk = v.T, s.Hq = v.Hq, s.Hkv = v.Hkv, s.Dqk = v.D, s.Dv = Dv;
  s.window = v.window, s.num_meta = v.num_meta;
  s.window_symmetric = v.symmetric, s.meta_sees_all = v.meta_all;
  s.dropout = v.dropout, s.dropout_seed = kDropSeed;
  return s;
}

// The brute-force rule, written out from the configs' definitions.
bool brute_visible(const Variant& v, int64_t i, int64_t j) {
  if (v.meta_all && i < v.num_meta) return true;
  if (j < v.num_meta && j <= i) return true;
  if (v.window <= 0) return j <= i;
  const int64_t d = i - j;
  return v.symmetric ? (d < v.window && -d < v.window) : (d >= 0 && d < v.window);
}

// The kernel's reach, read off its output: with q = 0 every visible key gets
// the same weight, and with v_j the one-hot e_j, out_i[j] = 1 / |visible(i)|
// where key j is visible to query i and 0 elsewhere.
TEST(AttentionVariants, ReachMatchesABruteForceMask) {
  for (const Variant v :
       {Variant{1, 70, 1, 1, 4, 5, 0, true, false, 0}, Variant{1, 70, 1, 1, 4, 9, 3, true, false, 0},
        Variant{1, 70, 1, 1, 4, 30, 40, true, false, 0}, Variant{1, 60, 1, 1, 4, 0, 4, false, true, 0},
        Variant{1, 60, 1, 1, 4, 6, 30, false, true, 0}, Variant{1, 60, 1, 1, 4, 7, 3, true, true, 0},
        Variant{1, 50, 1, 1, 4, 100, 0, true, false, 0}, Variant{1, 50, 1, 1, 4, 1, 2, true, true, 0}}) {
    const int64_t T = v.T;
    std::vector<float> q(T * v.D, 0.0f), k(T * v.D, 0.5f), onehot(T * T, 0.0f), out(T * T);
    for (int64_t j = 0; j < T; ++j) onehot[j * T + j] = 1.0f;
    cpu::attention_forward(out.data(), T, nullptr, args_of(v, q.data(), k.data(), onehot.data(), T));
    for (int64_t i = 0; i < T; ++i) {
      int64_t count = 0;
      for (int64_t j = 0; j < T; ++j) count += brute_visible(v, i, j);
      for (int64_t j = 0; j < T; ++j) {
        const float want = brute_visible(v, i, j) ? 1.0f / static_cast<float>(count) : 0.0f;
        ASSERT_NEAR(out[i * T + j], want, 1e-6) << v << ": query " << i << " key " << j;
      }
    }
  }
}

// The leaks really reach the future: a symmetric window sees window - 1
// later keys, a meta query every later key; the causal default none.
TEST(AttentionVariants, BruteForceRuleAgreesWithTheReferenceRule) {
  for (const Variant v : {Variant{1, 20, 1, 1, 4, 4, 2, true, false, 0}, Variant{1, 20, 1, 1, 4, 4, 3, false, true, 0},
                          Variant{1, 20, 1, 1, 4, 0, 3, true, true, 0}, Variant{1, 20, 1, 1, 4, 4, 2, false, false, 0}})
    for (int64_t i = 0; i < v.T; ++i)
      for (int64_t j = 0; j < v.T; ++j)
        ASSERT_EQ(ref::attention_visible(i, j, shape_of(v, 1).mask()), brute_visible(v, i, j))
            << v << " " << i << "," << j;
  EXPECT_TRUE(ref::attention_visible(5, 8, {4, 0, true, false}));   // 8 - 5 < 4: a later key
  EXPECT_FALSE(ref::attention_visible(5, 9, {4, 0, true, false}));  // 9 - 5 = 4: outside
  EXPECT_FALSE(ref::attention_visible(5, 6, {4, 0, false, false}));
  EXPECT_TRUE(ref::attention_visible(1, 19, {4, 2, false, true}));  // meta query 1 sees key 19
  EXPECT_FALSE(ref::attention_visible(2, 3, {4, 2, false, true}));  // token query 2 does not
}

class AttentionVariantTest : public ::testing::TestWithParam<Variant> {};

TEST_P(AttentionVariantTest, ForwardMatchesReferenceAndBackwardMatchesFiniteDifferences) {
  const Variant v = GetParam();
  const int64_t Dv = v.D + 1;
  Rng rng(101);
  const std::vector<float> q = random_floats(v.B * v.T * v.Hq * v.D, rng),
                           k = random_floats(v.B * v.T * v.Hkv * v.D, rng),
                           val = random_floats(v.B * v.T * v.Hkv * Dv, rng);
  const cpu::AttnArgs a = args_of(v, q.data(), k.data(), val.data(), Dv);
  std::vector<float> out(v.B * v.T * v.Hq * Dv), lse(v.B * v.Hq * v.T);
  cpu::attention_forward(out.data(), v.Hq * Dv, lse.data(), a);
  std::vector<float> ref_out(out.size());
  ref::attention_forward(ref_out.data(), static_cast<float*>(nullptr), q.data(), k.data(), val.data(), shape_of(v, Dv));
  test::expect_close(out, ref_out, kForwardTol, "out");

  const std::vector<float> dout = random_floats(out.size(), rng);
  std::vector<float> dq(q.size()), dk(k.size()), dv(val.size());
  cpu::attention_backward(dq.data(), v.Hq * v.D, dk.data(), v.Hkv * v.D, dv.data(), v.Hkv * Dv, dout.data(), v.Hq * Dv,
                          out.data(), v.Hq * Dv, lse.data(), a);
  auto qd = to_double(q), kd = to_double(k), vd = to_double(val), w = to_double(dout);
  std::vector<double> o(out.size());
  auto loss = [&] {
    ref::attention_forward<double>(o.data(), nullptr, qd.data(), kd.data(), vd.data(), shape_of(v, Dv));
    return test::weighted_sum(o, w);
  };
  test::expect_grad_matches(loss, qd, dq, kGradTol, "dq");
  test::expect_grad_matches(loss, kd, dk, kGradTol, "dk");
  test::expect_grad_matches(loss, vd, dv, kGradTol, "dv");
}

// T 70 crosses query blocks (24) and key tiles (64); windows and meta counts
// put the band apart from or merged with the prefix.
INSTANTIATE_TEST_SUITE_P(
    Masks, AttentionVariantTest,
    ::testing::Values(Variant{1, 13, 2, 1, 4, 4, 0, true, false, 0},      // symmetric window
                      Variant{2, 70, 2, 1, 3, 9, 3, true, false, 0},      // symmetric, meta, several tiles
                      Variant{1, 70, 1, 1, 3, 30, 5, true, false, 0},     // symmetric band across blocks
                      Variant{1, 37, 2, 2, 4, 0, 5, false, true, 0},      // meta sees all, global
                      Variant{1, 70, 2, 1, 3, 8, 30, false, true, 0},     // meta sees all, meta > window
                      Variant{1, 30, 2, 1, 4, 5, 3, true, true, 0},       // both leaks
                      Variant{2, 13, 2, 1, 4, 0, 0, false, false, 0.3f},  // dropout, global
                      Variant{1, 70, 2, 1, 3, 9, 3, false, false, 0.2f},  // dropout, window + meta, tiles
                      Variant{1, 30, 2, 1, 4, 5, 3, true, true, 0.5f}));  // dropout with both leaks

// Dropout: a fixed mask per seed (forward twice is bit-identical, another
// seed another output), about the given rate of probabilities dropped, and
// rate 0 is the plain kernel.
TEST(AttentionVariants, DropoutMaskIsFixedBySeedAndDropsAboutTheRate) {
  const Variant v{1, 60, 2, 1, 8, 0, 0, false, false, 0.25f};
  Rng rng(7);
  const std::vector<float> q = random_floats(v.T * v.Hq * v.D, rng), k = random_floats(v.T * v.Hkv * v.D, rng),
                           val = random_floats(v.T * v.Hkv * v.D, rng);
  auto run = [&](float rate, uint64_t seed) {
    cpu::AttnArgs a = args_of(v, q.data(), k.data(), val.data(), v.D);
    a.dropout = rate, a.dropout_seed = seed;
    std::vector<float> out(v.T * v.Hq * v.D);
    cpu::attention_forward(out.data(), v.Hq * v.D, nullptr, a);
    return out;
  };
  EXPECT_EQ(run(0.25f, 1), run(0.25f, 1));
  EXPECT_NE(run(0.25f, 1), run(0.25f, 2));
  EXPECT_EQ(run(0.0f, 1), run(0.0f, 2));
  int64_t dropped = 0, total = 0;
  for (int64_t i = 0; i < 400; ++i)
    for (int64_t j = 0; j < 100; ++j, ++total)
      dropped += !ref::dropout_keeps(ref::dropout_row_key(9, 0, 1, i), j, 0.25f);
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(total), 0.25, 0.01);
}

TEST(AttentionVariants, RefusesADropoutRateOutsideZeroToOne) {
  const Variant v{1, 4, 1, 1, 4, 0, 0, false, false, 1.0f};
  std::vector<float> q(16), k(16), val(16), out(16);
  EXPECT_THROW(cpu::attention_forward(out.data(), 4, nullptr, args_of(v, q.data(), k.data(), val.data(), 4)), Error);
}

}  // namespace
}  // namespace hymba
