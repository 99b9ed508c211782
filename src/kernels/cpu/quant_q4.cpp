#include "kernels/cpu/quant_q4.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/float_formats.h"
#include "kernels/cpu/quant_matmul.h"

namespace hymba::cpu {

namespace {

// llama.cpp's code for one value: x * (1/d) + 8.5 truncated, at most 15.
// The sum lies in [0.5, 16.5] for finite inputs of the block; NaN gives 8.
uint8_t q4_code(float x, float inv_d) {
  const float v = x * inv_d + 8.5f;
  if (!(v >= 0.0f)) return 8;
  return static_cast<uint8_t>(std::min(15, static_cast<int>(std::min(v, 16.0f))));
}

}  // namespace

void quantize_q4(BlockQ4* out, const float* x, int64_t N, int64_t C) { quantize_q4(out, x, C, N, C); }

void quantize_q4(BlockQ4* out, const float* x, int64_t ld_x, int64_t N, int64_t C) {
  const int64_t nb = q4_blocks_per_row(C);
  float vals[kQ4BlockSize];
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * ld_x;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kQ4BlockSize, len = std::min(kQ4BlockSize, C - c0);
      for (int64_t i = 0; i < kQ4BlockSize; ++i) vals[i] = i < len ? row[c0 + i] : 0.0f;
      // The first element of largest magnitude, sign kept (strict < as llama.cpp).
      float amax = 0, max = 0;
      for (const float v : vals)
        if (amax < std::fabs(v)) {
          amax = std::fabs(v);
          max = v;
        }
      const float d = max / -8.0f;
      const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
      BlockQ4& blk = out[n * nb + b];
      blk.scale = f32_to_f16(d);
      for (int64_t j = 0; j < kQ4BlockSize / 2; ++j)
        blk.q[j] = static_cast<uint8_t>(q4_code(vals[j], inv_d) | (q4_code(vals[j + kQ4BlockSize / 2], inv_d) << 4));
    }
  }
}

void dequantize_q4(float* out, const BlockQ4* blocks, int64_t N, int64_t C) {
  const int64_t nb = q4_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4& blk = blocks[n * nb + b];
      const float d = f16_to_f32(blk.scale);
      const int64_t c0 = b * kQ4BlockSize, len = std::min(kQ4BlockSize, C - c0);
      for (int64_t i = 0; i < len; ++i) {
        const int code = i < kQ4BlockSize / 2 ? blk.q[i] & 0x0F : blk.q[i - kQ4BlockSize / 2] >> 4;
        out[n * C + c0 + i] = static_cast<float>(code - 8) * d;
      }
    }
}

namespace {

// One output, in the lane order of kernels/cpu/quant_matmul.h.
float row_dot_portable(const BlockQ4* w, const BlockQ8* x, const float* x_scales, const int32_t* /*lane_sums_x8*/,
                       int64_t nb) {
  return lane_dot_portable(w, x, x_scales, nb, [](const BlockQ4& blk, int i) {
    const int code = i < kQ4BlockSize / 2 ? blk.q[i] & 0x0F : blk.q[i - kQ4BlockSize / 2] >> 4;
    return int32_t{code - 8};
  });
}

// A block's codes, in [0, 15], as 32 bytes in element order: low nibbles are
// elements 0..15, high nibbles 16..31.
__attribute__((target("avx2,fma,f16c"))) __m256i load_codes(const BlockQ4& blk) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.q));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// One block: sum (code - 8) * x per lane as sum code * x - 8 * sum x, the
// codes being maddubs's unsigned operand (exact: a pair sums to at most
// 2 * 15 * 127), then into acc as lane_fma_avx2 adds (the same integers, so
// the same floats as the portable path).
__attribute__((target("avx2,fma,f16c"))) __m256 block_fma(const BlockQ4& w, const BlockQ8& x,
                                                          const int32_t* lane_sums_x8, float d, __m256 acc) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q));
  const __m256i pairs = _mm256_maddubs_epi16(load_codes(w), xq);
  const __m256i lanes = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_sums_x8));
  const __m256i centred = _mm256_sub_epi32(lanes, offsets);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(centred), _mm256_set1_ps(d), acc);
}

__attribute__((target("avx2,fma,f16c"))) float row_dot_avx2(const BlockQ4* w, const BlockQ8* x,
                                                             const float* x_scales, const int32_t* lane_sums_x8,
                                                             int64_t nb) {
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(w + b) + kPrefetchBytes, _MM_HINT_T0);
    even = block_fma(w[b], x[b], lane_sums_x8 + b * kDotLanes, _cvtsh_ss(w[b].scale) * x_scales[b], even);
    odd = block_fma(w[b + 1], x[b + 1], lane_sums_x8 + (b + 1) * kDotLanes,
                    _cvtsh_ss(w[b + 1].scale) * x_scales[b + 1], odd);
  }
  if (b < nb) even = block_fma(w[b], x[b], lane_sums_x8 + b * kDotLanes, _cvtsh_ss(w[b].scale) * x_scales[b], even);
  return finish_lanes_avx2(even, odd);
}

}  // namespace

void matmul_q4(float* out, const float* x, const BlockQ4* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q4Isa isa) {
  matmul_q4(out, OC, x, C, w, bias, R, C, OC, isa);
}

void matmul_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ4* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q4Isa isa) {
  HYMBA_CHECK(R >= 0 && C >= 1 && OC >= 0 && ld_out >= OC && ld_x >= C, "matmul_q4: bad shape R=", R, " C=", C,
              " OC=", OC, " ld_out=", ld_out, " ld_x=", ld_x);
  HYMBA_CHECK(isa == Q4Isa::kPortable || best_q4_isa() == Q4Isa::kAvx2, "matmul_q4: this CPU has no ",
              to_string(isa));
  static_assert(kQ4BlockSize == kQ8BlockSize, "a q4 weight block pairs with one q8 input block");
  matmul_blocks(out, ld_out, x, ld_x, w, bias, R, C, OC, isa == Q4Isa::kAvx2 ? row_dot_avx2 : row_dot_portable);
}

}  // namespace hymba::cpu
