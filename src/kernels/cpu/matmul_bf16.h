// Row-dot products for inference on bfloat16 or float32 weights.
//
// bfloat16 weights (issue 19's bf16): each weight is the top
// half of its float32, rounded to nearest even (core/float_formats.h), 2
// bytes per weight against float32's 4. Inputs and sums stay float32, so
// the product differs from float32's only by the weights' rounding.
//
// The summation order, which every instruction set follows exactly so that
// their results are bit-identical: element c of a row goes to lane c mod 8
// of one of two accumulators, the first for even runs of 8 elements (c / 8
// even), the second for odd ones, with one fused multiply-add each; a ragged
// last run is padded with zeros. The 16 partial sums are then added in the
// fixed tree of finish_lanes (matmul_bf16.cpp).
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

// Rounds N * C floats to bf16 (a row's layout is unchanged: [N, C]).
void quantize_bf16(uint16_t* out, const float* x, int64_t N, int64_t C);

// out[R, OC] = x[R, C] · W^T (+ bias[OC] when non-null), W as OC rows of C
// bf16 values, rows ld_out / ld_x apart. Threads split the output channels;
// results do not depend on the thread count. The instruction sets are q8's.
void matmul_bf16(float* out, int64_t ld_out, const float* x, int64_t ld_x, const uint16_t* w, const float* bias,
                 int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());

// The same product on float32 weights, in the same summation order: the
// products of a decode step's one row (kernels/cpu/decode_linear.h), whose
// bits then depend neither on the thread count nor on how a team splits the
// output channels, nor on which kernels OpenBLAS picked for this CPU.
void matmul_f32_rows(float* out, int64_t ld_out, const float* x, int64_t ld_x, const float* w, const float* bias,
                     int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());

}  // namespace hymba::cpu
