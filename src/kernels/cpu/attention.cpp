// Flash-style masked attention on the CPU.
//
// Queries go in blocks of kQueryBlock; each block visits only the key ranges
// that some of its queries can see (the meta prefix and the sliding-window
// band, merged when they touch) in tiles of up to kKeyTile keys, so the cost
// is O(T * (window + meta + kQueryBlock)) and nothing T x T ever exists.
// The visible keys are first packed per (batch, kv head) into the layouts the
// products read (K transposed, rows zero-padded to a multiple of kRegCols).
// Every product (scores, P V and the backward's five) is one register-blocked
// kernel, gemm, on rows of 16 floats: measured, it ran about 1.5x faster than
// per-tile cblas_sgemm calls, whose fixed cost dominates at these tile sizes.
// Block/tile sizes were picked by measurement (AVX2, one and two threads).
// Results never depend on the thread count: each output element is produced
// by exactly one work item, in a fixed order.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include "core/aligned.h"
#include "core/error.h"
#include "kernels/cpu/vec8.h"
#include "kernels/reference/attention_mask.h"

// The 32-byte vector helpers below are internal to this file, so the ABI note
// GCC and Clang give for them on targets without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace hymba::cpu {
namespace {

constexpr int64_t kQueryBlock = 24;  // queries sharing one pass over the keys (multiple of kRegRows)
constexpr int64_t kKeyTile = 64;     // keys per score tile
// gemm accumulator block: rows (as many as the vector registers hold with
// the B row and a broadcast beside them) ...
#if defined(__AVX512F__)
constexpr int kRegRows = 12;
#else
constexpr int kRegRows = 6;
#endif
constexpr int64_t kRegCols = 16;     // ... by columns (one Vec16)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Vec8 (kernels/cpu/vec8.h): GCC, with its default -ftrapping-math, leaves
// the softmax loops scalar and spills float[4][16] accumulators.
inline Vec8 max8(Vec8 a, Vec8 b) { return a > b ? a : b; }
inline float max_lanes(Vec8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, v[i]);
  return m;
}
inline float sum_lanes(Vec8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// exp(x) by the Cephes expf polynomial (about 1 ulp). Inputs below kExpFlush
// give exactly 0, which also maps -inf (masked scores) to 0. Products a * b + c
// are contracted to FMA by GCC and Clang alike.
constexpr float kExpFlush = -87.0f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline Vec8 fast_exp(Vec8 x) {
  const Vec8 lo = splat8(kExpFlush), hi = splat8(88.0f);
  const Vec8 clamped = x < lo ? lo : (x > hi ? hi : x);
  const Vec8 n = (clamped * 1.44269504088896341f + kRoundMagic) - kRoundMagic;  // round(x / ln 2)
  Vec8 r = n * -0.693359375f + clamped;
  r = n * 2.12194440e-4f + r;
  Vec8 y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const Int8 two_n = (__builtin_convertvector(n, Int8) + 127) << 23;
  const Int8 keep = x >= lo;  // all ones where kept
  return y * std::bit_cast<Vec8>(two_n & keep);
}
inline float fast_exp(float x) { return fast_exp(splat8(x))[0]; }

// C[R x N] (+)= A[R x K] B[K x N]. A's element (r, p) sits at
// A[r * a_row + p * a_col], so A may be read transposed at no cost (its
// elements are broadcast one at a time); B and C are row-major, N a multiple
// of kRegCols. Each column strip keeps its R accumulators (one Vec16 a row:
// a single register with AVX-512, a pair with AVX2) for the whole K loop.
template <int R, bool kAccumulate>
void gemm_rows(float* C, int64_t ldc, const float* A, int64_t a_row, int64_t a_col, const float* B, int64_t ldb,
               int64_t N, int64_t K) {
  static_assert(kRegCols == 16, "one Vec16 accumulator a row");
  for (int64_t j = 0; j < N; j += kRegCols) {
    Vec16 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = kAccumulate ? load16(C + r * ldc + j) : Vec16{};
    for (int64_t p = 0; p < K; ++p) {
      const Vec16 b = load16(B + p * ldb + j);
      for (int r = 0; r < R; ++r) acc[r] = A[r * a_row + p * a_col] * b + acc[r];
    }
    for (int r = 0; r < R; ++r) store16(C + r * ldc + j, acc[r]);
  }
}

using RowsKernel = void (*)(float*, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t);

// gemm_rows<1>, ..., gemm_rows<kRegRows>, by row count - 1.
template <bool kAccumulate, int... kRowsLess1>
constexpr std::array<RowsKernel, sizeof...(kRowsLess1)> rows_kernels(std::integer_sequence<int, kRowsLess1...>) {
  return {&gemm_rows<kRowsLess1 + 1, kAccumulate>...};
}

// C[M x N] (+)= A[M x K] B[K x N] for any M (A strides as in gemm_rows).
template <bool kAccumulate>
void gemm(float* C, int64_t ldc, const float* A, int64_t a_row, int64_t a_col, const float* B, int64_t ldb,
          int64_t M, int64_t N, int64_t K) {
  static constexpr auto kKernels = rows_kernels<kAccumulate>(std::make_integer_sequence<int, kRegRows>{});
  int64_t i = 0;
  for (; i + kRegRows <= M; i += kRegRows)
    gemm_rows<kRegRows, kAccumulate>(C + i * ldc, ldc, A + i * a_row, a_row, a_col, B, ldb, N, K);
  if (i < M) kKernels[M - i - 1](C + i * ldc, ldc, A + i * a_row, a_row, a_col, B, ldb, N, K);
}

// The band of keys [band_lo, band_hi) that query position p sees beside the
// meta prefix (unclamped: lo may be negative, hi past Tk). Both grow with p,
// except that meta queries under meta_sees_all see [0, Tk).
int64_t band_lo(int64_t p, const AttnArgs& a) {
  if (a.meta_sees_all && p < a.num_meta) return 0;
  return a.window > 0 ? p - a.window + 1 : 0;
}
int64_t band_hi(int64_t p, const AttnArgs& a) {
  if (a.meta_sees_all && p < a.num_meta) return a.Tk;
  return a.window > 0 && a.window_symmetric ? p + a.window : p + 1;
}

// Key ranges [lo, hi) that queries at absolute positions [p_first, p_last]
// can see: the meta prefix and the window band, merged when they touch.
struct KeyRanges {
  int64_t lo[2] = {0, 0}, hi[2] = {0, 0};
  int count = 0;
};

KeyRanges visible_key_ranges(int64_t p_first, int64_t p_last, const AttnArgs& a) {
  KeyRanges out;
  // No query of the block sees keys >= end (band_hi is largest at one end).
  const int64_t end = std::min(std::max(band_hi(p_first, a), band_hi(p_last, a)), a.Tk);
  if (end <= 0) return out;
  const int64_t meta_end = std::min(a.num_meta, end);
  const int64_t lo = std::max<int64_t>(0, band_lo(p_first, a));
  if (meta_end > 0 && lo > meta_end) {
    out.lo[out.count] = 0, out.hi[out.count] = meta_end, ++out.count;
  } else if (meta_end > 0) {
    out.lo[0] = 0, out.hi[0] = end, out.count = 1;
    return out;
  }
  if (lo < end) out.lo[out.count] = lo, out.hi[out.count] = end, ++out.count;
  return out;
}

// Visible keys of the query at position p inside the tile of n keys starting
// at j0, in tile coordinates: [0, meta_end) and [band_lo, band_end).
struct RowMask {
  int32_t meta_end, band_lo, band_end;
  bool any() const { return meta_end > 0 || band_lo < band_end; }
};

RowMask row_mask(int64_t p, int64_t j0, int64_t n, const AttnArgs& a) {
  auto tile_coord = [&](int64_t j) { return static_cast<int32_t>(std::clamp<int64_t>(j - j0, 0, n)); };
  return {tile_coord(std::min(a.num_meta, p + 1)), tile_coord(band_lo(p, a)), tile_coord(band_hi(p, a))};
}

// Attention dropout over a row of a tile (keys j0 .. j0 + width - 1, those
// from n on padding): mult[c] = 1 / (1 - rate) where the probability is
// kept, 0 where dropped (reference/attention_mask.h draws the mask).
void dropout_row(float* mult, int64_t width, int64_t n, int64_t j0, uint64_t row_key, float rate) {
  const float keep = static_cast<float>(1.0 / (1.0 - static_cast<double>(rate)));
  for (int64_t c = 0; c < width; ++c) mult[c] = c < n && ref::dropout_keeps(row_key, j0 + c, rate) ? keep : 0.0f;
}

// Sets invisible scores of a row (width a multiple of 8) to -inf and returns
// the maximum.
float mask_row_and_max(float* s, int64_t width, const RowMask& m) {
  const Int8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  Vec8 row_max = splat8(kNegInf);
  for (int64_t c0 = 0; c0 < width; c0 += 8) {
    const Int8 col = lane + static_cast<int32_t>(c0);
    const Int8 visible = (col < m.meta_end) | ((col >= m.band_lo) & (col < m.band_end));
    const Vec8 x = visible ? load8(s + c0) : splat8(kNegInf);
    store8(s + c0, x);
    row_max = max8(row_max, x);
  }
  return max_lanes(row_max);
}

// s[c] <- exp(s[c] - shift) over a row (width a multiple of 8); returns the
// sum, in a fixed order.
float exp_row_and_sum(float* s, int64_t width, float shift) {
  Vec8 sum = {};
  for (int64_t c0 = 0; c0 < width; c0 += 8) {
    const Vec8 p = fast_exp(load8(s + c0) - shift);
    store8(s + c0, p);
    sum += p;
  }
  return sum_lanes(sum);
}

void check_args(const AttnArgs& a) {
  HYMBA_CHECK(a.B >= 0 && a.Tq >= 0 && a.Tk >= 0 && a.q_offset >= 0, "attention: negative size or offset");
  HYMBA_CHECK(a.Hq > 0 && a.Hkv > 0 && a.Hq % a.Hkv == 0, "attention: Hq (", a.Hq,
              ") must be a positive multiple of Hkv (", a.Hkv, ")");
  HYMBA_CHECK(a.Dqk > 0 && a.Dv > 0, "attention: head dims must be positive");
  HYMBA_CHECK(a.ld_q >= a.Hq * a.Dqk && a.ld_k >= a.Hkv * a.Dqk && a.ld_v >= a.Hkv * a.Dv,
              "attention: a q/k/v row stride is smaller than the heads it holds");
  HYMBA_CHECK(a.num_meta >= 0, "attention: negative num_meta");
  HYMBA_CHECK(a.dropout >= 0.0f && a.dropout < 1.0f, "attention: dropout rate ", a.dropout, " is not in [0, 1)");
}

float effective_scale(const AttnArgs& a) {
  return a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.Dqk));
}

// Copies n rows of `width` floats (source row stride ld) into dst (row stride
// ld_dst), multiplied by factor.
void load_rows(float* dst, int64_t ld_dst, const float* src, int64_t ld, int64_t n, int64_t width,
               float factor = 1.0f) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < width; ++d) dst[r * ld_dst + d] = factor * src[r * ld + d];
}

// dst[d * ld_dst + r] = src[r * ld + d] for n rows of `width` floats, in
// groups of kRegCols rows so each destination line is written whole.
void load_rows_transposed(float* dst, int64_t ld_dst, const float* src, int64_t ld, int64_t n, int64_t width) {
  for (int64_t r0 = 0; r0 < n; r0 += kRegCols) {
    const int64_t rows = std::min(kRegCols, n - r0);
    for (int64_t d = 0; d < width; ++d)
      for (int64_t r = r0; r < r0 + rows; ++r) dst[d * ld_dst + r] = src[r * ld + d];
  }
}

// Carves buffers out of one zero-filled, 64-byte aligned allocation; padding
// that no copy writes therefore stays zero.
class Scratch {
 public:
  explicit Scratch(int64_t total) : storage_(make_aligned_floats(static_cast<size_t>(total))) {}
  float* take(int64_t n) {
    float* p = storage_.get() + used_;
    used_ += round_up(n, kRegCols);  // keeps every buffer 64-byte aligned
    return p;
  }
  static int64_t size_of(std::initializer_list<int64_t> sizes) {
    int64_t total = 0;
    for (int64_t n : sizes) total += round_up(n, kRegCols);
    return total;
  }

 private:
  AlignedFloats storage_;
  int64_t used_ = 0;
};

// Which keys get packed: only those some query of the call can see (for a
// decode step with a window that is window + meta keys, not the whole cache),
// stored contiguously. Every block's key range lies inside one of these
// ranges, because a block's band starts at or after the call's band.
// Packed buffers per (batch, kv head): k_t [Dqk][ld_t] (K transposed; a tile
// may read up to kRegCols - 1 columns past its keys, hence the padding),
// k_rows [count][dqk_pad], v_t [Dv][ld_t], v_rows [count][dv_pad].
struct KeyPacking {
  KeyRanges ranges;
  int64_t start[2] = {0, 0};  // packed column of ranges.lo[r]
  int64_t count = 0;          // keys packed
  int64_t ld_t = 0;           // row stride of the transposed buffers
  int64_t dqk_pad = 0, dv_pad = 0;

  explicit KeyPacking(const AttnArgs& a)
      : ranges(visible_key_ranges(a.q_offset, a.q_offset + a.Tq - 1, a)),
        dqk_pad(round_up(a.Dqk, kRegCols)),
        dv_pad(round_up(a.Dv, kRegCols)) {
    for (int r = 0; r < ranges.count; ++r) start[r] = count, count += ranges.hi[r] - ranges.lo[r];
    ld_t = round_up(count, kRegCols) + kRegCols;  // the extra also keeps the stride off powers of two
  }
  // Packed column of key j0 (which must be visible to some query).
  int64_t column(int64_t j0) const {
    const int r = ranges.count == 2 && j0 >= ranges.lo[1] ? 1 : 0;
    return start[r] + j0 - ranges.lo[r];
  }
  // Packs the keys of `src` (rows of `width` floats, stride ld, key 0 first)
  // transposed into dst [width][ld_t] and/or as rows into dst_rows [count][ld_rows].
  void pack(float* dst_t, float* dst_rows, int64_t ld_rows, const float* src, int64_t ld, int64_t width) const {
    for (int r = 0; r < ranges.count; ++r) {
      const float* first = src + ranges.lo[r] * ld;
      const int64_t n = ranges.hi[r] - ranges.lo[r];
      if (dst_t != nullptr) load_rows_transposed(dst_t + start[r], ld_t, first, ld, n, width);
      if (dst_rows != nullptr) load_rows(dst_rows + start[r] * ld_rows, ld_rows, first, ld, n, width);
    }
  }
  // dst[key j] += acc[column(j)] for every packed key (rows of `width`).
  void unpack_add(float* dst, int64_t ld, const float* acc, int64_t ld_acc, int64_t width) const {
    for (int r = 0; r < ranges.count; ++r)
      for (int64_t j = ranges.lo[r]; j < ranges.hi[r]; ++j) {
        const float* row = acc + (start[r] + j - ranges.lo[r]) * ld_acc;
        for (int64_t d = 0; d < width; ++d) dst[j * ld + d] += row[d];
      }
  }
};

}  // namespace

void attention_forward(float* out, int64_t ld_out, float* lse, const AttnArgs& a) {
  check_args(a);
  HYMBA_CHECK(ld_out >= a.Hq * a.Dv, "attention_forward: ld_out smaller than Hq * Dv");
  const float scale = effective_scale(a);
  const int64_t group = a.Hq / a.Hkv;
  const KeyPacking pack(a);
  const int64_t dv_pad = pack.dv_pad;
  const int64_t num_blocks = (a.Tq + kQueryBlock - 1) / kQueryBlock;
  const int64_t num_items = a.B * a.Hq * num_blocks;
  if (num_items == 0) return;

  // Packed K/V for every (b, kv head), shared by all query heads and blocks.
  const int64_t k_t_size = round_up(a.Dqk * pack.ld_t, kRegCols);
  const int64_t packed_per_head = k_t_size + round_up(pack.count * dv_pad, kRegCols);
  AlignedFloats packed = make_aligned_floats(static_cast<size_t>(std::max<int64_t>(1, a.B * a.Hkv * packed_per_head)));
  const int64_t scratch_size = Scratch::size_of(
      {kQueryBlock * a.Dqk, kQueryBlock * kKeyTile, kQueryBlock * dv_pad, kQueryBlock, kQueryBlock, kKeyTile});

#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < a.B * a.Hkv; ++bg) {
      const int64_t b = bg / a.Hkv, g = bg % a.Hkv;
      float* k_t = packed.get() + bg * packed_per_head;
      pack.pack(k_t, nullptr, 0, a.k + b * a.Tk * a.ld_k + g * a.Dqk, a.ld_k, a.Dqk);
      pack.pack(nullptr, k_t + k_t_size, dv_pad, a.v + b * a.Tk * a.ld_v + g * a.Dv, a.ld_v, a.Dv);
    }  // implicit barrier: packing is complete before any block reads it

    Scratch scratch(scratch_size);
    float* q_blk = scratch.take(kQueryBlock * a.Dqk);     // scale * q, [query][d]
    float* scores = scratch.take(kQueryBlock * kKeyTile);  // scores, then probabilities
    float* o_acc = scratch.take(kQueryBlock * dv_pad);    // unnormalised output
    float* row_max = scratch.take(kQueryBlock);
    float* row_sum = scratch.take(kQueryBlock);
    float* drop = scratch.take(kKeyTile);  // dropout multipliers of one row

    // Dynamic scheduling balances causal blocks; each item writes only its
    // own outputs, so the result does not depend on which thread runs it.
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < num_items; ++item) {
      const int64_t b = item / (a.Hq * num_blocks);
      const int64_t h = item / num_blocks % a.Hq;
      const int64_t i0 = item % num_blocks * kQueryBlock;
      const int64_t nq = std::min(kQueryBlock, a.Tq - i0);
      const int64_t g = h / group;
      const int64_t p0 = a.q_offset + i0;
      const float* k_t = packed.get() + (b * a.Hkv + g) * packed_per_head;
      const float* v_rows = k_t + k_t_size;

      load_rows(q_blk, a.Dqk, a.q + (b * a.Tq + i0) * a.ld_q + h * a.Dqk, a.ld_q, nq, a.Dqk, scale);
      std::fill(o_acc, o_acc + nq * dv_pad, 0.0f);
      std::fill(row_max, row_max + nq, kNegInf);
      std::fill(row_sum, row_sum + nq, 0.0f);

      const KeyRanges ranges = visible_key_ranges(p0, p0 + nq - 1, a);
      for (int rg = 0; rg < ranges.count; ++rg)
        for (int64_t j0 = ranges.lo[rg]; j0 < ranges.hi[rg]; j0 += kKeyTile) {
          const int64_t n = std::min(kKeyTile, ranges.hi[rg] - j0);
          const int64_t width = round_up(n, kRegCols);
          const int64_t col = pack.column(j0);
          gemm<false>(scores, kKeyTile, q_blk, a.Dqk, 1, k_t + col, pack.ld_t, nq, width, a.Dqk);

          // Online softmax: rescale what was accumulated under the old max.
          for (int64_t r = 0; r < nq; ++r) {
            float* s = scores + r * kKeyTile;
            const RowMask mask = row_mask(p0 + r, j0, n, a);
            if (!mask.any()) {
              std::fill(s, s + width, 0.0f);
              continue;
            }
            const float new_max = std::max(row_max[r], mask_row_and_max(s, width, mask));
            const float correction = fast_exp(row_max[r] - new_max);
            row_sum[r] = row_sum[r] * correction + exp_row_and_sum(s, width, new_max);
            row_max[r] = new_max;
            // Dropout after the softmax: the sum (and lse) keep every probability.
            if (a.dropout > 0.0f) {
              dropout_row(drop, width, n, j0, ref::dropout_row_key(a.dropout_seed, b, h, p0 + r), a.dropout);
              for (int64_t c = 0; c < width; ++c) s[c] *= drop[c];
            }
            if (correction != 1.0f)
              for (int64_t d = 0; d < dv_pad; ++d) o_acc[r * dv_pad + d] *= correction;
          }
          gemm<true>(o_acc, dv_pad, scores, kKeyTile, 1, v_rows + col * dv_pad, dv_pad, nq, dv_pad, n);
        }

      for (int64_t r = 0; r < nq; ++r) {
        float* o = out + (b * a.Tq + i0 + r) * ld_out + h * a.Dv;
        const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
        for (int64_t d = 0; d < a.Dv; ++d) o[d] = o_acc[r * dv_pad + d] * inv;
        if (lse != nullptr) lse[(b * a.Hq + h) * a.Tq + i0 + r] = row_max[r] + std::log(row_sum[r]);
      }
    }
  }
}

void attention_backward(float* dq, int64_t ld_dq, float* dk, int64_t ld_dk, float* dv, int64_t ld_dv,
                        const float* dout, int64_t ld_dout, const float* out, int64_t ld_out, const float* lse,
                        const AttnArgs& a) {
  check_args(a);
  if (dq == nullptr && dk == nullptr && dv == nullptr) return;
  HYMBA_CHECK(dout != nullptr && out != nullptr && lse != nullptr, "attention_backward: needs dout, out and lse");
  const float scale = effective_scale(a);
  const int64_t group = a.Hq / a.Hkv;
  const KeyPacking pack(a);
  const int64_t dqk_pad = pack.dqk_pad, dv_pad = pack.dv_pad;
  const int64_t num_items = a.B * a.Hkv;
  if (num_items == 0 || a.Tq == 0) return;
  const int64_t scratch_size = Scratch::size_of(
      {a.Dqk * pack.ld_t, pack.count * dqk_pad, a.Dv * pack.ld_t, pack.count * dqk_pad, pack.count * dv_pad,
       kQueryBlock * dqk_pad, kQueryBlock * dv_pad, kQueryBlock, kQueryBlock, kQueryBlock * kKeyTile,
       kQueryBlock * kKeyTile, kQueryBlock * dqk_pad, kKeyTile});

#pragma omp parallel
  {
    Scratch scratch(scratch_size);
    // Per (b, kv head): packed K/V and the dK/dV sums over the group's heads.
    float* k_t = scratch.take(a.Dqk * pack.ld_t);       // [d][key]
    float* k_rows = scratch.take(pack.count * dqk_pad);  // [key][d]
    float* v_t = scratch.take(a.Dv * pack.ld_t);        // [d][key]
    float* dk_acc = scratch.take(pack.count * dqk_pad);  // [key][d]
    float* dv_acc = scratch.take(pack.count * dv_pad);
    // Per query block.
    float* q_blk = scratch.take(kQueryBlock * dqk_pad);  // scale * q, [query][d]
    float* dout_blk = scratch.take(kQueryBlock * dv_pad);
    float* row_delta = scratch.take(kQueryBlock);  // D_i = dout_i . out_i
    float* row_lse = scratch.take(kQueryBlock);
    float* probs = scratch.take(kQueryBlock * kKeyTile);
    float* dscores = scratch.take(kQueryBlock * kKeyTile);  // dP, then dS = P (dP - D)
    float* dq_acc = scratch.take(kQueryBlock * dqk_pad);
    float* drop = scratch.take(kKeyTile);  // dropout multipliers of one row

    // One item per (b, kv head): its dk/dv rows have a single writer, and it
    // loops over the group's query heads in order, so no atomics are needed.
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < num_items; ++item) {
      const int64_t b = item / a.Hkv;
      const int64_t g = item % a.Hkv;
      const float* k_src = a.k + b * a.Tk * a.ld_k + g * a.Dqk;
      const float* v_src = a.v + b * a.Tk * a.ld_v + g * a.Dv;
      pack.pack(k_t, k_rows, dqk_pad, k_src, a.ld_k, a.Dqk);
      pack.pack(v_t, nullptr, 0, v_src, a.ld_v, a.Dv);
      std::fill(dk_acc, dk_acc + pack.count * dqk_pad, 0.0f);
      std::fill(dv_acc, dv_acc + pack.count * dv_pad, 0.0f);

      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < a.Tq; i0 += kQueryBlock) {
          const int64_t nq = std::min(kQueryBlock, a.Tq - i0);
          const int64_t p0 = a.q_offset + i0;
          const int64_t row0 = b * a.Tq + i0;
          load_rows(q_blk, dqk_pad, a.q + row0 * a.ld_q + h * a.Dqk, a.ld_q, nq, a.Dqk, scale);
          load_rows(dout_blk, dv_pad, dout + row0 * ld_dout + h * a.Dv, ld_dout, nq, a.Dv);
          for (int64_t r = 0; r < nq; ++r) {
            const float* o = out + (row0 + r) * ld_out + h * a.Dv;
            float delta = 0.0f;
            for (int64_t d = 0; d < a.Dv; ++d) delta += dout_blk[r * dv_pad + d] * o[d];
            row_delta[r] = delta;
            row_lse[r] = lse[(b * a.Hq + h) * a.Tq + i0 + r];
          }
          std::fill(dq_acc, dq_acc + nq * dqk_pad, 0.0f);

          const KeyRanges ranges = visible_key_ranges(p0, p0 + nq - 1, a);
          for (int rg = 0; rg < ranges.count; ++rg)
            for (int64_t j0 = ranges.lo[rg]; j0 < ranges.hi[rg]; j0 += kKeyTile) {
              const int64_t n = std::min(kKeyTile, ranges.hi[rg] - j0);
              const int64_t width = round_up(n, kRegCols);
              const int64_t col = pack.column(j0);
              // P = exp(scale q.k - lse), recomputed exactly as the forward
              // computed the scores; dP = dout v^T.
              gemm<false>(probs, kKeyTile, q_blk, dqk_pad, 1, k_t + col, pack.ld_t, nq, width, a.Dqk);
              gemm<false>(dscores, kKeyTile, dout_blk, dv_pad, 1, v_t + col, pack.ld_t, nq, width, a.Dv);
              for (int64_t r = 0; r < nq; ++r) {
                float* p = probs + r * kKeyTile;
                float* ds = dscores + r * kKeyTile;
                const RowMask mask = row_mask(p0 + r, j0, n, a);
                if (mask.any()) {
                  mask_row_and_max(p, width, mask);
                  exp_row_and_sum(p, width, row_lse[r]);
                } else {
                  std::fill(p, p + width, 0.0f);
                }
                if (a.dropout > 0.0f) {
                  // out = (P * M) V: dP = M dout.v, D = dout.out still, and
                  // dV takes P * M (p is overwritten after dS used it).
                  dropout_row(drop, width, n, j0, ref::dropout_row_key(a.dropout_seed, b, h, p0 + r), a.dropout);
                  for (int64_t c = 0; c < width; ++c) {
                    ds[c] = p[c] * (drop[c] * ds[c] - row_delta[r]);
                    p[c] *= drop[c];
                  }
                } else {
                  for (int64_t c = 0; c < width; ++c) ds[c] = p[c] * (ds[c] - row_delta[r]);
                }
              }
              // dQ += dS K (scale applied once at the end); dK += dS^T (scale q);
              // dV += P^T dout. The transposed operands are read with swapped strides.
              if (dq != nullptr)
                gemm<true>(dq_acc, dqk_pad, dscores, kKeyTile, 1, k_rows + col * dqk_pad, dqk_pad, nq, dqk_pad, n);
              if (dk != nullptr)
                gemm<true>(dk_acc + col * dqk_pad, dqk_pad, dscores, 1, kKeyTile, q_blk, dqk_pad, n, dqk_pad, nq);
              if (dv != nullptr)
                gemm<true>(dv_acc + col * dv_pad, dv_pad, probs, 1, kKeyTile, dout_blk, dv_pad, n, dv_pad, nq);
            }

          if (dq != nullptr)
            for (int64_t r = 0; r < nq; ++r) {
              float* dst = dq + (row0 + r) * ld_dq + h * a.Dqk;
              for (int64_t d = 0; d < a.Dqk; ++d) dst[d] += scale * dq_acc[r * dqk_pad + d];
            }
        }

      if (dk != nullptr) pack.unpack_add(dk + b * a.Tk * ld_dk + g * a.Dqk, ld_dk, dk_acc, dqk_pad, a.Dqk);
      if (dv != nullptr) pack.unpack_add(dv + b * a.Tk * ld_dv + g * a.Dv, ld_dv, dv_acc, dv_pad, a.Dv);
    }
  }
}

}  // namespace hymba::cpu
