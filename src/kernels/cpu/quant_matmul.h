// What matmul_q8 and matmul_q4 share (internal to kernels/cpu): each input
// row is quantized to q8 blocks once, then threads split the output channels
// and `dot` takes one weight row against one input row, block by block. Each
// weight row is read once and stays in L1 while every input row uses it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

// dot(weight row, input row blocks, input scales, blocks) -> float.
template <typename Block, typename RowDot>
void matmul_blocks(float* out, int64_t ld_out, const float* x, int64_t ld_x, const Block* w, const float* bias,
                   int64_t R, int64_t C, int64_t OC, RowDot dot) {
  const int64_t nb = q8_blocks_per_row(C);
  std::vector<BlockQ8> xq(static_cast<size_t>(R * nb));
  quantize_q8(xq.data(), x, ld_x, R, C);
  std::vector<float> x_scales(xq.size());
  for (size_t i = 0; i < xq.size(); ++i) x_scales[i] = f16_to_f32(xq[i].scale);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < OC; ++o) {
    const Block* wr = w + o * nb;
    const float b = bias != nullptr ? bias[o] : 0.0f;
    for (int64_t r = 0; r < R; ++r)
      out[r * ld_out + o] = dot(wr, xq.data() + r * nb, x_scales.data() + r * nb, nb) + b;
  }
}

}  // namespace hymba::cpu
