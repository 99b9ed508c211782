// Plain scalar reference for the token embedding lookup.
#pragma once

#include <cstdint>

#include "core/float_formats.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/quant_q4.h"

namespace hymba::ref {

// out[N, C] = table[ids[n], :]; ids must lie in [0, V).
template <typename T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = table[static_cast<int64_t>(ids[n]) * C + c];
}

// The lookup from a table of q8 / q4 block rows (kernels/quant_blocks.h),
// element by element: scale x code, exact in float (an 11-bit scale times a
// code of at most 8 bits).
inline void embedding_forward_q8(float* out, const int32_t* ids, const cpu::BlockQ8* table, int64_t N, int64_t C) {
  const int64_t nb = cpu::q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const cpu::BlockQ8& blk = table[static_cast<int64_t>(ids[n]) * nb + c / cpu::kQ8BlockSize];
      out[n * C + c] = f16_to_f32(blk.scale) * static_cast<float>(blk.q[c % cpu::kQ8BlockSize]);
    }
}

inline void embedding_forward_q4(float* out, const int32_t* ids, const cpu::BlockQ4* table, int64_t N, int64_t C) {
  const int64_t nb = cpu::q4_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const cpu::BlockQ4& blk = table[static_cast<int64_t>(ids[n]) * nb + c / cpu::kQ4BlockSize];
      out[n * C + c] = static_cast<float>(q4_value(blk, c % cpu::kQ4BlockSize));
    }
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
