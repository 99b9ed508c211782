// float32 <-> bfloat16 / half conversions (core/float_formats.h), as export
// --dtype and the BF16/F16 checkpoint readers run them: one element at a time
// over a 1M-element tensor. GB/s counts the float32 side's bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"

namespace {

constexpr int64_t kN = 1 << 20;

std::vector<float> random_weights() {
  hymba::Rng rng(3);
  std::vector<float> v(kN);
  for (auto& x : v) x = rng.normal() * 0.05f;
  return v;
}

void set_bandwidth(benchmark::State& state) {
  state.counters["GB/s"] = benchmark::Counter(4.0 * kN * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

template <uint16_t (*Narrow)(float)>
void BM_Narrow(benchmark::State& state) {
  const std::vector<float> x = random_weights();
  std::vector<uint16_t> out(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) out[static_cast<size_t>(i)] = Narrow(x[static_cast<size_t>(i)]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state);
}

template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void BM_Widen(benchmark::State& state) {
  const std::vector<float> x = random_weights();
  std::vector<uint16_t> in(kN);
  for (int64_t i = 0; i < kN; ++i) in[static_cast<size_t>(i)] = Narrow(x[static_cast<size_t>(i)]);
  std::vector<float> out(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) out[static_cast<size_t>(i)] = Widen(in[static_cast<size_t>(i)]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bandwidth(state);
}

BENCHMARK(BM_Narrow<hymba::f32_to_bf16>)->Name("BM_F32ToBf16")->UseRealTime();
BENCHMARK(BM_Narrow<hymba::f32_to_f16>)->Name("BM_F32ToF16")->UseRealTime();
BENCHMARK(BM_Widen<hymba::f32_to_bf16, hymba::bf16_to_f32>)->Name("BM_Bf16ToF32")->UseRealTime();
BENCHMARK(BM_Widen<hymba::f32_to_f16, hymba::f16_to_f32>)->Name("BM_F16ToF32")->UseRealTime();

}  // namespace
