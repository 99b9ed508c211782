#include "kernels/cpu/quant_q8.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/float_formats.h"
#include "kernels/cpu/quant_matmul.h"

namespace hymba::cpu {

void quantize_q8(BlockQ8* out, const float* x, int64_t N, int64_t C) { quantize_q8(out, x, C, N, C); }

void quantize_q8(BlockQ8* out, const float* x, int64_t ld_x, int64_t N, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * ld_x;
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8& blk = out[n * nb + b];
      const int64_t c0 = b * kQ8BlockSize, len = std::min(kQ8BlockSize, C - c0);
      float amax = 0;
      for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(row[c0 + i]));
      blk.scale = f32_to_f16(amax / 127.0f);
      // Quantize against the stored (rounded) scale, so dequantization uses the same one.
      const float d = f16_to_f32(blk.scale);
      for (int64_t i = 0; i < kQ8BlockSize; ++i) {
        const float v = i < len && d > 0 ? std::nearbyint(row[c0 + i] / d) : 0.0f;
        // NaN (from a non-finite input) becomes 0 rather than an undefined conversion.
        blk.q[i] = static_cast<int8_t>(std::isnan(v) ? 0.0f : std::clamp(v, -127.0f, 127.0f));
      }
    }
  }
}

void dequantize_q8(float* out, const BlockQ8* blocks, int64_t N, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8& blk = blocks[n * nb + b];
      const float d = f16_to_f32(blk.scale);
      const int64_t c0 = b * kQ8BlockSize, len = std::min(kQ8BlockSize, C - c0);
      for (int64_t i = 0; i < len; ++i) out[n * C + c0 + i] = d * static_cast<float>(blk.q[i]);
    }
}

namespace {

// One output, in the lane order of kernels/cpu/quant_matmul.h.
float row_dot_portable(const BlockQ8* w, const BlockQ8* x, const float* x_scales, const int32_t* /*lane_sums_x8*/,
                       int64_t nb) {
  return lane_dot_portable(w, x, x_scales, nb, [](const BlockQ8& blk, int i) { return int32_t{blk.q[i]}; });
}

__attribute__((target("avx2,fma,f16c"))) __m256i load_q8(const BlockQ8& blk) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.q));
}

__attribute__((target("avx2,fma,f16c"))) float row_dot_avx2(const BlockQ8* w, const BlockQ8* x,
                                                             const float* x_scales, const int32_t* /*lane_sums_x8*/,
                                                             int64_t nb) {
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(w + b) + kPrefetchBytes, _MM_HINT_T0);
    even = lane_fma_avx2(load_q8(w[b]), load_q8(x[b]), _cvtsh_ss(w[b].scale) * x_scales[b], even);
    odd = lane_fma_avx2(load_q8(w[b + 1]), load_q8(x[b + 1]), _cvtsh_ss(w[b + 1].scale) * x_scales[b + 1], odd);
  }
  if (b < nb) even = lane_fma_avx2(load_q8(w[b]), load_q8(x[b]), _cvtsh_ss(w[b].scale) * x_scales[b], even);
  return finish_lanes_avx2(even, odd);
}

}  // namespace

Q8Isa best_q8_isa() {
  static const Q8Isa isa = [] {
    __builtin_cpu_init();
    // F16C through cpuid: clang 14's __builtin_cpu_supports does not know it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c ? Q8Isa::kAvx2
                                                                                   : Q8Isa::kPortable;
  }();
  return isa;
}

const char* to_string(Q8Isa isa) { return isa == Q8Isa::kAvx2 ? "avx2" : "portable"; }

void matmul_q8(float* out, const float* x, const BlockQ8* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q8Isa isa) {
  matmul_q8(out, OC, x, C, w, bias, R, C, OC, isa);
}

void matmul_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ8* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  HYMBA_CHECK(R >= 0 && C >= 1 && OC >= 0 && ld_out >= OC && ld_x >= C, "matmul_q8: bad shape R=", R, " C=", C,
              " OC=", OC, " ld_out=", ld_out, " ld_x=", ld_x);
  HYMBA_CHECK(isa == Q8Isa::kPortable || best_q8_isa() == Q8Isa::kAvx2, "matmul_q8: this CPU has no ",
              to_string(isa));
  matmul_blocks(out, ld_out, x, ld_x, w, bias, R, C, OC, isa == Q8Isa::kAvx2 ? row_dot_avx2 : row_dot_portable);
}

}  // namespace hymba::cpu
