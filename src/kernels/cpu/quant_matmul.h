// What matmul_q8 and matmul_q4 share (internal to kernels/cpu): each input
// row is quantized to q8 blocks once, then threads split the output channels
// and `dot` takes one weight row against one input row, block by block. Each
// weight row is read once and stays in L1 while every input row uses it.
//
// The summation order, which every instruction set follows exactly so that
// their results are bit-identical: a block's 32 products are taken as 8 exact
// int32 lane sums (lane j: elements 4j..4j+3, what AVX2's maddubs + madd
// leave); each lane sum, as a float, is multiplied by the block's scale
// (scale_w * scale_x, rounded to float) and added with one fused
// multiply-add into lane j of one of two accumulators, even blocks into the
// first and odd blocks into the second. The 16 partial sums are then added
// in the fixed tree finish_lanes() spells out. Keeping the sums in lanes
// until the end is what lets the SIMD path run at memory speed: there is no
// horizontal reduction per block.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

inline constexpr int kDotLanes = 8;

// How far ahead of the block being read the weight stream is prefetched:
// the hardware prefetcher stops at 4 KiB page boundaries, and a decode step
// streams each weight once, so every page would otherwise start with a miss.
inline constexpr int kPrefetchBytes = 2048;

// The two accumulators' 8 lanes each, added as the AVX2 path adds them:
// s = even + odd, q_k = s_k + s_{k+4}, then (q0 + q2) + (q1 + q3).
inline float finish_lanes(const float* even, const float* odd) {
  float s[kDotLanes];
  for (int j = 0; j < kDotLanes; ++j) s[j] = even[j] + odd[j];
  float q[4];
  for (int k = 0; k < 4; ++k) q[k] = s[k] + s[k + 4];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// The portable dot for any weight block: code(block, i) is element i's
// integer weight (q8: the byte; q4: the nibble minus 8).
template <typename Block, typename Code>
float lane_dot_portable(const Block* w, const BlockQ8* x, const float* x_scales, int64_t nb, Code code) {
  float even[kDotLanes] = {}, odd[kDotLanes] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = f16_to_f32(w[b].scale) * x_scales[b];
    float* acc = (b & 1) != 0 ? odd : even;
    for (int j = 0; j < kDotLanes; ++j) {
      int32_t lane = 0;
      for (int i = 4 * j; i < 4 * j + 4; ++i) lane += code(w[b], i) * int32_t{x[b].q[i]};
      acc[j] = std::fma(static_cast<float>(lane), d, acc[j]);
    }
  }
  return finish_lanes(even, odd);
}

// finish_lanes() on AVX2 registers, the same additions in the same order.
__attribute__((target("avx2,fma"))) inline float finish_lanes_avx2(__m256 even, __m256 odd) {
  const __m256 s = _mm256_add_ps(even, odd);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 pairs = _mm_add_ps(q, _mm_movehl_ps(q, q));  // q0 + q2, q1 + q3
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// One block's 8 exact lane sums, as floats, times its scale, into acc: the
// signed weight bytes wq against the input bytes xq. maddubs multiplies
// unsigned by signed bytes, so w's sign moves onto x; exact because a pair
// sums to at most 2 * 127 * 127 < 2^15.
__attribute__((target("avx2,fma"))) inline __m256 lane_fma_avx2(__m256i wq, __m256i xq, float d, __m256 acc) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
  const __m256i lanes = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(d), acc);
}

// What the products need of each input row: its q8 blocks, their scales as
// floats, and each block's 8 lane sums of the input bytes times 8 (q4's dot
// takes them off an unsigned product: its codes are offset by 8).
struct QuantizedInput {
  std::vector<BlockQ8> blocks;
  std::vector<float> scales;
  std::vector<int32_t> lane_sums_x8;  // [blocks.size()][kDotLanes]
};

inline void quantize_input(QuantizedInput& in, const float* x, int64_t ld_x, int64_t R, int64_t C) {
  const int64_t nb = q8_blocks_per_row(C);
  in.blocks.resize(static_cast<size_t>(R * nb));
  quantize_q8(in.blocks.data(), x, ld_x, R, C);
  in.scales.resize(in.blocks.size());
  in.lane_sums_x8.resize(in.blocks.size() * kDotLanes);
  for (size_t i = 0; i < in.blocks.size(); ++i) {
    in.scales[i] = f16_to_f32(in.blocks[i].scale);
    for (int j = 0; j < kDotLanes; ++j) {
      int32_t sum = 0;
      for (int k = 4 * j; k < 4 * j + 4; ++k) sum += in.blocks[i].q[k];
      in.lane_sums_x8[i * kDotLanes + static_cast<size_t>(j)] = 8 * sum;
    }
  }
}

// dot(weight row, input row blocks, their scales, their lane sums x 8, blocks) -> float.
template <typename Block, typename RowDot>
void matmul_blocks(float* out, int64_t ld_out, const float* x, int64_t ld_x, const Block* w, const float* bias,
                   int64_t R, int64_t C, int64_t OC, RowDot dot) {
  const int64_t nb = q8_blocks_per_row(C);
  // One buffer per thread, kept: a decode step makes hundreds of these products.
  thread_local QuantizedInput in;
  quantize_input(in, x, ld_x, R, C);
  const QuantizedInput& input = in;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < OC; ++o) {
    const Block* wr = w + o * nb;
    const float b = bias != nullptr ? bias[o] : 0.0f;
    for (int64_t r = 0; r < R; ++r)
      out[r * ld_out + o] = dot(wr, input.blocks.data() + r * nb, input.scales.data() + r * nb,
                                input.lane_sums_x8.data() + r * nb * kDotLanes, nb) +
                            b;
  }
}

}  // namespace hymba::cpu
