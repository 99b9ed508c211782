// A long product on bf16 weights (a prefill chunk, the meta prefix): the
// weights widened to float32 a tile of rows at a time, then sgemm, which is
// 2-3x faster there than the bf16 row kernel (kernels/cpu/matmul_bf16.h).
// Only the tile is float32: a model held in bf16 keeps no float32 copy.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// out[rows, OC] = in[rows, C] @ widen(w)^T (row strides ld_out, ld_in), w as
// OC rows of C bf16 values; each tile's product is decode_linear's
// (kernels/cpu/decode_linear.h). Threads split the widening by weight rows.
void matmul_bf16_widened(float* out, int64_t ld_out, const float* in, int64_t ld_in, const uint16_t* w, int64_t rows,
                         int64_t C, int64_t OC);

}  // namespace hymba::cpu
