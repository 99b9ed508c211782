// Plain reference for the q4 block format (kernels/cpu/quant_q4.h): the
// quantizer written out as llama.cpp's quantize_row_q4_0_ref describes it,
// element by element, and the product computed from the dequantized operands
// in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/quant_q8.h"

namespace hymba::ref {

inline void quantize_q4(cpu::BlockQ4* out, const float* x, int64_t N, int64_t C) {
  const int64_t nb = cpu::q4_blocks_per_row(C);
  const auto value = [&](int64_t n, int64_t c) { return c < C ? x[n * C + c] : 0.0f; };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * cpu::kQ4BlockSize;
      float amax = 0, max = 0;
      for (int64_t i = 0; i < cpu::kQ4BlockSize; ++i)
        if (amax < std::fabs(value(n, c0 + i))) {
          amax = std::fabs(value(n, c0 + i));
          max = value(n, c0 + i);
        }
      const float d = max / -8;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      cpu::BlockQ4& blk = out[n * nb + b];
      blk.scale = f32_to_f16(d);
      for (int64_t j = 0; j < 16; ++j) {
        const float x0 = value(n, c0 + j) * id, x1 = value(n, c0 + 16 + j) * id;
        const int q0 = std::min(15, static_cast<int>(x0 + 8.5f));
        const int q1 = std::min(15, static_cast<int>(x1 + 8.5f));
        blk.q[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
}

// Element i of a q4 block, dequantized.
inline double q4_value(const cpu::BlockQ4& blk, int64_t i) {
  const int code = i < 16 ? blk.q[i] & 0x0F : blk.q[i - 16] >> 4;
  return static_cast<double>(f16_to_f32(blk.scale)) * (code - 8);
}

// out[R, OC] = dequant(quantize_q8(x)) · dequant(W)^T + bias, in double.
inline std::vector<double> matmul_q4(const float* x, const cpu::BlockQ4* w, const float* bias, int64_t R, int64_t C,
                                     int64_t OC) {
  const int64_t nb = cpu::q4_blocks_per_row(C);
  std::vector<cpu::BlockQ8> xq(static_cast<size_t>(R * nb));
  ref::quantize_q8(xq.data(), x, R, C);
  std::vector<double> out(static_cast<size_t>(R * OC));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const cpu::BlockQ8& xb = xq[static_cast<size_t>(r * nb + b)];
        for (int64_t i = 0; i < cpu::kQ4BlockSize; ++i)
          sum += q4_value(w[o * nb + b], i) * f16_to_f32(xb.scale) * xb.q[i];
      }
      out[static_cast<size_t>(r * OC + o)] = sum;
    }
  return out;
}

}  // namespace hymba::ref
