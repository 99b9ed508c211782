#include "kernels/cpu/embedding.h"

#include <omp.h>

#include <cstring>

#include "core/error.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Checked up front and serially: an exception must not escape an OpenMP region.
void check_ids(const int32_t* ids, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    HYMBA_CHECK(ids[n] >= 0 && ids[n] < V, "embedding: token id ", ids[n], " at position ", n,
                " is outside the vocabulary [0, ", V, ")");
}

}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t C) {
  check_ids(ids, N, V);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(out + n * C, table + static_cast<int64_t>(ids[n]) * C, static_cast<size_t>(C) * sizeof(float));
}

void embedding_forward_q8(float* out, const int32_t* ids, const BlockQ8* table, int64_t N, int64_t V, int64_t C) {
  check_ids(ids, N, V);
  const int64_t nb = q8_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n) dequantize_q8(out + n * C, table + static_cast<int64_t>(ids[n]) * nb, 1, C);
}

void embedding_forward_q4(float* out, const int32_t* ids, const BlockQ4* table, int64_t N, int64_t V, int64_t C) {
  check_ids(ids, N, V);
  const int64_t nb = q4_blocks_per_row(C);
  for (int64_t n = 0; n < N; ++n) dequantize_q4(out + n * C, table + static_cast<int64_t>(ids[n]) * nb, 1, C);
}

void embedding_forward_packed_q8(float* out, const int32_t* ids, const PackedQ8* table, int64_t N, int64_t V,
                                 int64_t C) {
  check_ids(ids, N, V);
  for (int64_t n = 0; n < N; ++n) dequantize_packed_q8(out + n * C, table, ids[n], 1, C);
}

void embedding_forward_packed_q4(float* out, const int32_t* ids, const PackedQ4* table, int64_t N, int64_t V,
                                 int64_t C) {
  check_ids(ids, N, V);
  for (int64_t n = 0; n < N; ++n) dequantize_packed_q4(out + n * C, table, ids[n], 1, C);
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t C) {
  if (dtable == nullptr) return;
  check_ids(ids, N, V);
  // Each thread owns a contiguous range of vocabulary rows and adds the
  // gradients of the tokens that hit its rows in token order. Every table row
  // therefore sees the same sequence of additions whatever the thread count,
  // and no two threads ever write the same row.
#pragma omp parallel if (N * C >= kParallelMin)
  {
    const int64_t nthreads = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t v_begin = V * tid / nthreads, v_end = V * (tid + 1) / nthreads;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t id = ids[n];
      if (id < v_begin || id >= v_end) continue;
      float* __restrict dst = dtable + id * C;
      const float* __restrict src = dout + n * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
  }
}

namespace {

void check_positions(const int64_t* positions, int64_t N, int64_t P) {
  if (positions == nullptr) {
    HYMBA_CHECK(N <= P, "position embedding: ", N, " positions exceed the table's ", P,
                " (max_position_embeddings)");
    return;
  }
  for (int64_t n = 0; n < N; ++n)
    HYMBA_CHECK(positions[n] >= 0 && positions[n] < P, "position embedding: position ", positions[n], " of row ", n,
                " is outside [0, ", P, ") (max_position_embeddings)");
}

}  // namespace

void position_embedding_forward(float* x, const float* table, const int64_t* positions, int64_t N, int64_t P,
                                int64_t C) {
  check_positions(positions, N, P);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* __restrict src = table + (positions != nullptr ? positions[n] : n) * C;
    float* __restrict dst = x + n * C;
    for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
  }
}

void position_embedding_backward(float* dtable, const float* dout, const int64_t* positions, int64_t N, int64_t P,
                                 int64_t C) {
  if (dtable == nullptr) return;
  check_positions(positions, N, P);
  if (positions == nullptr) {
    // Row n owns table row n: no two rows meet.
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) dtable[n * C + c] += dout[n * C + c];
    return;
  }
  // Rows may share a position: each thread owns a range of table rows and
  // adds in row order (as embedding_backward does).
#pragma omp parallel if (N * C >= kParallelMin)
  {
    const int64_t nthreads = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t p_begin = P * tid / nthreads, p_end = P * (tid + 1) / nthreads;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t p = positions[n];
      if (p < p_begin || p >= p_end) continue;
      for (int64_t c = 0; c < C; ++c) dtable[p * C + c] += dout[n * C + c];
    }
  }
}

}  // namespace hymba::cpu
