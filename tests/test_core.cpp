#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/arena.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/sizing_arena.h"
#include "core/threading.h"

namespace hymba {
namespace {

TEST(Threading, ThreadLimitLowersTheCountForItsScopeOnly) {
  set_num_threads(2);
  {
    const ThreadLimit one(1);
    EXPECT_EQ(num_threads(), 1);
    const ThreadLimit more(8);  // a limit never raises the count
    EXPECT_EQ(num_threads(), 1);
  }
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(0);
}

TEST(Rng, SameSeedSameStream) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
}

TEST(Rng, SplitIsIndependentOfDrawsAndDistinctPerKey) {
  Rng a(7), b(7);
  for (int i = 0; i < 10; ++i) b.next_u64();  // drawing must not change children
  EXPECT_EQ(a.split(3).next_u64(), Rng(7).split(3).next_u64());
  std::set<uint64_t> firsts;
  for (uint64_t k = 0; k < 64; ++k) firsts.insert(a.split(k).next_u64());
  EXPECT_EQ(firsts.size(), 64u);
  EXPECT_NE(a.split(1).split(2).next_u64(), a.split(2).split(1).next_u64());
}

TEST(Rng, SplitDependsOnTheSeed) {
  for (uint64_t k = 0; k < 8; ++k) {
    EXPECT_NE(Rng(2).split(k).next_u64(), Rng(3).split(k).next_u64());
    EXPECT_NE(Rng(2).split(k).split(1).next_u64(), Rng(3).split(k).split(1).next_u64());
  }
  ParamTable a, b;
  a.add("w", {16}, InitRule::normal(1.0f));
  b.add("w", {16}, InitRule::normal(1.0f));
  a.allocate(false, false);
  b.allocate(false, false);
  a.init(Rng(1));
  b.init(Rng(2));
  EXPECT_NE(a.value("w").data[0], b.value("w").data[0]) << "different seeds must give different weights";
}

TEST(Rng, StateRoundTrips) {
  Rng a(11);
  a.next_u64();
  Rng b = Rng::from_state(a.state());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_EQ(a.split(5).next_u64(), b.split(5).next_u64());
}

TEST(Rng, DistributionsHaveTheRightMoments) {
  Rng r(3);
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    su += u;
    double z = r.normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(7), 7u);
}

TEST(Arena, AllocatesAlignedZeroedAndReusesAfterReset) {
  Arena arena(100);
  Tensor a = arena.alloc_tensor({3, 5});
  Tensor b = arena.alloc_tensor({1000});  // overflows the first block
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % kAlignment, 0u);
  for (float x : std::vector<float>(b.begin(), b.end())) EXPECT_EQ(x, 0.0f);
  a.data[0] = 5.0f;
  arena.reset();
  const size_t cap = arena.capacity_floats();
  EXPECT_GE(cap, 1016u);
  Tensor a2 = arena.alloc_tensor({3, 5});
  Tensor b2 = arena.alloc_tensor({1000});
  EXPECT_EQ(a2.data[0], 0.0f);  // re-zeroed
  EXPECT_EQ(arena.capacity_floats(), cap) << "steady state must not grow";
  EXPECT_NE(a2.data, b2.data);
}

TEST(Arena, UninitSkipsZeroingAndPoisonsWhenAsked) {
  Arena arena(64);
  float* a = arena.alloc_uninit(40);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kAlignment, 0u);
  for (int i = 0; i < 40; ++i) a[i] = 7.0f;
  arena.reset();
  arena.set_poison(false);
  float* b = arena.alloc_uninit(40);
  ASSERT_EQ(b, a);
  EXPECT_EQ(b[0], 7.0f) << "alloc_uninit must not clear";
  arena.reset();
  arena.set_poison(true);
  float* c = arena.alloc_uninit(40);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(std::isnan(c[i]));
  arena.reset();
  float* z = arena.alloc(40);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(z[i], 0.0f) << "alloc still zero-fills";
  BasicArena<double> ref;
  EXPECT_TRUE(ref.poison()) << "the float64 reference arena always poisons";
}

// The sizing arena counts what the arena takes, rounding and resets included
// (the memory estimate's exactness rests on it).
TEST(Arena, SizingArenaCountsWhatTheArenaTakes) {
  Arena arena(8);
  SizingArena<float> sizing;
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1000}, size_t{33}}) {
      arena.alloc(n);
      EXPECT_EQ(sizing.alloc(n), nullptr);
      arena.alloc_uninit(n + 3);
      sizing.alloc_uninit(n + 3);
      EXPECT_EQ(static_cast<double>(arena.used()), sizing.used());
    }
    EXPECT_EQ(static_cast<double>(arena.peak()), sizing.peak());
    arena.reset();
    sizing.reset();
    EXPECT_EQ(sizing.used(), 0.0);
  }
  BasicArena<double> ref;
  SizingArena<double> ref_sizing;
  ref.alloc(9);
  ref_sizing.alloc(9);
  EXPECT_EQ(static_cast<double>(ref.peak()), ref_sizing.peak()) << "rounded to a line of doubles";
}

TEST(ParamTable, OneBlockPerKindWithAlignedRows) {
  ParamTable t;
  t.add("embed", {10, 4}, InitRule::normal(0.02f));
  t.add("norm", {4}, InitRule::ones(), false);
  t.add("a_log", {3, 5}, InitRule::mamba_a_log(), false);
  t.allocate(true, true);
  EXPECT_EQ(t.num_params(), 40 + 4 + 15);
  EXPECT_EQ(t.info("norm").offset % 16, 0);
  EXPECT_TRUE(t.has_grads());
  EXPECT_TRUE(t.has_optimizer());
  t.init(Rng(1));
  Tensor a = t.value("a_log");
  EXPECT_FLOAT_EQ(a.data[0], 0.0f);
  EXPECT_FLOAT_EQ(a.data[4], std::log(5.0f));
  EXPECT_FLOAT_EQ(a.data[5], 0.0f);
  EXPECT_FLOAT_EQ(t.value("norm").data[3], 1.0f);
  int visited = 0;
  t.for_each([&](ParamSlot& s) {
    ++visited;
    ASSERT_NE(s.grad, nullptr);
    ASSERT_NE(s.m, nullptr);
    s.grad[0] = 1.0f;
  });
  EXPECT_EQ(visited, 3);
  t.zero_grad();
  EXPECT_EQ(t.grad("embed").data[0], 0.0f);
}

TEST(ParamTable, InitIsPerNameAndDeterministic) {
  auto build = [](bool extra_first) {
    ParamTable t;
    if (extra_first) t.add("extra", {7}, InitRule::normal(1.0f));
    t.add("w", {8, 8}, InitRule::normal(1.0f));
    t.allocate(false, false);
    t.init(Rng(42));
    Tensor w = t.value("w");
    return std::vector<float>(w.begin(), w.end());
  };
  // Adding another row does not change how "w" is initialised.
  EXPECT_EQ(build(false), build(true));
}

TEST(ParamTable, DtBiasIsInverseSoftplusOfRange) {
  ParamTable t;
  t.add("dt_bias", {256}, InitRule::mamba_dt_bias(0.001f, 0.1f), false);
  t.allocate(false, false);
  t.init(Rng(0));
  for (float b : std::vector<float>(t.value("dt_bias").begin(), t.value("dt_bias").end())) {
    double dt = std::log1p(std::exp(static_cast<double>(b)));
    EXPECT_GE(dt, 0.001 * 0.999);
    EXPECT_LE(dt, 0.1 * 1.001);
  }
}

TEST(ParamTable, RejectsBadRows) {
  ParamTable t;
  t.add("w", {2, 2}, InitRule::zeros());
  EXPECT_THROW(t.add("w", {3}, InitRule::zeros()), Error);
  EXPECT_THROW(t.add("neg", {2, 0}, InitRule::zeros()), Error);
  try {
    t.value("missing");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

// The core hymba asks OpenBLAS for (core/build_info.h), on the flag sets of
// each kind of CPU seen: only in place of one below what the CPU can run,
// and only what the CPU can run.
TEST(BuildInfo, BetterOpenBlasCoreReplacesOnlyKernelsBelowTheCpu) {
  const CpuVectorFeatures zen3{false, true, false};            // AVX2 only
  const CpuVectorFeatures skylake{true, true, false};          // AVX-512 without BF16
  const CpuVectorFeatures xeon_bf16{true, true, true};         // Intel Xeon model 207: AVX-512 VNNI / BF16
  const CpuVectorFeatures zen5{true, true, true};              // AMD EPYC Zen 5: AVX-512 F/BW/VL/VNNI/BF16
  const CpuVectorFeatures old{false, false, false};
  // Generic SSE kernels (an unknown CPU).
  EXPECT_EQ(better_openblas_core("Prescott", xeon_bf16), "Cooperlake");
  EXPECT_EQ(better_openblas_core("Prescott", skylake), "SkylakeX");
  EXPECT_EQ(better_openblas_core("Prescott", zen3), "Haswell");
  EXPECT_EQ(better_openblas_core("Sandybridge", zen3), "Haswell");
  EXPECT_EQ(better_openblas_core("Prescott", old), "");
  // AVX2 kernels on AVX-512 CPUs OpenBLAS 0.3.21 does not know (Zen 4 / 5).
  EXPECT_EQ(better_openblas_core("Zen", zen5), "Cooperlake");
  EXPECT_EQ(better_openblas_core("Haswell", zen5), "Cooperlake");
  EXPECT_EQ(better_openblas_core("Haswell", skylake), "SkylakeX");
  EXPECT_EQ(better_openblas_core("SkylakeX", xeon_bf16), "Cooperlake");
  // Choices that already use what the CPU has stand.
  EXPECT_EQ(better_openblas_core("Zen", zen3), "");
  EXPECT_EQ(better_openblas_core("Haswell", zen3), "");
  EXPECT_EQ(better_openblas_core("SkylakeX", skylake), "");
  EXPECT_EQ(better_openblas_core("Cooperlake", zen5), "");
  EXPECT_EQ(better_openblas_core("", zen5), "");
  EXPECT_EQ(better_openblas_core("SomeFutureCore", zen5), "");
}

}  // namespace
}  // namespace hymba
