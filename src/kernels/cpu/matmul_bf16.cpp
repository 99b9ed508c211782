#include "kernels/cpu/matmul_bf16.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/float_formats.h"
#include "kernels/cpu/quant_matmul.h"

namespace hymba::cpu {

void quantize_bf16(uint16_t* out, const float* x, int64_t N, int64_t C) {
  for (int64_t i = 0; i < N * C; ++i) out[i] = f32_to_bf16(x[i]);
}

namespace {

constexpr int64_t kRun = kDotLanes;  // elements per run of one accumulator

float row_dot_portable(const uint16_t* w, const float* x, int64_t C) {
  float acc[2][kRun] = {};
  for (int64_t c0 = 0; c0 < C; c0 += kRun) {
    float* a = acc[(c0 / kRun) & 1];
    for (int64_t j = 0; j < kRun; ++j) {
      const int64_t c = c0 + j;
      const float wv = c < C ? bf16_to_f32(w[c]) : 0.0f, xv = c < C ? x[c] : 0.0f;
      a[j] = std::fma(xv, wv, a[j]);
    }
  }
  return finish_lanes(acc[0], acc[1]);
}

// 8 bf16 values widened to float32: shifted into the top half.
__attribute__((target("avx2,fma"))) __m256 load_bf16(const uint16_t* w) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

__attribute__((target("avx2,fma"))) float row_dot_avx2(const uint16_t* w, const float* x, int64_t C) {
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 2 * kRun <= C; c += 2 * kRun) {
    even = _mm256_fmadd_ps(_mm256_loadu_ps(x + c), load_bf16(w + c), even);
    odd = _mm256_fmadd_ps(_mm256_loadu_ps(x + c + kRun), load_bf16(w + c + kRun), odd);
  }
  // The ragged end, zero-padded as the portable path pads it.
  for (int half = 0; c < C; c += kRun, ++half) {
    alignas(32) float xs[kRun] = {};
    alignas(32) uint16_t ws[kRun] = {};
    const int64_t n = std::min<int64_t>(kRun, C - c);
    std::memcpy(xs, x + c, sizeof(float) * static_cast<size_t>(n));
    std::memcpy(ws, w + c, sizeof(uint16_t) * static_cast<size_t>(n));
    __m256& acc = half == 0 ? even : odd;
    acc = _mm256_fmadd_ps(_mm256_load_ps(xs), load_bf16(ws), acc);
  }
  return finish_lanes_avx2(even, odd);
}

}  // namespace

void matmul_bf16(float* out, int64_t ld_out, const float* x, int64_t ld_x, const uint16_t* w, const float* bias,
                 int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  HYMBA_CHECK(R >= 0 && C >= 1 && OC >= 0 && ld_out >= OC && ld_x >= C, "matmul_bf16: bad shape R=", R, " C=", C,
              " OC=", OC, " ld_out=", ld_out, " ld_x=", ld_x);
  HYMBA_CHECK(isa == Q8Isa::kPortable || best_q8_isa() == Q8Isa::kAvx2, "matmul_bf16: this CPU has no ",
              to_string(isa));
  const auto dot = isa == Q8Isa::kAvx2 ? row_dot_avx2 : row_dot_portable;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < OC; ++o) {
    const uint16_t* wr = w + o * C;
    const float b = bias != nullptr ? bias[o] : 0.0f;
    for (int64_t r = 0; r < R; ++r) out[r * ld_out + o] = dot(wr, x + r * ld_x, C) + b;
  }
}

}  // namespace hymba::cpu
