// Linear-layer throughput through OpenBLAS at the shapes small hybrid models
// use (rows = batch x tokens; square and projection-like widths).
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_util.h"
#include "kernels/cpu/matmul.h"

namespace {

using hymba::bench::random_vector;

// Args: rows BT, in C, out OC.
void BM_MatmulForward(benchmark::State& state) {
  const int64_t BT = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(BT * C, 1), w = random_vector(OC * C, 2), b = random_vector(OC, 3);
  std::vector<float> out(BT * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_forward(out.data(), x.data(), w.data(), b.data(), BT, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * BT * C * OC * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_MatmulBackward(benchmark::State& state) {
  const int64_t BT = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(BT * C, 1), w = random_vector(OC * C, 2), dout = random_vector(BT * OC, 3);
  std::vector<float> dx(BT * C), dw(OC * C), db(OC);
  for (auto _ : state) {
    hymba::cpu::matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), BT, C, OC);
    benchmark::DoNotOptimize(dx.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(4.0 * BT * C * OC * state.iterations(), benchmark::Counter::kIsRate);
}

#define MATMUL_SHAPES                                                                                \
  Args({2048, 128, 128})->Args({2048, 128, 512})->Args({2048, 512, 512})->Args({2048, 512, 2048}) \
      ->Args({2048, 384, 4096})->Args({4096, 1024, 1024})->Unit(benchmark::kMillisecond)

BENCHMARK(BM_MatmulForward)->MATMUL_SHAPES;
BENCHMARK(BM_MatmulBackward)->MATMUL_SHAPES;

}  // namespace
