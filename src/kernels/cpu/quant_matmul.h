// What the q8 and q4 products share (internal to kernels/cpu): each input
// row is quantized to q8 blocks once, then threads split the groups of
// kPackedRows output channels (kernels/cpu/quant_packed.h) and `dot` takes
// one group's interleaved blocks against one input row. A group's blocks are
// read once and stay in L1 while every input row uses them.
//
// The summation order, which every instruction set follows exactly so that
// their results are bit-identical: each output starts at 0; for each block
// in order, its exact int32 dot (32 weight codes times 32 input bytes) as a
// float is added with one fused multiply-add, times the block's scale
// (scale_w * scale_x, rounded to float). Then the bias is added. The SIMD
// paths keep the 8 outputs of a group in the 8 lanes of one register, so no
// horizontal sum is ever taken: that is what lets them run at memory speed.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/float_formats.h"
#include "core/parallel.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

// How far ahead of the block being read the weight stream is prefetched:
// the hardware prefetcher stops at 4 KiB page boundaries, and a decode step
// streams each weight once, so every page would otherwise start with a miss.
// The lines go to L2 (T1), not L1: a core keeps about 16 L1 misses in flight
// and about 48 L2 misses, and at DRAM latency 16 lines a core cap the stream
// near 10 GB/s. On the 2-core Intel VM, 4 KiB ahead into L2 against 2 KiB
// into L1: a q4 stream of 480 MB 21-23.5 -> 23.3-25.2 GB/s, hymba-1.5b q4
// decode 18.8 -> 20.8 tok/s (q8 unchanged). The bf16 row kernel streams as
// far ahead (matmul_bf16.cpp).
inline constexpr int kPrefetchBytes = 4096;

// Asks for every cache line of the packed block kPrefetchBytes ahead of `block`, into L2.
template <typename Packed>
__attribute__((always_inline)) inline void prefetch_ahead(const Packed* block) {
  const char* ahead = reinterpret_cast<const char*>(block) + kPrefetchBytes;
  for (size_t line = 0; line < sizeof(Packed); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T1);
}

// Refuses a bad shape or an instruction set this CPU lacks, naming the product.
void check_product(const char* name, int64_t R, int64_t C, int64_t OC, int64_t ld_out, int64_t ld_x, Q8Isa isa);

// What the products need of each input row: its q8 blocks, their scales as
// floats, and 8 times each block's sum of bytes (q4's dot takes it off an
// unsigned product: its codes are offset by 8).
struct QuantizedInput {
  std::vector<BlockQ8> blocks;
  std::vector<float> scales;
  std::vector<int32_t> sums_x8;
};

inline void quantize_input(QuantizedInput& in, const float* x, int64_t ld_x, int64_t R, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  in.blocks.resize(static_cast<size_t>(R * nb));
  quantize_q8(in.blocks.data(), x, ld_x, R, C);
  in.scales.resize(in.blocks.size());
  in.sums_x8.resize(in.blocks.size());
  for (size_t i = 0; i < in.blocks.size(); ++i) {
    in.scales[i] = f16_to_f32(in.blocks[i].scale);
    int32_t sum = 0;
    for (const int8_t q : in.blocks[i].q) sum += q;
    in.sums_x8[i] = 8 * sum;
  }
}

// Four input bytes starting at p, repeated in every 32-bit lane: one run of
// a group's interleaved codes meets the same 4 inputs in each output's lane.
__attribute__((target("avx2"))) inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// acc += the 4-byte dot products of u (unsigned) and s (signed) per lane:
// vpdpbusd on 256-bit registers, VEX-encoded for AVX-VNNI or EVEX-encoded
// for AVX-512 VNNI. Written in assembly so that one kernel body, compiled
// for AVX2, serves both encodings: neither CPU kind need have the other's.
template <Q8Isa kIsa>
__attribute__((target("avx2"), always_inline)) inline __m256i dpbusd256(__m256i acc, __m256i u, __m256i s) {
  static_assert(kIsa == Q8Isa::kAvxVnni || kIsa == Q8Isa::kAvx512Vnni, "vpdpbusd needs a VNNI instruction set");
  if constexpr (kIsa == Q8Isa::kAvxVnni)
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
  else
    asm("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
  return acc;
}

// One block's 8 exact dots, as floats, times the 8 scales, into acc.
__attribute__((target("avx2,fma,f16c"))) inline __m256 scaled_fma(__m256i dots, const uint16_t* scales,
                                                                  float x_scale, __m256 acc) {
  const __m256 w_scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m256 d = _mm256_mul_ps(w_scales, _mm256_set1_ps(x_scale));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), d, acc);
}

// dot(out[kPackedRows], group blocks, input blocks, their scales, their
// sums x 8, blocks per row) writes one group's outputs for one input row.
template <typename Packed, typename GroupDot>
void matmul_groups(float* out, int64_t ld_out, const float* x, int64_t ld_x, const Packed* w, const float* bias,
                   int64_t R, int64_t C, int64_t OC, GroupDot dot) {
  const int64_t nb = q8_blocks_per_row(C);
  // One buffer per thread, kept: a decode step makes hundreds of these products.
  thread_local QuantizedInput in;
  quantize_input(in, x, ld_x, R, C);
  const QuantizedInput& input = in;
  const int64_t groups = packed_groups(OC);
  parallel_for(groups, true, [&](int64_t first, int64_t last) {
    for (int64_t g = first; g < last; ++g) {
      const Packed* wg = w + g * nb;
      const int64_t o0 = g * kPackedRows, n = std::min(kPackedRows, OC - o0);
      for (int64_t r = 0; r < R; ++r) {
        float lanes[kPackedRows];
        dot(lanes, wg, input.blocks.data() + r * nb, input.scales.data() + r * nb, input.sums_x8.data() + r * nb,
            nb);
        for (int64_t j = 0; j < n; ++j)
          out[r * ld_out + o0 + j] = lanes[j] + (bias != nullptr ? bias[o0 + j] : 0.0f);
      }
    }
  });
}

}  // namespace hymba::cpu
