// 4-bit block weights (GGUF's Q4_0, byte for byte): each run of 32 values is
// stored as one binary16 scale d and 16 bytes of 4-bit codes, a code q
// standing for (q - 8) * d (BlockQ4, kernels/quant_blocks.h).
//
// The quantizer is llama.cpp's (quantize_row_q4_0_ref): the element of
// largest magnitude, with its sign, maps to code 0, d = max / -8, and
// q = min(15, trunc(x / d + 8.5)), so a file the engine writes holds the
// codes llama.cpp's own converter would write.
//
// The product follows matmul_q8 (kernels/cpu/quant_q8.h): inputs quantized
// to q8 blocks, exact int32 dots per block, scale_w * scale_x * dot summed
// over the blocks in order with fused multiply-adds; the portable and the
// SIMD paths are bit-identical. As for q8, W is repacked on every call of
// matmul_q4; the decoder packs once and calls matmul_packed_q4.
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_q8.h"
#include "kernels/quant_blocks.h"

namespace hymba::cpu {

// Quantizes N rows of C floats into N * q4_blocks_per_row(C) blocks. NaN
// inputs become code 8 (zero) rather than an undefined conversion.
void quantize_q4(BlockQ4* out, const float* x, int64_t N, int64_t C);
// The same for rows ld_x floats apart (ld_x >= C).
void quantize_q4(BlockQ4* out, const float* x, int64_t ld_x, int64_t N, int64_t C);
void dequantize_q4(float* out, const BlockQ4* blocks, int64_t N, int64_t C);

// The same instruction sets as q8 (checked once, at run time).
using Q4Isa = Q8Isa;

// out[R, OC] = x[R, C] · W^T (+ bias[OC] when non-null), W as OC rows of q4
// blocks. Threads split the output channels; results do not depend on the
// thread count.
void matmul_q4(float* out, const float* x, const BlockQ4* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q4Isa isa = best_q8_isa());
// With row strides (ld_out >= OC, ld_x >= C), as matmul_forward takes them.
void matmul_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ4* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q4Isa isa = best_q8_isa());

}  // namespace hymba::cpu
