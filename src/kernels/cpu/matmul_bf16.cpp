#include "kernels/cpu/matmul_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/parallel.h"
#include "kernels/cpu/quant_matmul.h"

namespace hymba::cpu {

void quantize_bf16(uint16_t* out, const float* x, int64_t N, int64_t C) {
  for (int64_t i = 0; i < N * C; ++i) out[i] = f32_to_bf16(x[i]);
}

namespace {

// The summation order, which both paths follow exactly: elements in runs of
// kRun; run k goes into lane j of accumulator k % 2 with a fused
// multiply-add, and the two accumulators' lanes are added at the end in the
// fixed tree of finish_lanes().
constexpr int64_t kRun = 8;
// Below this many multiply-adds a thread's wake costs more than it saves (the step kernels' threshold).
constexpr int64_t kParallelMin = int64_t{1} << 15;

// s = even + odd, q_k = s_k + s_{k+4}, then (q0 + q2) + (q1 + q3).
float finish_lanes(const float* even, const float* odd) {
  float s[kRun];
  for (int j = 0; j < kRun; ++j) s[j] = even[j] + odd[j];
  float q[4];
  for (int k = 0; k < 4; ++k) q[k] = s[k] + s[k + 4];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// finish_lanes() on AVX2 registers, the same additions in the same order.
__attribute__((target("avx2,fma"))) float finish_lanes_avx2(__m256 even, __m256 odd) {
  const __m256 s = _mm256_add_ps(even, odd);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 pairs = _mm_add_ps(q, _mm_movehl_ps(q, q));  // q0 + q2, q1 + q3
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// A weight as float32: bf16 widened (its top half), float32 as it is.
float widen(uint16_t w) { return bf16_to_f32(w); }
float widen(float w) { return w; }

template <typename W>
float row_dot_portable(const W* w, const float* x, int64_t C) {
  float acc[2][kRun] = {};
  for (int64_t c0 = 0; c0 < C; c0 += kRun) {
    float* a = acc[(c0 / kRun) & 1];
    for (int64_t j = 0; j < kRun; ++j) {
      const int64_t c = c0 + j;
      const float wv = c < C ? widen(w[c]) : 0.0f, xv = c < C ? x[c] : 0.0f;
      a[j] = std::fma(xv, wv, a[j]);
    }
  }
  return finish_lanes(acc[0], acc[1]);
}

// 8 weights as float32: bf16 shifted into the top half, float32 loaded.
__attribute__((target("avx2,fma"))) __m256 load8(const uint16_t* w) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}
__attribute__((target("avx2,fma"))) __m256 load8(const float* w) { return _mm256_loadu_ps(w); }

template <typename W>
__attribute__((target("avx2,fma"))) float row_dot_avx2(const W* w, const float* x, int64_t C) {
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 2 * kRun <= C; c += 2 * kRun) {
    even = _mm256_fmadd_ps(_mm256_loadu_ps(x + c), load8(w + c), even);
    odd = _mm256_fmadd_ps(_mm256_loadu_ps(x + c + kRun), load8(w + c + kRun), odd);
  }
  // The ragged end, zero-padded as the portable path pads it.
  for (int half = 0; c < C; c += kRun, ++half) {
    alignas(32) float xs[kRun] = {};
    alignas(32) W ws[kRun] = {};
    const int64_t n = std::min<int64_t>(kRun, C - c);
    std::memcpy(xs, x + c, sizeof(float) * static_cast<size_t>(n));
    std::memcpy(ws, w + c, sizeof(W) * static_cast<size_t>(n));
    __m256& acc = half == 0 ? even : odd;
    acc = _mm256_fmadd_ps(_mm256_load_ps(xs), load8(ws), acc);
  }
  return finish_lanes_avx2(even, odd);
}

// row_dot_avx2 on four rows at once, each in its own order: eight
// independent chains of fused multiply-adds where one row has two, each
// waiting on the last (the loop ran at the FMA's latency, below the speed
// of memory on a 2-core machine), and each input run loaded once for all four.
// Each row is prefetched kPrefetchBytes ahead into L2, as the q8 / q4
// streams are (quant_matmul.h). hymba-1.5b bf16 batch-1 decode, four runs of
// each alternated: 2 KiB into L1 4.2-5.0 tok/s, 4 KiB into L2 5.0-5.7.
template <typename W>
__attribute__((target("avx2,fma"))) void rows4_dot_avx2(const W* const* w, const float* x, int64_t C, float* out) {
  constexpr int64_t kAhead = kPrefetchBytes / int64_t{sizeof(W)};  // elements
  constexpr int64_t kLine = 64 / int64_t{sizeof(W)};
  __m256 even[4], odd[4];
  for (int k = 0; k < 4; ++k) even[k] = odd[k] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 2 * kRun <= C; c += 2 * kRun) {
    const __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + kRun);
    // One cache line of each row, kAhead elements ahead, into L2 (the
    // hardware prefetcher stops at page boundaries; decode streams each row
    // once).
    if (c % kLine == 0)
      for (int k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(w[k] + c + kAhead), _MM_HINT_T1);
    for (int k = 0; k < 4; ++k) {
      even[k] = _mm256_fmadd_ps(x0, load8(w[k] + c), even[k]);
      odd[k] = _mm256_fmadd_ps(x1, load8(w[k] + c + kRun), odd[k]);
    }
  }
  for (int half = 0; c < C; c += kRun, ++half) {
    alignas(32) float xs[kRun] = {};
    const int64_t n = std::min<int64_t>(kRun, C - c);
    std::memcpy(xs, x + c, sizeof(float) * static_cast<size_t>(n));
    for (int k = 0; k < 4; ++k) {
      alignas(32) W ws[kRun] = {};
      std::memcpy(ws, w[k] + c, sizeof(W) * static_cast<size_t>(n));
      __m256& acc = half == 0 ? even[k] : odd[k];
      acc = _mm256_fmadd_ps(_mm256_load_ps(xs), load8(ws), acc);
    }
  }
  for (int k = 0; k < 4; ++k) out[k] = finish_lanes_avx2(even[k], odd[k]);
}

template <typename W>
void rows4_dot_portable(const W* const* w, const float* x, int64_t C, float* out) {
  for (int k = 0; k < 4; ++k) out[k] = row_dot_portable(w[k], x, C);
}

// The product of both weight types: threads split the output channels, four
// rows at a time, each row summed in the documented order.
template <typename W>
void matmul_rows(float* out, int64_t ld_out, const float* x, int64_t ld_x, const W* w, const float* bias, int64_t R,
                 int64_t C, int64_t OC, Q8Isa isa, const char* name) {
  HYMBA_CHECK(R >= 0 && C >= 1 && OC >= 0 && ld_out >= OC && ld_x >= C, name, ": bad shape R=", R, " C=", C,
              " OC=", OC, " ld_out=", ld_out, " ld_x=", ld_x);
  HYMBA_CHECK(q8_isa_available(isa), name, ": this CPU has no ", to_string(isa));
  // No VNNI form: a VNNI CPU runs the AVX2 path.
  const auto dot = isa == Q8Isa::kPortable ? row_dot_portable<W> : row_dot_avx2<W>;
  const auto dot4 = isa == Q8Isa::kPortable ? rows4_dot_portable<W> : rows4_dot_avx2<W>;
  parallel_for(OC, R * C * OC >= kParallelMin, [&](int64_t first, int64_t last) {
    int64_t o = first;
    for (; o + 4 <= last; o += 4) {
      const W* rows[4] = {w + o * C, w + (o + 1) * C, w + (o + 2) * C, w + (o + 3) * C};
      for (int64_t r = 0; r < R; ++r) {
        float sums[4];
        dot4(rows, x + r * ld_x, C, sums);
        for (int k = 0; k < 4; ++k) out[r * ld_out + o + k] = sums[k] + (bias != nullptr ? bias[o + k] : 0.0f);
      }
    }
    for (; o < last; ++o) {
      const W* wr = w + o * C;
      const float b = bias != nullptr ? bias[o] : 0.0f;
      for (int64_t r = 0; r < R; ++r) out[r * ld_out + o] = dot(wr, x + r * ld_x, C) + b;
    }
  });
}

}  // namespace

void matmul_bf16(float* out, int64_t ld_out, const float* x, int64_t ld_x, const uint16_t* w, const float* bias,
                 int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  matmul_rows(out, ld_out, x, ld_x, w, bias, R, C, OC, isa, "matmul_bf16");
}

void matmul_f32_rows(float* out, int64_t ld_out, const float* x, int64_t ld_x, const float* w, const float* bias,
                     int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  matmul_rows(out, ld_out, x, ld_x, w, bias, R, C, OC, isa, "matmul_f32_rows");
}

}  // namespace hymba::cpu
