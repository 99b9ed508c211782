// Token embedding lookup. N tokens, V vocabulary rows, C channels.
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_packed.h"
#include "kernels/quant_blocks.h"

namespace hymba::cpu {

// out[N, C] = table[ids[n], :]. Throws hymba::Error naming the first id
// outside [0, V).
void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C);

// The same lookup from a table kept in blocks (GGUF's Q8_0 / Q4_0 rows of
// q8_blocks_per_row(C) blocks): each row widened as dequantize_q8 / q4 does,
// so the values are those of the table widened whole.
void embedding_forward_q8(float* out, const int32_t* ids, const BlockQ8* table, int64_t N, int64_t V, int64_t C);
void embedding_forward_q4(float* out, const int32_t* ids, const BlockQ4* table, int64_t N, int64_t V, int64_t C);
// The same rows from a table repacked for the products
// (kernels/cpu/quant_packed.h): a decoder's copy of a tied head serves its
// lookups too, so the file's row blocks are not read again (or kept resident).
void embedding_forward_packed_q8(float* out, const int32_t* ids, const PackedQ8* table, int64_t N, int64_t V,
                                 int64_t C);
void embedding_forward_packed_q4(float* out, const int32_t* ids, const PackedQ4* table, int64_t N, int64_t V,
                                 int64_t C);

// dtable[ids[n], :] += dout[n, :]. Deterministic for any thread count.
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C);

// Learned absolute positions: x[n, :] += table[pos(n), :] for a table of P
// positions, pos(n) = positions[n], or n when positions is null (rows
// 0..N-1 of one sequence). Throws hymba::Error naming the first position
// outside [0, P).
void position_embedding_forward(float* x, const float* table, const int64_t* positions, int64_t N, int64_t P,
                                int64_t C);

// dtable[pos(n), :] += dout[n, :]. Deterministic for any thread count.
void position_embedding_backward(float* dtable, const float* dout, const int64_t* positions, int64_t N, int64_t P,
                                 int64_t C);

}  // namespace hymba::cpu
