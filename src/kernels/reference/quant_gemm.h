// Plain scalar reference for the block products of many rows
// (kernels/cpu/quant_gemm.cpp, gemm_packed_q8 / gemm_packed_q4) on the row
// blocks as stored: each input row quantized to q8 blocks (ref::quantize_q8),
// then per output and block the exact integer dot, added as a float with one
// fused multiply-add times (scale_w * scale_x rounded to float), the blocks in
// order from 0, the bias last. This is the documented order
// (kernels/cpu/quant_matmul.h), so every instruction set must give exactly
// these bits; ref::matmul_q8 / matmul_q4 give the same product in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/quant_q8.h"

namespace hymba::ref {

namespace detail {
template <typename Block, typename Code>
std::vector<float> block_gemm(const float* x, int64_t ld_x, const Block* w, const float* bias, int64_t R, int64_t C,
                              int64_t OC, Code code) {
  const int64_t nb = cpu::q8_blocks_per_row(C);
  std::vector<cpu::BlockQ8> xq(static_cast<size_t>(R * nb));
  for (int64_t r = 0; r < R; ++r) ref::quantize_q8(xq.data() + r * nb, x + r * ld_x, 1, C);
  std::vector<float> out(static_cast<size_t>(R * OC));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const cpu::BlockQ8& xb = xq[static_cast<size_t>(r * nb + b)];
        const Block& wb = w[o * nb + b];
        int32_t dot = 0;
        for (int e = 0; e < 32; ++e) dot += code(wb, e) * int32_t{xb.q[e]};
        acc = std::fma(static_cast<float>(dot), f16_to_f32(wb.scale) * f16_to_f32(xb.scale), acc);
      }
      out[static_cast<size_t>(r * OC + o)] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  return out;
}
}  // namespace detail

// out[R, OC] (dense) for x rows ld_x floats apart and W as OC rows of blocks.
inline std::vector<float> gemm_q8(const float* x, int64_t ld_x, const cpu::BlockQ8* w, const float* bias, int64_t R,
                                  int64_t C, int64_t OC) {
  return detail::block_gemm(x, ld_x, w, bias, R, C, OC,
                            [](const cpu::BlockQ8& b, int e) { return int32_t{b.q[e]}; });
}

inline std::vector<float> gemm_q4(const float* x, int64_t ld_x, const cpu::BlockQ4* w, const float* bias, int64_t R,
                                  int64_t C, int64_t OC) {
  return detail::block_gemm(x, ld_x, w, bias, R, C, OC, [](const cpu::BlockQ4& b, int e) {
    return int32_t{e < 16 ? b.q[e] & 0x0F : b.q[e - 16] >> 4} - 8;
  });
}

}  // namespace hymba::ref
