// The spinning team of core/parallel.h: parallel_for's parts on the team
// cover every index once, split as OpenMP's static schedule does; nested
// loops and OpenMP inside a part stay on its thread; one scope at a time; and
// every kernel a decode step runs on the team gives the bits it gives alone.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/attention_step.h"
#include "kernels/cpu/conv_step.h"
#include "kernels/cpu/decode_linear.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/ssm_step.h"

namespace hymba {
namespace {

std::vector<float> random_vec(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SpinTeam, PartsCoverEveryIndexOnceSplitAsOpenMpDoes) {
  for (const int threads : {2, 3}) {
    const SpinTeamScope scope(threads);
    ASSERT_TRUE(scope.active());
    EXPECT_TRUE(on_spin_team());
    for (const int64_t n : {2, 3, 7, 64, 1001}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " n " + std::to_string(n));
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::mutex lock;
      std::set<std::pair<int64_t, int64_t>> parts;
      std::set<std::thread::id> ids;
      const int64_t jobs = spin_team_jobs();
      parallel_for(n, true, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
        const std::lock_guard<std::mutex> hold(lock);
        parts.emplace(begin, end);
        ids.insert(std::this_thread::get_id());
      });
      EXPECT_EQ(spin_team_jobs(), jobs + 1);
      for (const auto& s : seen) ASSERT_EQ(s.load(), 1);
      std::set<std::pair<int64_t, int64_t>> expected;
      for (int part = 0; part < threads; ++part) {
        const auto p = static_part(n, threads, part);
        if (p.first < p.second) expected.insert(p);
      }
      EXPECT_EQ(parts, expected);
      EXPECT_EQ(ids.size(), expected.size());
    }
  }
  EXPECT_FALSE(on_spin_team());
}

TEST(SpinTeam, NestedLoopsAndOpenMpInsideAPartRunOnItsThread) {
  const int outside = omp_get_max_threads();
  ASSERT_GE(outside, 2) << "CTest runs these tests with OMP_NUM_THREADS=2";
  const SpinTeamScope scope(2);
  ASSERT_TRUE(scope.active());
  std::atomic<int> nested_calls{0}, wrong{0};
  parallel_for(8, true, [&](int64_t, int64_t) {
    if (omp_get_max_threads() != 1) wrong.fetch_add(1);
    if (on_spin_team()) wrong.fetch_add(1);
    parallel_for(100, true, [&](int64_t b, int64_t e) {
      nested_calls.fetch_add(1);
      if (b != 0 || e != 100) wrong.fetch_add(1);
    });
  });
  EXPECT_EQ(nested_calls.load(), 2);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(omp_get_max_threads(), outside);
}

TEST(SpinTeam, OneScopeAtATime) {
  EXPECT_FALSE(SpinTeamScope(1).active());
  {
    const SpinTeamScope first(2);
    ASSERT_TRUE(first.active());
    EXPECT_FALSE(SpinTeamScope(2).active()) << "a second scope on the same thread";
    bool other_active = true;
    std::atomic<int64_t> covered{0};
    std::thread other([&] {
      const SpinTeamScope second(2);
      other_active = second.active();
      // Without the team the loop runs in an OpenMP region, all indices still covered.
      parallel_for(50, true, [&](int64_t b, int64_t e) { covered.fetch_add(e - b); });
    });
    other.join();
    EXPECT_FALSE(other_active);
    EXPECT_EQ(covered.load(), 50);
  }
  bool active_later = false;
  std::thread later([&] { active_later = SpinTeamScope(2).active(); });
  later.join();
  EXPECT_TRUE(active_later);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Workers spin for kSpinMicros after a job, then sleep: an idle team costs
// no CPU time (a worker that never slept would take a core from everything
// else the process or the machine runs).
TEST(SpinTeam, WorkersSleepWhenIdle) {
  {
    const SpinTeamScope scope(2);
    ASSERT_TRUE(scope.active());
    std::atomic<int64_t> sum{0};
    parallel_for(1000, true, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    EXPECT_EQ(sum.load(), 1000);
  }
  // Long enough for OpenMP threads of earlier tests to stop spinning too
  // (LLVM's OpenMP spins for 200 ms after a region by default).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(process_cpu_seconds() - before, 0.03) << "CPU time while the team had nothing to do";
}

// Runs `kernel` alone and on a team of two; the results must be bit-equal,
// and the team must have run it. Sizes are above each kernel's threshold.
template <typename Kernel>
void expect_same_on_team(const char* name, Kernel kernel) {
  SCOPED_TRACE(name);
  const std::vector<float> alone = kernel();
  const int64_t jobs = spin_team_jobs();
  std::vector<float> teamed;
  {
    const SpinTeamScope scope(2);
    ASSERT_TRUE(scope.active());
    teamed = kernel();
  }
  EXPECT_GT(spin_team_jobs(), jobs);
  EXPECT_TRUE(same_bits(alone, teamed));
}

TEST(SpinTeam, StepKernelsGiveTheSameBitsOnTheTeam) {
  Rng rng(17);
  {  // The f32 product of one row: sgemv over bands of rows; 300 rows leave a ragged band.
    const int64_t C = 136, OC = 300;
    const auto w = random_vec(OC * C, rng), x = random_vec(C, rng);
    expect_same_on_team("linear", [&] {
      std::vector<float> out(OC);
      cpu::decode_linear(out.data(), OC, x.data(), C, w.data(), 1, C, OC);
      return out;
    });
  }
  {  // Block products (q8, q4, bf16): 3 rows, ragged groups of 8 and blocks of 32.
    const int64_t R = 3, C = 200, OC = 77;
    const auto w = random_vec(OC * C, rng), x = random_vec(R * C, rng);
    std::vector<cpu::BlockQ8> q8(static_cast<size_t>(OC * cpu::q8_blocks_per_row(C)));
    std::vector<cpu::BlockQ4> q4(static_cast<size_t>(OC * cpu::q4_blocks_per_row(C)));
    cpu::quantize_q8(q8.data(), w.data(), OC, C);
    cpu::quantize_q4(q4.data(), w.data(), OC, C);
    std::vector<cpu::PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(OC) * cpu::q8_blocks_per_row(C)));
    std::vector<cpu::PackedQ4> p4(static_cast<size_t>(cpu::packed_groups(OC) * cpu::q4_blocks_per_row(C)));
    cpu::pack_q8(p8.data(), q8.data(), OC, C);
    cpu::pack_q4(p4.data(), q4.data(), OC, C);
    std::vector<uint16_t> b16(static_cast<size_t>(OC * C));
    cpu::quantize_bf16(b16.data(), w.data(), OC, C);
    expect_same_on_team("q8", [&] {
      std::vector<float> out(R * OC);
      cpu::matmul_packed_q8(out.data(), OC, x.data(), C, p8.data(), nullptr, R, C, OC);
      return out;
    });
    expect_same_on_team("q4", [&] {
      std::vector<float> out(R * OC);
      cpu::matmul_packed_q4(out.data(), OC, x.data(), C, p4.data(), nullptr, R, C, OC);
      return out;
    });
    expect_same_on_team("bf16", [&] {
      std::vector<float> out(R * OC);
      cpu::matmul_bf16(out.data(), OC, x.data(), C, b16.data(), nullptr, R, C, OC, cpu::best_q8_isa());
      return out;
    });
  }
  {  // Convolution and scan steps of two sequences; their states are updated in place.
    const int64_t B = 2, D = 4200, N = 16, K = 4;
    const auto x = random_vec(B * D, rng), w = random_vec(D * K, rng), bias = random_vec(D, rng);
    const auto conv0 = random_vec(B * D * (K - 1), rng), ssm0 = random_vec(B * D * N, rng);
    const auto delta = random_vec(B * D, rng, -3.0f, 1.0f), delta_bias = random_vec(D, rng, -1.0f, 0.5f);
    const auto A = random_vec(D * N, rng, -2.0f, -0.1f), Bm = random_vec(B * N, rng), Cm = random_vec(B * N, rng),
               Dskip = random_vec(D, rng), z = random_vec(B * D, rng);
    expect_same_on_team("conv_step", [&] {
      std::vector<float> state = conv0, out(B * D);
      float* states[] = {state.data(), state.data() + D * (K - 1)};
      cpu::conv_step(out.data(), x.data(), D, states, w.data(), bias.data(), B, D, K);
      out.insert(out.end(), state.begin(), state.end());
      return out;
    });
    expect_same_on_team("ssm_step", [&] {
      std::vector<float> state = ssm0, y(B * D);
      float* states[] = {state.data(), state.data() + D * N};
      cpu::SsmStepArgs a;
      a.B = B;
      a.D = D;
      a.N = N;
      a.u = x.data();
      a.delta = delta.data();
      a.delta_bias = delta_bias.data();
      a.A = A.data();
      a.Bm = Bm.data();
      a.ld_B = N;
      a.Cm = Cm.data();
      a.ld_C = N;
      a.Dskip = Dskip.data();
      a.z = z.data();
      a.ld_z = D;
      cpu::ssm_step(y.data(), states, a);
      y.insert(y.end(), state.begin(), state.end());
      return y;
    });
  }
  {  // Attention of one query per sequence against 100 and 41 cached keys.
    const int64_t B = 2, Hq = 5, Hkv = 1, Dqk = 48, Dv = 40, S = 100;
    const auto q = random_vec(B * Hq * Dqk, rng), k_new = random_vec(B * Hkv * Dqk, rng),
               v_new = random_vec(B * Hkv * Dv, rng), kc = random_vec(S * Hkv * Dqk, rng),
               vc = random_vec(S * Hkv * Dv, rng);
    const float* k_cache[] = {kc.data(), kc.data()};
    const float* v_cache[] = {vc.data(), vc.data()};
    const int64_t n_cached[] = {S, 41};
    expect_same_on_team("attention_step", [&] {
      cpu::AttnStepArgs a;
      a.B = B;
      a.Hq = Hq;
      a.Hkv = Hkv;
      a.Dqk = Dqk;
      a.Dv = Dv;
      a.q = q.data();
      a.ld_q = Hq * Dqk;
      a.k_new = k_new.data();
      a.ld_k_new = Hkv * Dqk;
      a.v_new = v_new.data();
      a.ld_v_new = Hkv * Dv;
      a.k_cache = k_cache;
      a.v_cache = v_cache;
      a.n_cached = n_cached;
      std::vector<float> out(B * Hq * Dv);
      cpu::attention_step(out.data(), Hq * Dv, a);
      return out;
    });
  }
}

}  // namespace
}  // namespace hymba
