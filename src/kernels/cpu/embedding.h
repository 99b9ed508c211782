// Token embedding lookup. N tokens, V vocabulary rows, C channels.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// out[N, C] = table[ids[n], :]. Throws hymba::Error naming the first id
// outside [0, V).
void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C);

// dtable[ids[n], :] += dout[n, :]. Deterministic for any thread count.
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C);

}  // namespace hymba::cpu
