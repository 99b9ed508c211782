// Memory-bound kernels: RMSNorm, cross-entropy and SwiGLU. GB/s counts the
// compulsory traffic of one call (each array read or written once), so the
// figure compares directly with the machine's memory bandwidth.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/rmsnorm.h"

namespace {

using hymba::Rng;

// Inputs in [-1, 1) unless a range is given.
std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return hymba::bench::random_vector(n, seed, lo, hi);
}

void set_bandwidth(benchmark::State& state, double bytes_per_call) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_call * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

constexpr double kF = sizeof(float);

// args: N rows, C channels. Reads x, weight; writes out, rstd.
void BM_RMSNormForward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  auto x = random_vector(N * C, 1), w = random_vector(C, 2, 0.5f, 1.5f);
  std::vector<float> out(N * C), rstd(N);
  for (auto _ : state) {
    hymba::cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kF * (2.0 * N * C + C + N));
}
BENCHMARK(BM_RMSNormForward)->Args({2048, 512})->Args({2048, 1600})->UseRealTime();

// Reads dout, x, weight, rstd; read-modify-writes dx and dweight.
void BM_RMSNormBackward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  auto x = random_vector(N * C, 1), w = random_vector(C, 2, 0.5f, 1.5f), dout = random_vector(N * C, 3);
  std::vector<float> out(N * C), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f);
  hymba::cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  for (auto _ : state) {
    hymba::cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kF * (4.0 * N * C + 3.0 * C + N));
}
BENCHMARK(BM_RMSNormBackward)->Args({2048, 512})->Args({2048, 1600})->UseRealTime();

// args: N rows, V classes. Forward reads the logits; backward reads them
// again and read-modify-writes dlogits.
void BM_CrossEntropyFwdBwd(benchmark::State& state) {
  const int64_t N = state.range(0), V = state.range(1);
  auto logits = random_vector(N * V, 4, -8.0f, 8.0f);
  std::vector<int32_t> targets(N);
  Rng rng(5);
  for (auto& t : targets) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  std::vector<float> losses(N), dlogits(N * V, 0.0f);
  for (auto _ : state) {
    auto r = hymba::cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V, 0.1f);
    hymba::cpu::cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), N, V, 0.1f,
                                       1.0f / static_cast<float>(r.scored));
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(dlogits.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kF * 4.0 * N * V);
}
BENCHMARK(BM_CrossEntropyFwdBwd)->Args({2048, 4096})->Args({512, 32001})->UseRealTime()->Unit(benchmark::kMillisecond);

// args: N rows, I width; gate|up fused in one [N, 2I] buffer.
void BM_SwiGLUForward(benchmark::State& state) {
  const int64_t N = state.range(0), I = state.range(1);
  auto gu = random_vector(N * 2 * I, 6, -4.0f, 4.0f);
  std::vector<float> out(N * I);
  for (auto _ : state) {
    hymba::cpu::swiglu_forward(out.data(), gu.data(), gu.data() + I, N, I, 2 * I);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kF * 3.0 * N * I);
}
BENCHMARK(BM_SwiGLUForward)->Args({2048, 1536})->Args({2048, 5504})->UseRealTime();

// Reads dout, gate, up; read-modify-writes dgate and dup.
void BM_SwiGLUBackward(benchmark::State& state) {
  const int64_t N = state.range(0), I = state.range(1);
  auto gu = random_vector(N * 2 * I, 6, -4.0f, 4.0f), dout = random_vector(N * I, 7);
  std::vector<float> dgu(N * 2 * I, 0.0f);
  for (auto _ : state) {
    hymba::cpu::swiglu_backward(dgu.data(), dgu.data() + I, dout.data(), gu.data(), gu.data() + I, N, I, 2 * I);
    benchmark::DoNotOptimize(dgu.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kF * 7.0 * N * I);
}
BENCHMARK(BM_SwiGLUBackward)->Args({2048, 1536})->UseRealTime();

}  // namespace
