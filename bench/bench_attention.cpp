// Masked attention throughput, global causal and sliding-window (+ meta
// tokens), at B = 1, Hq = 8, Hkv = 4, Dqk = Dv = 64.
// FLOPs count only visible (query, key) pairs, per query head:
//   forward  2*Dqk (scores) + 2*Dv (P V)
//   backward 6*Dqk (recomputed scores, dQ, dK) + 4*Dv (dP, dV)
// i.e. the multiply-adds actually needed; exp, masking and the work spent on
// invisible pairs inside partially visible tiles are not counted. Rates use
// wall time (the kernels are OpenMP-parallel; set OMP_NUM_THREADS).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/attention.h"

namespace {

constexpr int64_t kHq = 8, kHkv = 4, kHeadDim = 64;

using hymba::bench::random_vector;

// Visible (query, key) pairs of one head for a T-token sequence.
double visible_pairs(int64_t T, int64_t window, int64_t num_meta) {
  double pairs = 0;
  for (int64_t p = 0; p < T; ++p) {
    const int64_t band_lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    pairs += static_cast<double>(p + 1 - band_lo) + static_cast<double>(std::min(num_meta, band_lo));
  }
  return pairs;
}

struct Problem {
  std::vector<float> q, k, v, out, lse;
  hymba::cpu::AttnArgs args;

  Problem(int64_t T, int64_t window, int64_t num_meta)
      : q(random_vector(T * kHq * kHeadDim, 1)),
        k(random_vector(T * kHkv * kHeadDim, 2)),
        v(random_vector(T * kHkv * kHeadDim, 3)),
        out(T * kHq * kHeadDim),
        lse(kHq * T) {
    args.B = 1, args.Tq = T, args.Tk = T;
    args.Hq = kHq, args.Hkv = kHkv, args.Dqk = kHeadDim, args.Dv = kHeadDim;
    args.q = q.data(), args.ld_q = kHq * kHeadDim;
    args.k = k.data(), args.ld_k = kHkv * kHeadDim;
    args.v = v.data(), args.ld_v = kHkv * kHeadDim;
    args.window = window, args.num_meta = num_meta;
  }
  void forward() { hymba::cpu::attention_forward(out.data(), kHq * kHeadDim, lse.data(), args); }
};

// Args: T, window (0 = global), num_meta.
void BM_AttentionForward(benchmark::State& state) {
  const int64_t T = state.range(0), window = state.range(1), num_meta = state.range(2);
  Problem p(T, window, num_meta);
  for (auto _ : state) {
    p.forward();
    benchmark::DoNotOptimize(p.out.data());
  }
  const double flops = visible_pairs(T, window, num_meta) * kHq * (2 * kHeadDim + 2 * kHeadDim);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t T = state.range(0), window = state.range(1), num_meta = state.range(2);
  Problem p(T, window, num_meta);
  p.forward();
  const std::vector<float> dout = random_vector(p.out.size(), 4);
  std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  for (auto _ : state) {
    hymba::cpu::attention_backward(dq.data(), p.args.ld_q, dk.data(), p.args.ld_k, dv.data(), p.args.ld_v,
                                   dout.data(), kHq * kHeadDim, p.out.data(), kHq * kHeadDim, p.lse.data(), p.args);
    benchmark::DoNotOptimize(dq.data());
  }
  const double flops = visible_pairs(T, window, num_meta) * kHq * (6 * kHeadDim + 4 * kHeadDim);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

#define ATTENTION_SHAPES                                                                                   \
  ArgNames({"T", "window", "meta"})                                                                        \
      ->Args({256, 0, 0})->Args({1024, 0, 0})->Args({4096, 0, 0})                                          \
      ->Args({256, 128, 64})->Args({1024, 128, 64})->Args({4096, 128, 64})->Args({4096, 1024, 64})         \
      ->Unit(benchmark::kMillisecond)->UseRealTime()

BENCHMARK(BM_AttentionForward)->ATTENTION_SHAPES;
BENCHMARK(BM_AttentionBackward)->ATTENTION_SHAPES;

}  // namespace
