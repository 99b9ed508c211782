#include "kernels/cpu/quant_q4.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/float_formats.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_packed.h"

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

void pack_q4(PackedQ4* out, const BlockQ4* w, int64_t OC, int64_t C) {
  HYMBA_CHECK(OC >= 0 && C >= 1 && (OC == 0 || (out != nullptr && w != nullptr)), "pack_q4: bad shape OC=", OC,
              " C=", C, " or a null matrix");
  const int64_t nb = q4_blocks_per_row(C);
  for (int64_t g = 0; g < packed_groups(OC); ++g)
    for (int64_t b = 0; b < nb; ++b) {
      PackedQ4& p = out[g * nb + b];
      std::memset(&p, 0, sizeof(p));
      for (int64_t r = 0; r < kPackedRows && g * kPackedRows + r < OC; ++r) {
        const BlockQ4& blk = w[(g * kPackedRows + r) * nb + b];
        p.scales[r] = blk.scale;
        for (int64_t k = 0; k < 4; ++k) std::memcpy(p.q + 32 * k + 4 * r, blk.q + 4 * k, 4);
      }
    }
}

namespace {

// Element e's code in row r of a packed q4 block.
int packed_code(const PackedQ4& blk, int64_t r, int64_t e) {
  const int64_t j = e % 16;
  const uint8_t byte = blk.q[32 * (j / 4) + 4 * r + j % 4];
  return e < 16 ? byte & 0x0F : byte >> 4;
}

}  // namespace

void dequantize_packed_q4(float* out, const PackedQ4* p, int64_t row0, int64_t n, int64_t C) {
  const int64_t nb = q4_blocks_per_row(C);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = (row0 + i) / kPackedRows, r = (row0 + i) % kPackedRows;
    float* row = out + i * C;
    for (int64_t b = 0; b < nb; ++b) {
      const PackedQ4& blk = p[g * nb + b];
      const float d = f16_to_f32(blk.scales[r]);
      const int64_t c0 = b * kQ4BlockSize;
      if (c0 + kQ4BlockSize <= C) {
        // A whole block: each run's 4 bytes give elements 4k..4k+3 and 16+4k..16+4k+3.
        for (int64_t k = 0; k < 4; ++k)
          for (int64_t j = 0; j < 4; ++j) {
            const uint8_t byte = blk.q[32 * k + 4 * r + j];
            row[c0 + 4 * k + j] = static_cast<float>((byte & 0x0F) - 8) * d;
            row[c0 + 16 + 4 * k + j] = static_cast<float>((byte >> 4) - 8) * d;
          }
      } else {
        for (int64_t e = 0; e < C - c0; ++e) row[c0 + e] = static_cast<float>(packed_code(blk, r, e) - 8) * d;
      }
    }
  }
}

namespace {

// One group's 8 outputs in the order of kernels/cpu/quant_matmul.h.
void group_dot_portable(float* out, const PackedQ4* w, const BlockQ8* x, const float* x_scales,
                        const int32_t* /*sums_x8*/, int64_t nb) {
  float acc[kPackedRows] = {};
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t r = 0; r < kPackedRows; ++r) {
      int32_t dot = 0;
      for (int64_t e = 0; e < kQ4BlockSize; ++e) dot += (packed_code(w[b], r, e) - 8) * int32_t{x[b].q[e]};
      acc[r] = std::fma(static_cast<float>(dot), f16_to_f32(w[b].scales[r]) * x_scales[b], acc[r]);
    }
  std::copy_n(acc, kPackedRows, out);
}

// sum (code - 8) * x as sum code * x - 8 * sum x: the codes are maddubs's
// unsigned operand. The 16-bit sums of a block stay exact: 8 products of
// pairs, each at most 2 * 15 * 127, stay under 2^15.
__attribute__((target("avx2,fma,f16c"))) void group_dot_avx2(float* out, const PackedQ4* w, const BlockQ8* x,
                                                              const float* x_scales, const int32_t* sums_x8,
                                                              int64_t nb) {
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(w + b);
    __m256i sums = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i lo = _mm256_and_si256(codes, low), hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), low);
      sums = _mm256_add_epi16(sums, _mm256_maddubs_epi16(lo, broadcast4(x[b].q + 4 * k)));
      sums = _mm256_add_epi16(sums, _mm256_maddubs_epi16(hi, broadcast4(x[b].q + 16 + 4 * k)));
    }
    const __m256i dots = _mm256_sub_epi32(_mm256_madd_epi16(sums, ones), _mm256_set1_epi32(sums_x8[b]));
    acc = scaled_fma(dots, w[b].scales, x_scales[b], acc);
  }
  _mm256_storeu_ps(out, acc);
}

// The same with vpdpbusd (AVX-512 VNNI or AVX-VNNI) summing 4 byte products per lane.
template <Q8Isa kIsa>
__attribute__((target("avx2,fma,f16c"))) void group_dot_vnni(float* out, const PackedQ4* w, const BlockQ8* x,
                                                              const float* x_scales, const int32_t* sums_x8,
                                                              int64_t nb) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(w + b);
    __m256i dots = _mm256_set1_epi32(-sums_x8[b]);
    for (int k = 0; k < 4; ++k) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i lo = _mm256_and_si256(codes, low), hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), low);
      dots = dpbusd256<kIsa>(dots, lo, broadcast4(x[b].q + 4 * k));
      dots = dpbusd256<kIsa>(dots, hi, broadcast4(x[b].q + 16 + 4 * k));
    }
    acc = scaled_fma(dots, w[b].scales, x_scales[b], acc);
  }
  _mm256_storeu_ps(out, acc);
}

}  // namespace

void matmul_packed_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ4* w, const float* bias,
                      int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  check_product("matmul_q4", R, C, OC, ld_out, ld_x, isa);
  if (R >= kGemmMinRows && isa != Q8Isa::kPortable)
    return gemm_packed_q4(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
  static_assert(kQ4BlockSize == kQ8BlockSize, "a q4 weight block pairs with one q8 input block");
  const auto dot = isa == Q8Isa::kAvx512Vnni ? group_dot_vnni<Q8Isa::kAvx512Vnni>
                   : isa == Q8Isa::kAvxVnni  ? group_dot_vnni<Q8Isa::kAvxVnni>
                   : isa == Q8Isa::kAvx2     ? group_dot_avx2
                                             : group_dot_portable;
  matmul_groups(out, ld_out, x, ld_x, w, bias, R, C, OC, dot);
}

void matmul_q4(float* out, const float* x, const BlockQ4* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q4Isa isa) {
  matmul_q4(out, OC, x, C, w, bias, R, C, OC, isa);
}

void matmul_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ4* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q4Isa isa) {
  check_product("matmul_q4", R, C, OC, ld_out, ld_x, isa);
  std::vector<PackedQ4> packed(static_cast<size_t>(packed_groups(OC) * q4_blocks_per_row(C)));
  pack_q4(packed.data(), w, OC, C);
  matmul_packed_q4(out, ld_out, x, ld_x, packed.data(), bias, R, C, OC, isa);
}

}  // namespace hymba::cpu
