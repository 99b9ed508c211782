// The decoder's product on float32 weights: the model graph's LinearFn when
// the linears run in f32 (infer/weight_format.h), for a decode step's rows
// and a prefill chunk's.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// out[rows, OC] = in[rows, C] @ w[OC, C]^T (row strides ld_out, ld_in). One
// row goes through the row-dot kernel on float32 weights (matmul_f32_rows,
// kernels/cpu/matmul_bf16.h: a fixed summation order, so the same bits on
// any team or thread count; OpenBLAS's sgemm with one row packs the whole
// weight on every call and runs 4-5x slower); more rows use the graph's
// matmul kernel (kernels/cpu/matmul.h).
void decode_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
                   int64_t OC);

}  // namespace hymba::cpu
