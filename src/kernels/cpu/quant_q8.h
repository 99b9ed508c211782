// 8-bit block weights for inference (issue 19's q8): each run of 32 values
// is stored as 32 signed bytes in [-127, 127] and one binary16 scale
// (BlockQ8, kernels/quant_blocks.h).
//
// The product quantizes each input row to the same blocks and takes exact
// int32 dot products per block, then accumulates scale_w * scale_x * dot over
// the blocks in order, in float with fused multiply-adds. The int32 dots are
// exact on every path and the accumulation order is fixed, so the portable
// and the SIMD paths give bit-identical results. The kernels run on weights
// repacked 8 rows at a time (kernels/cpu/quant_packed.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_blocks.h"

namespace hymba::cpu {

// Quantizes N rows of C floats into N * q8_blocks_per_row(C) blocks. The
// scale is max|x| / 127 rounded to binary16, and q = round(x / scale) with
// that rounded scale, clamped to [-127, 127]. Non-finite inputs are the
// caller's to refuse (weights are checked at load).
void quantize_q8(BlockQ8* out, const float* x, int64_t N, int64_t C);
// The same for rows ld_x floats apart (ld_x >= C), e.g. a slice of a fused projection.
void quantize_q8(BlockQ8* out, const float* x, int64_t ld_x, int64_t N, int64_t C);
void dequantize_q8(float* out, const BlockQ8* blocks, int64_t N, int64_t C);

// The instruction sets the product can use, chosen at run time:
// best_q8_isa() is the best this CPU supports (checked once), in the order
// kAvx512Vnni, kAvxVnni, kAvx2, kPortable. kAvx512Vnni is AVX-512 VNNI
// (vpdpbusd with AVX512VL on 256-bit registers for one row, 512-bit tiles
// for many); kAvxVnni is the VEX-encoded vpdpbusd of CPUs with AVX-VNNI,
// which need not have AVX-512 (and AVX-512 VNNI CPUs need not have it).
// Both give AVX2's summation order in fewer instructions. Each is available
// by its own CPUID flag.
enum class Q8Isa { kPortable, kAvx2, kAvx512Vnni, kAvxVnni };
Q8Isa best_q8_isa();
bool q8_isa_available(Q8Isa isa);
// Every instruction set this CPU has, kPortable first (tests run them all).
std::vector<Q8Isa> q8_isas_here();
const char* to_string(Q8Isa isa);

// out[R, OC] = x[R, C] · W^T (+ bias[OC] when non-null), W as OC rows of
// q8 blocks (quantize_q8 of the [OC, C] float weights). Threads split the
// output channels; results do not depend on the thread count. W is repacked
// on every call (quant_packed.h): for one-off products; the decoder packs
// its matrices once and calls matmul_packed_q8.
void matmul_q8(float* out, const float* x, const BlockQ8* w, const float* bias, int64_t R, int64_t C, int64_t OC,
               Q8Isa isa = best_q8_isa());
// With row strides (ld_out >= OC, ld_x >= C), as matmul_forward takes them.
void matmul_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const BlockQ8* w, const float* bias,
               int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());

}  // namespace hymba::cpu
