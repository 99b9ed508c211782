#include "kernels/cpu/quant_q8.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/float_formats.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/vec8.h"

namespace hymba::cpu {

namespace {

// One block of 32 values in vectors of 8 (kernels/cpu/vec8.h; a decode step
// quantizes every linear layer's input, on the step's critical path): the
// maximum in 8 lanes (exact in any order; NaN is skipped, as std::max skips
// it), then each value against the stored (rounded) scale, so
// dequantization uses the same one. Rounding is to nearest, ties to even, as
// std::nearbyint: adding and subtracting 1.5 * 2^23 rounds any |v| < 2^22
// so, and larger values are clamped to +-127 either way. NaN (from a
// non-finite input) becomes 0 rather than an undefined conversion.
void quantize_whole_block(BlockQ8& blk, const float* x) {
  constexpr int kLanes = 8;
  Vec8 lane_max = {};
  for (int64_t i = 0; i < kQ8BlockSize; i += kLanes) {
    const Vec8 v = load8(x + i), a = v < 0 ? -v : v;
    lane_max = lane_max < a ? a : lane_max;
  }
  float amax = 0;
  for (int j = 0; j < kLanes; ++j) amax = std::max(amax, lane_max[j]);
  blk.scale = f32_to_f16(amax / 127.0f);
  const float d = f16_to_f32(blk.scale);
  if (!(d > 0)) {
    std::memset(blk.q, 0, sizeof(blk.q));
    return;
  }
  const Vec8 dv = splat8(d), magic = splat8(12582912.0f), lo = splat8(-127.0f), hi = splat8(127.0f);
  for (int64_t i = 0; i < kQ8BlockSize; i += kLanes) {
    Vec8 v = load8(x + i) / dv;
    v = (v + magic) - magic;
    v = v == v ? v : Vec8{};
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    const Int8 q = __builtin_convertvector(v, Int8);
    for (int j = 0; j < kLanes; ++j) blk.q[i + j] = static_cast<int8_t>(q[j]);
  }
}

}  // namespace

void quantize_q8(BlockQ8* out, const float* x, int64_t N, int64_t C) { quantize_q8(out, x, C, N, C); }

void quantize_q8(BlockQ8* out, const float* x, int64_t ld_x, int64_t N, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * ld_x;
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8& blk = out[n * nb + b];
      const int64_t c0 = b * kQ8BlockSize, len = std::min(kQ8BlockSize, C - c0);
      if (len == kQ8BlockSize) {
        quantize_whole_block(blk, row + c0);
        continue;
      }
      // A ragged tail as a block padded with zeros: they change neither the
      // maximum nor anything but their own codes, which are 0.
      float padded[kQ8BlockSize] = {};
      std::copy_n(row + c0, len, padded);
      quantize_whole_block(blk, padded);
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

void pack_q8(PackedQ8* out, const BlockQ8* w, int64_t OC, int64_t C) {
  HYMBA_CHECK(OC >= 0 && C >= 1 && (OC == 0 || (out != nullptr && w != nullptr)), "pack_q8: bad shape OC=", OC,
              " C=", C, " or a null matrix");
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t g = 0; g < packed_groups(OC); ++g)
    for (int64_t b = 0; b < nb; ++b) {
      PackedQ8& p = out[g * nb + b];
      std::memset(&p, 0, sizeof(p));
      for (int64_t r = 0; r < kPackedRows && g * kPackedRows + r < OC; ++r) {
        const BlockQ8& blk = w[(g * kPackedRows + r) * nb + b];
        p.scales[r] = blk.scale;
        for (int64_t k = 0; k < kQ8BlockSize / 4; ++k) std::memcpy(p.q + 32 * k + 4 * r, blk.q + 4 * k, 4);
      }
    }
}

void dequantize_packed_q8(float* out, const PackedQ8* p, int64_t row0, int64_t n, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = (row0 + i) / kPackedRows, r = (row0 + i) % kPackedRows;
    for (int64_t b = 0; b < nb; ++b) {
      const PackedQ8& blk = p[g * nb + b];
      const float d = f16_to_f32(blk.scales[r]);
      const int64_t c0 = b * kQ8BlockSize, len = std::min(kQ8BlockSize, C - c0);
      for (int64_t k = 0; 4 * k < len; ++k)  // run k: elements 4k..4k+3
        for (int64_t j = 0; j < 4 && 4 * k + j < len; ++j)
          out[i * C + c0 + 4 * k + j] = d * static_cast<float>(blk.q[32 * k + 4 * r + j]);
    }
  }
}

namespace {

// One group's 8 outputs in the order of kernels/cpu/quant_matmul.h.
void group_dot_portable(float* out, const PackedQ8* w, const BlockQ8* x, const float* x_scales,
                        const int32_t* /*sums_x8*/, int64_t nb) {
  float acc[kPackedRows] = {};
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t r = 0; r < kPackedRows; ++r) {
      int32_t dot = 0;
      for (int64_t e = 0; e < kQ8BlockSize; ++e) dot += int32_t{w[b].q[32 * (e / 4) + 4 * r + e % 4]} * x[b].q[e];
      acc[r] = std::fma(static_cast<float>(dot), f16_to_f32(w[b].scales[r]) * x_scales[b], acc[r]);
    }
  std::copy_n(acc, kPackedRows, out);
}

// maddubs multiplies unsigned by signed bytes, so w's sign moves onto x;
// exact, as a pair sums to at most 2 * 128 * 127 < 2^15 (a byte of -128 in a
// file is 128 once its sign is taken).
__attribute__((target("avx2,fma,f16c"))) void group_dot_avx2(float* out, const PackedQ8* w, const BlockQ8* x,
                                                              const float* x_scales, const int32_t* /*sums_x8*/,
                                                              int64_t nb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(w + b);
    __m256i dots = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i xq = broadcast4(x[b].q + 4 * k);
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
      dots = _mm256_add_epi32(dots, _mm256_madd_epi16(pairs, ones));
    }
    acc = scaled_fma(dots, w[b].scales, x_scales[b], acc);
  }
  _mm256_storeu_ps(out, acc);
}

// The same with vpdpbusd (AVX-512 VNNI or AVX-VNNI): 4 byte products summed
// into each int32 lane in one instruction, exactly.
template <Q8Isa kIsa>
__attribute__((target("avx2,fma,f16c"))) void group_dot_vnni(float* out, const PackedQ8* w, const BlockQ8* x,
                                                              const float* x_scales, const int32_t* /*sums_x8*/,
                                                              int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(w + b);
    __m256i dots = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i xq = broadcast4(x[b].q + 4 * k);
      dots = dpbusd256<kIsa>(dots, _mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
    }
    acc = scaled_fma(dots, w[b].scales, x_scales[b], acc);
  }
  _mm256_storeu_ps(out, acc);
}

}  // namespace

namespace {

struct Q8Flags {
  bool avx2 = false, avx_vnni = false, avx512_vnni = false;
};

Q8Flags cpu_flags() {
  __builtin_cpu_init();
  Q8Flags f;
  // F16C and AVX-VNNI through cpuid: clang 14's __builtin_cpu_supports knows neither.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool leaf7_1 = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0;
  f.avx_vnni = f.avx2 && leaf7_1 && (eax & (1u << 4)) != 0;
  f.avx512_vnni = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  return f;
}

}  // namespace

bool q8_isa_available(Q8Isa isa) {
  static const Q8Flags f = cpu_flags();
  switch (isa) {
    case Q8Isa::kPortable: return true;
    case Q8Isa::kAvx2: return f.avx2;
    case Q8Isa::kAvxVnni: return f.avx_vnni;
    case Q8Isa::kAvx512Vnni: return f.avx512_vnni;
  }
  return false;
}

Q8Isa best_q8_isa() {
  for (const Q8Isa isa : {Q8Isa::kAvx512Vnni, Q8Isa::kAvxVnni, Q8Isa::kAvx2})
    if (q8_isa_available(isa)) return isa;
  return Q8Isa::kPortable;
}

std::vector<Q8Isa> q8_isas_here() {
  std::vector<Q8Isa> isas;
  for (const Q8Isa isa : {Q8Isa::kPortable, Q8Isa::kAvx2, Q8Isa::kAvxVnni, Q8Isa::kAvx512Vnni})
    if (q8_isa_available(isa)) isas.push_back(isa);
  return isas;
}

const char* to_string(Q8Isa isa) {
  switch (isa) {
    case Q8Isa::kAvx2: return "avx2";
    case Q8Isa::kAvx512Vnni: return "avx512-vnni";
    case Q8Isa::kAvxVnni: return "avx-vnni";
    case Q8Isa::kPortable: break;
  }
  return "portable";
}

void check_product(const char* name, int64_t R, int64_t C, int64_t OC, int64_t ld_out, int64_t ld_x, Q8Isa isa) {
  HYMBA_CHECK(R >= 0 && C >= 1 && OC >= 0 && ld_out >= OC && ld_x >= C, name, ": bad shape R=", R, " C=", C,
              " OC=", OC, " ld_out=", ld_out, " ld_x=", ld_x);
  HYMBA_CHECK(q8_isa_available(isa), name, ": this CPU has no ", to_string(isa));
}

void matmul_packed_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ8* w, const float* bias,
                      int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  check_product("matmul_q8", R, C, OC, ld_out, ld_x, isa);
  if (R >= kGemmMinRows && isa != Q8Isa::kPortable)
    return gemm_packed_q8(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
  const auto dot = isa == Q8Isa::kAvx512Vnni ? group_dot_vnni<Q8Isa::kAvx512Vnni>
                   : isa == Q8Isa::kAvxVnni  ? group_dot_vnni<Q8Isa::kAvxVnni>
                   : isa == Q8Isa::kAvx2     ? group_dot_avx2
                                             : group_dot_portable;
  matmul_groups(out, ld_out, x, ld_x, w, bias, R, C, OC, dot);
}

void matmul_q8(float* out, const float* x, const BlockQ8* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q8Isa isa) {
  matmul_q8(out, OC, x, C, w, bias, R, C, OC, isa);
}

void matmul_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ8* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  check_product("matmul_q8", R, C, OC, ld_out, ld_x, isa);
  std::vector<PackedQ8> packed(static_cast<size_t>(packed_groups(OC) * q8_blocks_per_row(C)));
  pack_q8(packed.data(), w, OC, C);
  matmul_packed_q8(out, ld_out, x, ld_x, packed.data(), bias, R, C, OC, isa);
}

}  // namespace hymba::cpu
