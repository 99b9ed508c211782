// Token embedding lookup. N tokens, V vocabulary rows, C channels.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// out[N, C] = table[ids[n], :]. Throws hymba::Error naming the first id
// outside [0, V).
void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C);

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
