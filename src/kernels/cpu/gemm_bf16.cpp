#include "kernels/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/build_info.h"
#include "core/error.h"
#include "core/float_formats.h"

namespace hymba::cpu {

namespace {

// A micro tile is kMr rows by kNr columns of C: 24 of the 32 AVX-512
// registers accumulate, 2 hold B's pairs and 1 A's broadcast pair.
constexpr int64_t kMr = 12;
constexpr int64_t kNr = 32;
// A block of kKcPairs pairs of k: a packed B panel (kNr x 2 kKcPairs bf16,
// 32 KiB) stays in L1 while a thread's A panels (kMc rows, 96 KiB) stream
// from L2; the packed B block (all N columns) is shared by the threads.
constexpr int64_t kKcPairs = kBf16GemmBlockPairs;
constexpr int64_t kMc = 8 * kMr;
// Below this many multiply-adds one thread does the whole product.
constexpr int64_t kParallelMin = int64_t{1} << 18;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// f32_to_bf16 (core/float_formats.h) inline, so that packing loops vectorize.
inline uint32_t bf16_bits(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  return (b & 0x7fffffffu) > 0x7f800000u ? ((b >> 16) | 0x0040u) : rounded;
}

// Elements k (low half) and k + 1 (high half) as bf16: vdpbf16ps's pair.
inline uint32_t pair_bits(float even, float odd) { return bf16_bits(even) | (bf16_bits(odd) << 16); }

// Rows [r0, r0 + rows) of op(A), pairs [p0, p0 + np), as micro panels of
// kMr rows (panel m at out + m * np), rows past `rows` and k past K zeros.
// A panel holds pair p of its row i at [i * np + p] (row-major: A stored
// as is, whose rows run along k) or at [p * kMr + i] (pair-major: A stored
// transposed, whose rows run along i), so that packing reads and writes
// memory in order either way.
void pack_a(uint32_t* out, const GemmOperand& A, int64_t r0, int64_t rows, int64_t p0, int64_t np, int64_t K) {
  const int64_t k0 = 2 * p0, whole = std::min(np, (K - k0) / 2);  // pairs with both elements inside K
  const int64_t padded = round_up(rows, kMr);
  if (!A.transposed) {
    std::fill(out + rows * np, out + padded * np, 0u);  // a ragged panel's missing rows
    for (int64_t i = 0; i < rows; ++i) {
      uint32_t* dst = out + i * np;
      const float* src = A.data + (r0 + i) * A.ld + k0;
      for (int64_t p = 0; p < whole; ++p) dst[p] = pair_bits(src[2 * p], src[2 * p + 1]);
      if (whole < np) dst[whole] = pair_bits(src[2 * whole], 0.0f);
    }
    return;
  }
  if (padded > rows) std::fill(out + (padded - kMr) * np, out + padded * np, 0u);
  for (int64_t p = 0; p < np; ++p) {
    const float* even = A.data + (k0 + 2 * p) * A.ld + r0;
    const float* odd = p < whole ? even + A.ld : nullptr;
    for (int64_t m = 0; m < rows; m += kMr) {
      uint32_t* dst = out + m * np + p * kMr;
      const int64_t n = std::min(kMr, rows - m);
      if (odd != nullptr) {
        for (int64_t i = 0; i < n; ++i) dst[i] = pair_bits(even[m + i], odd[m + i]);
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = pair_bits(even[m + i], 0.0f);
      }
    }
  }
}

// Columns [j0, j0 + cols) of op(B) (cols <= kNr), pairs [p0, p0 + np), as
// one panel: pair p of column j at panel[p * kNr + j]; columns past `cols`
// and k past K are zeros.
void pack_b(uint32_t* panel, const GemmOperand& B, int64_t j0, int64_t cols, int64_t p0, int64_t np, int64_t K) {
  const int64_t k0 = 2 * p0, whole = std::min(np, (K - k0) / 2);
  if (cols < kNr) std::fill(panel, panel + np * kNr, 0u);
  if (B.transposed) {
    for (int64_t j = 0; j < cols; ++j) {
      const float* src = B.data + (j0 + j) * B.ld + k0;
      for (int64_t p = 0; p < whole; ++p) panel[p * kNr + j] = pair_bits(src[2 * p], src[2 * p + 1]);
      if (whole < np) panel[whole * kNr + j] = pair_bits(src[2 * whole], 0.0f);
    }
    return;
  }
  for (int64_t p = 0; p < np; ++p) {
    const float* even = B.data + (k0 + 2 * p) * B.ld + j0;
    uint32_t* dst = panel + p * kNr;
    if (p < whole) {
      const float* odd = even + B.ld;
      for (int64_t j = 0; j < cols; ++j) dst[j] = pair_bits(even[j], odd[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) dst[j] = pair_bits(even[j], 0.0f);
    }
  }
}

float low_bf16(uint32_t pair) { return bf16_to_f32(static_cast<uint16_t>(pair & 0xffffu)); }
float high_bf16(uint32_t pair) { return bf16_to_f32(static_cast<uint16_t>(pair >> 16)); }

// C[rows, cols] += A panel · B panel over np pairs, in the documented order
// (C = the product when `overwrite`: the first block of a beta-0 product,
// which spares a pass that zeroes C first).
template <bool kPairMajor>
void tile_portable(const uint32_t* a, const uint32_t* b, int64_t np, float* c, int64_t ldc, int64_t rows,
                   int64_t cols, bool overwrite) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < np; ++p) {
    for (int64_t i = 0; i < kMr; ++i) {
      const uint32_t ap = kPairMajor ? a[p * kMr + i] : a[i * np + p];
      for (int64_t j = 0; j < kNr; ++j) {
        const uint32_t bp = b[p * kNr + j];
        acc[i][j] += high_bf16(ap) * high_bf16(bp);
        acc[i][j] += low_bf16(ap) * low_bf16(bp);
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = overwrite ? acc[i][j] : c[i * ldc + j] + acc[i][j];
}

__attribute__((target("avx512f,avx512bf16"))) __m512bh as_bh(__m512i x) { return reinterpret_cast<__m512bh&>(x); }

template <bool kPairMajor>
__attribute__((target("avx512f,avx512bf16"))) void tile_avx512bf16(const uint32_t* a, const uint32_t* b,
                                                                    int64_t np, float* c, int64_t ldc,
                                                                    int64_t rows, int64_t cols, bool overwrite) {
  __m512 acc[kMr][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    const __m512bh b0 = as_bh(_mm512_loadu_si512(b + p * kNr));
    const __m512bh b1 = as_bh(_mm512_loadu_si512(b + p * kNr + 16));
#pragma GCC unroll 12
    for (int64_t i = 0; i < kMr; ++i) {
      const uint32_t ap = kPairMajor ? a[p * kMr + i] : a[i * np + p];
      const __m512bh ai = as_bh(_mm512_set1_epi32(static_cast<int>(ap)));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const auto mask_of = [](int64_t n) {
    return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1);
  };
  const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    if (!overwrite) {
      acc[i][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), acc[i][0]);
      acc[i][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), acc[i][1]);
    }
    _mm512_mask_storeu_ps(row, m0, acc[i][0]);
    _mm512_mask_storeu_ps(row + 16, m1, acc[i][1]);
  }
}

// A thread's packing buffer `which` (0: B, shared by the team; 1: its A),
// kept between calls: a fresh one per call would be zeroed and faulted in
// again, which cost a seed-scale training step more than the packing.
uint32_t* packing_buffer(int which, int64_t words) {
  thread_local std::vector<uint32_t> buffers[2];
  std::vector<uint32_t>& b = buffers[which];
  if (static_cast<int64_t>(b.size()) < words) b.resize(static_cast<size_t>(words));
  return b.data();
}

using TileFn = void (*)(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, int64_t, int64_t, bool);

// C = beta * C (0 never reads C). Only where no block overwrites C: K == 0,
// or a beta other than 0 and 1.
void scale_c(float* C, int64_t ldc, int64_t M, int64_t N, float beta, bool parallel) {
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < M; ++r) {
    float* row = C + r * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + N, 0.0f);
    } else {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

// One thread's rows [r0, r0 + rows) of C against the packed B block.
void multiply_rows(TileFn tile, uint32_t* apack, const uint32_t* bpack, const GemmOperand& A, int64_t r0,
                   int64_t rows, int64_t p0, int64_t np, int64_t K, float* C, int64_t ldc, int64_t N,
                   bool overwrite) {
  pack_a(apack, A, r0, rows, p0, np, K);
  for (int64_t j = 0; j < N; j += kNr) {
    const uint32_t* panel = bpack + j * np;
    for (int64_t m = 0; m < rows; m += kMr) {
      tile(apack + m * np, panel, np, C + (r0 + m) * ldc + j, ldc, std::min(kMr, rows - m), std::min(kNr, N - j),
           overwrite);
    }
  }
}

}  // namespace

bool bf16_gemm_isa_available(Bf16GemmIsa isa) {
  return isa == Bf16GemmIsa::kPortable || cpu_vector_features_here().avx512_bf16;
}

Bf16GemmIsa best_bf16_gemm_isa() {
  static const Bf16GemmIsa best =
      bf16_gemm_isa_available(Bf16GemmIsa::kAvx512Bf16) ? Bf16GemmIsa::kAvx512Bf16 : Bf16GemmIsa::kPortable;
  return best;
}

std::vector<Bf16GemmIsa> bf16_gemm_isas_here() {
  std::vector<Bf16GemmIsa> isas{Bf16GemmIsa::kPortable};
  if (bf16_gemm_isa_available(Bf16GemmIsa::kAvx512Bf16)) isas.push_back(Bf16GemmIsa::kAvx512Bf16);
  return isas;
}

const char* to_string(Bf16GemmIsa isa) { return isa == Bf16GemmIsa::kAvx512Bf16 ? "avx512-bf16" : "portable"; }

void gemm_bf16(int64_t M, int64_t N, int64_t K, GemmOperand A, GemmOperand B, float beta, float* C, int64_t ldc,
               Bf16GemmIsa isa) {
  HYMBA_CHECK(bf16_gemm_isa_available(isa), "gemm_bf16: this CPU cannot run ", to_string(isa));
  if (M <= 0 || N <= 0) return;
  const bool parallel = M * N * K >= kParallelMin;
  if (beta != 1.0f && (K <= 0 || beta != 0.0f)) scale_c(C, ldc, M, N, beta, parallel);
  if (K <= 0) return;
  const bool pair_major = A.transposed;  // pack_a's layout
  const TileFn tile = isa == Bf16GemmIsa::kAvx512Bf16 ? (pair_major ? tile_avx512bf16<true> : tile_avx512bf16<false>)
                                                      : (pair_major ? tile_portable<true> : tile_portable<false>);
  const int64_t pairs = (K + 1) / 2;
  uint32_t* bpack = packing_buffer(0, std::min(kKcPairs, pairs) * round_up(N, kNr));
#pragma omp parallel if (parallel)
  {
    uint32_t* apack = packing_buffer(1, kMc * std::min(kKcPairs, pairs));
    for (int64_t p0 = 0; p0 < pairs; p0 += kKcPairs) {
      const int64_t np = std::min(kKcPairs, pairs - p0);
#pragma omp for schedule(static)
      for (int64_t j = 0; j < N; j += kNr) pack_b(bpack + j * np, B, j, std::min(kNr, N - j), p0, np, K);
#pragma omp for schedule(static)
      for (int64_t r0 = 0; r0 < M; r0 += kMc) {
        multiply_rows(tile, apack, bpack, A, r0, std::min(kMc, M - r0), p0, np, K, C, ldc, N,
                      beta == 0.0f && p0 == 0);
      }
    }
  }
}

}  // namespace hymba::cpu
