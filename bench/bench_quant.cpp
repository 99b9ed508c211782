// bf16, q8 and q4 weights against float32 for the products of decoding (one row)
// and of prefill (many rows), at hymba-1.5b's widths (hidden 1600, FFN 5504).
// "weight_GB/s" is the weight bytes read per second: decode is bound by it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"

namespace {

using hymba::bench::random_vector;

// Args: rows R, in C, out OC.
void BM_LinearF32(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  std::vector<float> out(R * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, R, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GB/s"] =
      benchmark::Counter(4.0 * OC * C * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_LinearQ8(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  std::vector<hymba::cpu::BlockQ8> wq(OC * hymba::cpu::q8_blocks_per_row(C));
  hymba::cpu::quantize_q8(wq.data(), w.data(), OC, C);
  std::vector<float> out(R * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_q8(out.data(), x.data(), wq.data(), nullptr, R, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(
      double(sizeof(hymba::cpu::BlockQ8)) * wq.size() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(hymba::cpu::to_string(hymba::cpu::best_q8_isa()));
}

void BM_LinearBF16(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  std::vector<uint16_t> wb(OC * C);
  hymba::cpu::quantize_bf16(wb.data(), w.data(), OC, C);
  std::vector<float> out(R * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_bf16(out.data(), OC, x.data(), C, wb.data(), nullptr, R, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GB/s"] =
      benchmark::Counter(2.0 * OC * C * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(hymba::cpu::to_string(hymba::cpu::best_q8_isa()));
}

void BM_LinearQ4(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  std::vector<hymba::cpu::BlockQ4> wq(OC * hymba::cpu::q4_blocks_per_row(C));
  hymba::cpu::quantize_q4(wq.data(), w.data(), OC, C);
  std::vector<float> out(R * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_q4(out.data(), x.data(), wq.data(), nullptr, R, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(
      double(sizeof(hymba::cpu::BlockQ4)) * wq.size() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(hymba::cpu::to_string(hymba::cpu::best_q8_isa()));
}

// Products on weights packed once (quant_packed.h). Streaming (the decoder's
// path): enough copies of them (256 MiB in all, 8x this machine's L3) that
// each product streams its weights from memory, as a decode step does;
// otherwise one copy, held in cache between iterations as a prefill chunk's
// rows reuse it. The fourth argument is the instruction set (Q8Isa); sets
// this CPU lacks are skipped.
template <typename Packed, typename Block, typename Quantize, typename Pack, typename Product>
void packed_product(benchmark::State& state, Quantize quantize, Pack pack, Product product, bool streaming) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  const auto isa = static_cast<hymba::cpu::Q8Isa>(state.range(3));
  if (!hymba::cpu::q8_isa_available(isa)) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  const int64_t nb = hymba::cpu::q8_blocks_per_row(C);
  std::vector<Block> rows(OC * nb);
  quantize(rows.data(), w.data(), OC, C);
  const size_t per_copy = size_t(hymba::cpu::packed_groups(OC) * nb);
  const size_t copies =
      streaming ? std::max<size_t>(1, (size_t{256} << 20) / (per_copy * sizeof(Packed))) : size_t{1};
  std::vector<Packed> packed(per_copy * copies);
  for (size_t k = 0; k < copies; ++k) pack(packed.data() + k * per_copy, rows.data(), OC, C);
  std::vector<float> out(R * OC);
  size_t k = 0;
  for (auto _ : state) {
    product(out.data(), OC, x.data(), C, packed.data() + k * per_copy, nullptr, R, C, OC, isa);
    k = (k + 1) % copies;
    benchmark::DoNotOptimize(out.data());
  }
  if (streaming)
    state.counters["weight_GB/s"] = benchmark::Counter(double(sizeof(Packed)) * per_copy * state.iterations() / 1e9,
                                                       benchmark::Counter::kIsRate);
  else
    state.counters["GOP/s"] =
        benchmark::Counter(2.0 * R * C * OC * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(hymba::cpu::to_string(isa));
}

void BM_PackedQ8(benchmark::State& state) {
  packed_product<hymba::cpu::PackedQ8, hymba::cpu::BlockQ8>(
      state, [](auto* b, const float* w, int64_t n, int64_t c) { hymba::cpu::quantize_q8(b, w, n, c); },
      hymba::cpu::pack_q8, hymba::cpu::matmul_packed_q8, /*streaming=*/true);
}

void BM_PackedQ4(benchmark::State& state) {
  packed_product<hymba::cpu::PackedQ4, hymba::cpu::BlockQ4>(
      state, [](auto* b, const float* w, int64_t n, int64_t c) { hymba::cpu::quantize_q4(b, w, n, c); },
      hymba::cpu::pack_q4, hymba::cpu::matmul_packed_q4, /*streaming=*/true);
}

#define LINEAR_SHAPES \
  Args({1, 1600, 1600})->Args({1, 1600, 5504})->Args({64, 1600, 1600})->Args({256, 1600, 5504})->UseRealTime()->Unit(benchmark::kMicrosecond)

BENCHMARK(BM_LinearF32)->LINEAR_SHAPES;
BENCHMARK(BM_LinearBF16)->LINEAR_SHAPES;
BENCHMARK(BM_LinearQ8)->LINEAR_SHAPES;
BENCHMARK(BM_LinearQ4)->LINEAR_SHAPES;
#define PACKED_SHAPES                                                                                 \
  ArgsProduct({{1}, {1600}, {1600, 5504}, {1, 2, 3}})->Args({64, 1600, 1600, 1})->Args({256, 1600, 5504, 1})->UseRealTime()->Unit( \
      benchmark::kMicrosecond)

BENCHMARK(BM_PackedQ8)->PACKED_SHAPES;
BENCHMARK(BM_PackedQ4)->PACKED_SHAPES;

// Prefill's products: R rows on weights packed once (held in cache between
// iterations, as a chunk's rows reuse them), the many-row block kernels
// (gemm_packed_q8 / q4) against sgemm on float32. "GOP/s" counts 2 * R * C *
// OC operations. Args: R, C, OC (and the Q8Isa for the block kernels).
void BM_PrefillF32(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1), OC = state.range(2);
  auto x = random_vector(R * C, 1), w = random_vector(OC * C, 2);
  std::vector<float> out(R * OC);
  for (auto _ : state) {
    hymba::cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, R, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GOP/s"] = benchmark::Counter(2.0 * R * C * OC * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_PrefillQ8(benchmark::State& state) {
  packed_product<hymba::cpu::PackedQ8, hymba::cpu::BlockQ8>(
      state, [](auto* b, const float* w, int64_t n, int64_t c) { hymba::cpu::quantize_q8(b, w, n, c); },
      hymba::cpu::pack_q8, hymba::cpu::gemm_packed_q8, /*streaming=*/false);
}

void BM_PrefillQ4(benchmark::State& state) {
  packed_product<hymba::cpu::PackedQ4, hymba::cpu::BlockQ4>(
      state, [](auto* b, const float* w, int64_t n, int64_t c) { hymba::cpu::quantize_q4(b, w, n, c); },
      hymba::cpu::pack_q4, hymba::cpu::gemm_packed_q4, /*streaming=*/false);
}

// TinyLlama-1.1B (2048 -> 2048 / 5632, 5632 -> 2048) and Mamba-130M (768 -> 3072, 1536 -> 768) at 256 rows.
#define PREFILL_SHAPES(...)                                                                                    \
  ArgsProduct({{256}, {2048}, {2048, 5632}, {__VA_ARGS__}})                                                    \
      ->ArgsProduct({{256}, {5632}, {2048}, {__VA_ARGS__}})                                                    \
      ->ArgsProduct({{256}, {768}, {3072}, {__VA_ARGS__}})                                                     \
      ->ArgsProduct({{256}, {1536}, {768}, {__VA_ARGS__}})                                                     \
      ->UseRealTime()                                                                                          \
      ->Unit(benchmark::kMillisecond)

BENCHMARK(BM_PrefillF32)->PREFILL_SHAPES(0);
BENCHMARK(BM_PrefillQ8)->PREFILL_SHAPES(0, 1, 2, 3);
BENCHMARK(BM_PrefillQ4)->PREFILL_SHAPES(0, 1, 2, 3);

}  // namespace
