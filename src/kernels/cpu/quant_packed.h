// q8 and q4 weights repacked for the products (issue 19): the blocks of
// kPackedRows = 8 output rows interleaved, so that one 256-bit register holds
// the same 4 elements of 8 rows and its 8 lanes accumulate 8 outputs at once
// (no horizontal sum per block, the input broadcast once per 4 elements).
// This is llama.cpp's idea (its Q4_0x8 / Q8_0x8 repacking); the layout here is
// our own. A matrix is repacked once, when a decoder first uses it or adopts
// it from a file; the stored format stays GGUF's row blocks.
//
// Layout: group g holds rows 8g..8g+7 (rows past the matrix are zero), its
// blocks in order, blocks_per_row(C) of them; a matrix is
// packed_groups(OC) * blocks_per_row(C) packed blocks, group after group.
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

inline constexpr int64_t kPackedRows = 8;

// One block of 8 rows: their binary16 scales, then 8 runs of 32 bytes; run k
// holds elements 4k..4k+3 of row 0, then of row 1, ..., of row 7.
struct PackedQ8 {
  uint16_t scales[kPackedRows];
  int8_t q[kPackedRows * kQ8BlockSize];
};
static_assert(sizeof(PackedQ8) == 16 + 256, "PackedQ8 must be packed");

// One q4 block of 8 rows: the scales, then 4 runs of 32 bytes; byte 4r + i of
// run k holds row r's element 4k + i in its low nibble and element
// 16 + 4k + i in its high nibble (Q4_0's pairing of j with j + 16).
struct PackedQ4 {
  uint16_t scales[kPackedRows];
  uint8_t q[kPackedRows * kQ4BlockSize / 2];
};
static_assert(sizeof(PackedQ4) == 16 + 128, "PackedQ4 must be packed");

inline int64_t packed_groups(int64_t OC) { return (OC + kPackedRows - 1) / kPackedRows; }

// w: OC rows of blocks_per_row(C) row blocks -> packed_groups(OC) * blocks_per_row(C) packed blocks.
void pack_q8(PackedQ8* out, const BlockQ8* w, int64_t OC, int64_t C);
void pack_q4(PackedQ4* out, const BlockQ4* w, int64_t OC, int64_t C);
// Rows [row0, row0 + n) of a packed matrix as float32 [n, C].
void dequantize_packed_q8(float* out, const PackedQ8* p, int64_t row0, int64_t n, int64_t C);
void dequantize_packed_q4(float* out, const PackedQ4* p, int64_t row0, int64_t n, int64_t C);

// out[R, OC] = x[R, C] · W^T (+ bias[OC] when non-null), W packed as above,
// in the summation order of kernels/cpu/quant_matmul.h; every instruction
// set gives the same bits, and so does any thread count.
void matmul_packed_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ8* w, const float* bias,
                      int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());
void matmul_packed_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ4* w, const float* bias,
                      int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());

// The same products for many rows (kernels/cpu/quant_gemm.cpp): tiles of
// input rows by 16 outputs (AVX-512 VNNI) or 8 (AVX2), each weight register
// loaded once per tile, rows a cache-sized panel at a time. The same
// summation order, so the same bits as the one-row kernels on every
// instruction set and thread count; the portable path is the one-row one.
// matmul_packed_q8 / q4 hand products of kGemmMinRows rows or more to them.
inline constexpr int64_t kGemmMinRows = 4;
void gemm_packed_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ8* w, const float* bias,
                    int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());
void gemm_packed_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ4* w, const float* bias,
                    int64_t R, int64_t C, int64_t OC, Q8Isa isa = best_q8_isa());

}  // namespace hymba::cpu
