// Decode-step kernels at hymba-1.5b's shapes: the attention of one new token
// against its cached keys and values (Hq = 25, Hkv = 5, Dqk = Dv = 64) and
// the Mamba recurrence step (D = 3200, N = 16). A decode step runs 32 layers,
// each over its own cache, so the benchmark cycles through 32 caches: like a
// step, it reads them from memory rather than from the core's caches.
// bytes_per_second counts the cache (or state) bytes each call must read.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "bench_util.h"
#include "core/parallel.h"
#include "core/threading.h"
#include "kernels/cpu/attention_step.h"
#include "kernels/cpu/ssm_step.h"

namespace {

using hymba::bench::random_vector;

constexpr int64_t kLayers = 32, kHq = 25, kHkv = 5, kHeadDim = 64;

// Args: cached rows per sequence, sequences, threads (on a spinning team).
void BM_AttentionStep(benchmark::State& state) {
  const int64_t n = state.range(0), B = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int64_t width = kHkv * kHeadDim;
  std::vector<std::vector<float>> k, v;
  for (int64_t l = 0; l < kLayers; ++l) {
    k.push_back(random_vector(static_cast<size_t>(B * n * width), 10 + l));
    v.push_back(random_vector(static_cast<size_t>(B * n * width), 100 + l));
  }
  const std::vector<float> q = random_vector(static_cast<size_t>(B * kHq * kHeadDim), 1);
  const std::vector<float> k_new = random_vector(static_cast<size_t>(B * width), 2);
  const std::vector<float> v_new = random_vector(static_cast<size_t>(B * width), 3);
  std::vector<float> out(static_cast<size_t>(B * kHq * kHeadDim));
  std::vector<int64_t> n_cached(static_cast<size_t>(B), n);
  std::vector<const float*> k_rows(static_cast<size_t>(B)), v_rows(static_cast<size_t>(B));
  hymba::cpu::AttnStepArgs a;
  a.B = B, a.Hq = kHq, a.Hkv = kHkv, a.Dqk = kHeadDim, a.Dv = kHeadDim;
  a.q = q.data(), a.ld_q = kHq * kHeadDim;
  a.k_new = k_new.data(), a.ld_k_new = width;
  a.v_new = v_new.data(), a.ld_v_new = width;
  a.k_cache = k_rows.data(), a.v_cache = v_rows.data(), a.n_cached = n_cached.data();
  const hymba::ThreadLimit limit(threads);
  const hymba::SpinTeamScope team(threads);
  int64_t layer = 0;
  for (auto _ : state) {
    for (int64_t b = 0; b < B; ++b) {
      k_rows[static_cast<size_t>(b)] = k[static_cast<size_t>(layer)].data() + b * n * width;
      v_rows[static_cast<size_t>(b)] = v[static_cast<size_t>(layer)].data() + b * n * width;
    }
    hymba::cpu::attention_step(out.data(), kHq * kHeadDim, a);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % kLayers;
  }
  state.SetBytesProcessed(state.iterations() * B * n * width * 2 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_AttentionStep)
    ->ArgNames({"cached", "B", "threads"})
    ->Args({256, 1, 1})
    ->Args({256, 1, 2})
    ->Args({1024, 1, 2})
    ->Args({256, 16, 2})
    ->UseRealTime();

// Args: sequences, threads.
void BM_SsmStep(benchmark::State& state) {
  const int64_t B = state.range(0), D = 3200, N = 16;
  const int threads = static_cast<int>(state.range(1));
  std::vector<std::vector<float>> h;
  for (int64_t l = 0; l < kLayers; ++l) h.push_back(random_vector(static_cast<size_t>(B * D * N), 10 + l));
  std::vector<float> A = random_vector(static_cast<size_t>(D * N), 1, -2.0f, -0.1f);
  const std::vector<float> u = random_vector(static_cast<size_t>(B * D), 2);
  const std::vector<float> delta = random_vector(static_cast<size_t>(B * D), 3);
  const std::vector<float> bias = random_vector(static_cast<size_t>(D), 4);
  const std::vector<float> bc = random_vector(static_cast<size_t>(B * 2 * N), 5);
  const std::vector<float> skip = random_vector(static_cast<size_t>(D), 6);
  const std::vector<float> z = random_vector(static_cast<size_t>(B * D), 7);
  std::vector<float> y(static_cast<size_t>(B * D));
  std::vector<float*> rows(static_cast<size_t>(B));
  hymba::cpu::SsmStepArgs a;
  a.B = B, a.D = D, a.N = N;
  a.u = u.data(), a.delta = delta.data(), a.delta_bias = bias.data(), a.A = A.data();
  a.Bm = bc.data(), a.ld_B = 2 * N, a.Cm = bc.data() + N, a.ld_C = 2 * N;
  a.Dskip = skip.data(), a.z = z.data(), a.ld_z = D;
  const hymba::ThreadLimit limit(threads);
  const hymba::SpinTeamScope team(threads);
  int64_t layer = 0;
  for (auto _ : state) {
    for (int64_t b = 0; b < B; ++b) rows[static_cast<size_t>(b)] = h[static_cast<size_t>(layer)].data() + b * D * N;
    hymba::cpu::ssm_step(y.data(), rows.data(), a);
    benchmark::DoNotOptimize(y.data());
    layer = (layer + 1) % kLayers;
  }
  // The state is read and written back.
  state.SetBytesProcessed(state.iterations() * B * D * N * 2 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_SsmStep)->ArgNames({"B", "threads"})->Args({1, 1})->Args({1, 2})->Args({16, 2})->UseRealTime();

}  // namespace
