// Linear-layer throughput through OpenBLAS at the shapes small hybrid models
// use (rows = batch x tokens; square and projection-like widths).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/gemm_bf16.h"
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

// A linear layer's products in bf16 (kernels/cpu/gemm_bf16.h) beside
// OpenBLAS's float32 ones above. Args: rows BT, in C, out OC, which product
// (0 forward out = x W^T, 1 dx = dout W, 2 dW = dout^T x) and the
// instruction set (0 portable, 1 AVX512-BF16; skipped where absent).
void BM_GemmBf16(benchmark::State& state) {
  const int64_t BT = state.range(0), C = state.range(1), OC = state.range(2), which = state.range(3);
  const auto isa = state.range(4) == 0 ? hymba::cpu::Bf16GemmIsa::kPortable : hymba::cpu::Bf16GemmIsa::kAvx512Bf16;
  if (!hymba::cpu::bf16_gemm_isa_available(isa)) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  auto x = random_vector(BT * C, 1), w = random_vector(OC * C, 2), dout = random_vector(BT * OC, 3);
  std::vector<float> out(BT * std::max(C, OC)), dw(OC * C);
  for (auto _ : state) {
    if (which == 0) hymba::cpu::gemm_bf16(BT, OC, C, {x.data(), C, false}, {w.data(), C, true}, 0.0f, out.data(), OC, isa);
    if (which == 1) hymba::cpu::gemm_bf16(BT, C, OC, {dout.data(), OC, false}, {w.data(), C, false}, 0.0f, out.data(), C, isa);
    if (which == 2) hymba::cpu::gemm_bf16(OC, C, BT, {dout.data(), OC, true}, {x.data(), C, false}, 1.0f, dw.data(), C, isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(dw.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * BT * C * OC * state.iterations(), benchmark::Counter::kIsRate);
}

// Seed-scale shapes (8 x (256 + 64 meta) rows, d_model 384, FFN 1536).
BENCHMARK(BM_GemmBf16)
    ->ArgsProduct({{2560}, {384}, {1536}, {0, 1, 2}, {1}})
    ->ArgsProduct({{2560}, {1536}, {384}, {0, 1, 2}, {1}})
    ->Args({512, 384, 384, 0, 0})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulForward)->Args({2560, 384, 1536})->Args({2560, 1536, 384})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulBackward)->Args({2560, 384, 1536})->Args({2560, 1536, 384})->Unit(benchmark::kMillisecond);

}  // namespace
