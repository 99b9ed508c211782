// Plain reference for the q8 block format (kernels/cpu/quant_q8.h): the
// quantizer written out element by element, and the product computed from
// the dequantized operands in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/quant_blocks.h"

namespace hymba::ref {

inline void quantize_q8(cpu::BlockQ8* out, const float* x, int64_t N, int64_t C) {
  const int64_t nb = cpu::q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < nb; ++b) {
      cpu::BlockQ8& blk = out[n * nb + b];
      float amax = 0;
      for (int64_t i = 0; i < cpu::kQ8BlockSize; ++i) {
        const int64_t c = b * cpu::kQ8BlockSize + i;
        if (c < C) amax = std::max(amax, std::fabs(x[n * C + c]));
      }
      blk.scale = f32_to_f16(amax / 127.0f);
      const float d = f16_to_f32(blk.scale);
      for (int64_t i = 0; i < cpu::kQ8BlockSize; ++i) {
        const int64_t c = b * cpu::kQ8BlockSize + i;
        const float v = c < C && d > 0 ? std::nearbyint(x[n * C + c] / d) : 0.0f;
        blk.q[i] = static_cast<int8_t>(std::isnan(v) ? 0.0f : std::clamp(v, -127.0f, 127.0f));
      }
    }
}

// out[R, OC] = dequant(quantize(x)) · dequant(W)^T + bias, in double.
inline std::vector<double> matmul_q8(const float* x, const cpu::BlockQ8* w, const float* bias, int64_t R, int64_t C,
                                     int64_t OC) {
  const int64_t nb = cpu::q8_blocks_per_row(C);
  std::vector<cpu::BlockQ8> xq(static_cast<size_t>(R * nb));
  ref::quantize_q8(xq.data(), x, R, C);
  std::vector<double> out(static_cast<size_t>(R * OC));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const cpu::BlockQ8& wb = w[o * nb + b];
        const cpu::BlockQ8& xb = xq[static_cast<size_t>(r * nb + b)];
        for (int64_t i = 0; i < cpu::kQ8BlockSize; ++i)
          sum += static_cast<double>(f16_to_f32(wb.scale)) * wb.q[i] * f16_to_f32(xb.scale) * xb.q[i];
      }
      out[static_cast<size_t>(r * OC + o)] = sum;
    }
  return out;
}

}  // namespace hymba::ref
