// Plain scalar reference for the token embedding lookup.
#pragma once

#include <cstdint>

namespace hymba::ref {

// out[N, C] = table[ids[n], :]; ids must lie in [0, V).
template <typename T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = table[static_cast<int64_t>(ids[n]) * C + c];
}

// x[n, :] += table[pos(n), :], pos(n) = positions[n] or n when null.
template <typename T>
void position_embedding_forward(T* x, const T* table, const int64_t* positions, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t p = positions != nullptr ? positions[n] : n;
    for (int64_t c = 0; c < C; ++c) x[n * C + c] += table[p * C + c];
  }
}

}  // namespace hymba::ref
