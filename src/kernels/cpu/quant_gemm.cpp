// Products of many rows on packed q8 / q4 weights (kernels/cpu/quant_packed.h,
// gemm_packed_q8 / gemm_packed_q4): prefill chunks, the meta prefix, batch
// steps. The summation order is kernels/cpu/quant_matmul.h's, so the bits are
// those of the one-row kernels; what changes is how much work one loaded
// weight register does. A tile is kTileRows input rows by 16 outputs (two
// packed groups of 8, one 512-bit register) with AVX-512 VNNI, or
// kTileRowsAvx2 rows by 8 outputs (one group, one 256-bit register) with
// AVX-VNNI or AVX2: each run of weight bytes is loaded and made unsigned once
// per tile and multiplied by every row's 4 input bytes, broadcast from memory.
//
// vpdpbusd (either VNNI) multiplies unsigned by signed bytes. Both formats put the weight on
// the unsigned side and the input (q8 codes in [-127, 127]) on the signed
// side: q8 weights w in [-128, 127] become w + 128 (an xor of the sign bit),
// q4 codes are already 0..15 for values code - 8, so
//   sum w * x = sum (w + 128) * x - 128 * sum x,  sum (c - 8) * x = sum c * x - 8 * sum x,
// each exact in int32 (at most 32 * 255 * 127 in magnitude). AVX2's maddubs
// saturates 16-bit pair sums, so its q8 tile keeps the one-row kernel's sign
// trick (|w| times x with w's sign); its q4 tile sums 16-bit pairs exactly as
// the one-row kernel does.
//
// Rows are taken a panel at a time (as many as keep the panel's input blocks
// within kPanelBytes, about a third of a Zen 5 L2), and each thread runs its
// groups of outputs over the panel: a group's weights are read from memory
// once per panel, the panel's input blocks stay in L2.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_packed.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused
// merge source, which -Wmaybe-uninitialized reports once inlined (clang
// has no such warning).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hymba::cpu {

namespace {

constexpr int kTileRows = 8;       // VNNI: 8 rows x 16 outputs, 16 accumulators
constexpr int kTileRowsAvx2 = 4;   // AVX2: 4 rows x 8 outputs in 16 ymm registers
constexpr int64_t kPanelBytes = 384 << 10;

// The input rows as the tiles read them, quantized as matmul_groups does
// (quantize_q8 row by row, so the same bits), in tiles of T rows (the tile
// height of the instruction set; the matrix's last tile may hold fewer), a
// tile block after block. A tile block of n rows holds the rows' runs of 4
// codes interleaved (run g of row 0, of row 1, ..., then run g + 1), then
// each row's scale as a float, then each row's correction for the unsigned
// weights: -128 * sum x (q8) or -8 * sum x (q4). One pointer and constant
// offsets reach every operand of a tile block, which keeps the tile's
// address arithmetic out of the general registers.
constexpr int64_t kRowBlockBytes = kQ8BlockSize + 2 * sizeof(float);

struct GemmInput {
  std::vector<int8_t> bytes;
  int64_t nb = 0;
  // Tile t (rows t*T ..) starts after t*T rows' blocks: every tile but the
  // last is full, so a row's offset is enough.
  const int8_t* tile(int64_t first_row) const { return bytes.data() + first_row * nb * kRowBlockBytes; }
};

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_float(const int8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Writes the n rows of one tile (their nb q8 blocks each) into its interleaved tile blocks.
void interleave_tile(int8_t* tile, const BlockQ8* rows, int64_t n, int64_t nb, int32_t offset) {
  const int64_t runs = kQ8BlockSize / 4;
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* dst = tile + b * n * kRowBlockBytes;
    for (int64_t r = 0; r < n; ++r) {
      const BlockQ8& blk = rows[r * nb + b];
      for (int64_t g = 0; g < runs; ++g) std::memcpy(dst + (g * n + r) * 4, blk.q + 4 * g, 4);
      const float scale = f16_to_f32(blk.scale);
      int32_t sum = 0;
      for (const int8_t q : blk.q) sum += q;
      const int32_t correction = -offset * sum;
      std::memcpy(dst + kQ8BlockSize * n + 4 * r, &scale, 4);
      std::memcpy(dst + (kQ8BlockSize + 4) * n + 4 * r, &correction, 4);
    }
  }
}

// offset: 128 for q8, 8 for q4. Split over threads by tiles: at 256 rows
// the quantization is no longer small.
void quantize_rows(GemmInput& in, const float* x, int64_t ld_x, int64_t R, int64_t C, int64_t T, int32_t offset) {
  in.nb = q8_blocks_per_row(C);
  in.bytes.resize(static_cast<size_t>(R * in.nb * kRowBlockBytes));
  const int64_t tiles = (R + T - 1) / T;
  parallel_for(tiles, R * C >= (int64_t{1} << 15), [&](int64_t first, int64_t last) {
    std::vector<BlockQ8> rows(static_cast<size_t>(T * in.nb));
    for (int64_t t = first; t < last; ++t) {
      const int64_t r0 = t * T, n = std::min(T, R - r0);
      quantize_q8(rows.data(), x + r0 * ld_x, ld_x, n, C);
      interleave_tile(in.bytes.data() + r0 * in.nb * kRowBlockBytes, rows.data(), n, in.nb, offset);
    }
  });
}

// Operand addresses inside a tile block of RT rows.
template <int RT>
struct TileBlock {
  const int8_t* p;
  // Block b of the tile that starts at `tile`.
  static TileBlock at(const int8_t* tile, int64_t b) { return {tile + b * RT * kRowBlockBytes}; }
  const int8_t* run_at(int g, int r) const { return p + (g * RT + r) * 4; }
  int32_t run(int g, int r) const { return load4(run_at(g, r)); }
  float scale(int r) const { return load_float(p + kQ8BlockSize * RT + 4 * r); }
  int32_t correction(int r) const { return load4(p + (kQ8BlockSize + 4) * RT + 4 * r); }
};

// ---- AVX-512 VNNI: RT rows x 16 outputs (groups g and g + 1) ----

// Runs k of groups g and g + 1 side by side in one register.
#define HYMBA_VNNI_TARGET "avx512vnni,avx512vl,avx512bw,avx512f,avx2,fma,f16c"

// acc += w · (the 4 bytes at p, broadcast), with the broadcast folded into
// the instruction's memory operand: compilers emit a separate broadcast
// load otherwise, an extra instruction for every product.
__attribute__((target(HYMBA_VNNI_TARGET), always_inline)) inline __m512i dpbusd_broadcast(__m512i acc, __m512i w,
                                                                                        const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

__attribute__((target(HYMBA_VNNI_TARGET), always_inline)) inline __m512i pair_run(const uint8_t* a, const uint8_t* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

__attribute__((target(HYMBA_VNNI_TARGET), always_inline)) inline __m512 pair_scales(const uint16_t* a,
                                                                                    const uint16_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_zextsi128_si256(lo), hi, 1));
}

// Adds each row's block to its accumulator (the documented fma), then after
// the last block writes n (<= 16) outputs per row, plus the bias.
template <int RT>
__attribute__((target(HYMBA_VNNI_TARGET), always_inline)) inline void finish_tile_vnni(
    float* out, int64_t ld_out, const __m512* acc, const float* bias, int64_t n) {
  const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) _mm512_mask_storeu_ps(out + r * ld_out, mask, _mm512_add_ps(acc[r], b));
}

template <int RT, typename Packed, bool kQ4>
__attribute__((target(HYMBA_VNNI_TARGET))) void tile_vnni(float* out, int64_t ld_out, const Packed* w0,
                                                          const Packed* w1, int64_t w1_step, const int8_t* x,
                                                          int64_t nb, const float* bias, int64_t n) {
  __m512 acc[RT];
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80)), low = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const Packed& p0 = w0[b];
    const Packed& p1 = w1[b * w1_step];
    const TileBlock<RT> xb = TileBlock<RT>::at(x, b);
    __m512i dots[RT];
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) dots[r] = _mm512_set1_epi32(xb.correction(r));
    if constexpr (kQ4) {
      #pragma GCC unroll 16
      for (int k = 0; k < 4; ++k) {
        const __m512i codes = pair_run(p0.q + 32 * k, p1.q + 32 * k);
        const __m512i lo = _mm512_and_si512(codes, low), hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low);
        #pragma GCC unroll 16
        for (int r = 0; r < RT; ++r) {
          dots[r] = dpbusd_broadcast(dots[r], lo, xb.run_at(k, r));
          dots[r] = dpbusd_broadcast(dots[r], hi, xb.run_at(4 + k, r));
        }
      }
    } else {
      #pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        const __m512i wu = _mm512_xor_si512(
            pair_run(reinterpret_cast<const uint8_t*>(p0.q) + 32 * k, reinterpret_cast<const uint8_t*>(p1.q) + 32 * k),
            sign);
        #pragma GCC unroll 16
        for (int r = 0; r < RT; ++r)
          dots[r] = dpbusd_broadcast(dots[r], wu, xb.run_at(k, r));
      }
    }
    const __m512 ws = pair_scales(p0.scales, p1.scales);
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[r]), _mm512_mul_ps(ws, _mm512_set1_ps(xb.scale(r))),
                               acc[r]);
  }
  finish_tile_vnni<RT>(out, ld_out, acc, bias, n);
}

// ---- AVX2: RT rows x 8 outputs (group g) ----

template <int RT>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void finish_tile_avx2(float* out, int64_t ld_out,
                                                                                     const __m256* acc,
                                                                                     const float* bias, int64_t n) {
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) {
    float lanes[kPackedRows];
    _mm256_storeu_ps(lanes, acc[r]);
    for (int64_t j = 0; j < n; ++j) out[r * ld_out + j] = lanes[j] + (bias != nullptr ? bias[j] : 0.0f);
  }
}

template <int RT>
__attribute__((target("avx2,fma,f16c"))) void tile_avx2_q8(float* out, int64_t ld_out, const PackedQ8* w,
                                                           const int8_t* x, int64_t nb, const float* bias, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[RT];
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileBlock<RT> xb = TileBlock<RT>::at(x, b);
    __m256i dots[RT];
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) dots[r] = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i aw = _mm256_sign_epi8(wq, wq);
      #pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) {
        const __m256i xq = _mm256_set1_epi32(xb.run(k, r));
        const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, wq));
        dots[r] = _mm256_add_epi32(dots[r], _mm256_madd_epi16(pairs, ones));
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) acc[r] = scaled_fma(dots[r], w[b].scales, xb.scale(r), acc[r]);
  }
  finish_tile_avx2<RT>(out, ld_out, acc, bias, n);
}

template <int RT>
__attribute__((target("avx2,fma,f16c"))) void tile_avx2_q4(float* out, int64_t ld_out, const PackedQ4* w,
                                                           const int8_t* x, int64_t nb, const float* bias, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
  __m256 acc[RT];
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileBlock<RT> xb = TileBlock<RT>::at(x, b);
    __m256i sums[RT];
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) sums[r] = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      const __m256i lo = _mm256_and_si256(codes, low), hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), low);
      #pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) {
        sums[r] = _mm256_add_epi16(sums[r], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(xb.run(k, r))));
        sums[r] = _mm256_add_epi16(sums[r], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xb.run(4 + k, r))));
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) {
      const __m256i dots =
          _mm256_add_epi32(_mm256_madd_epi16(sums[r], ones), _mm256_set1_epi32(xb.correction(r)));
      acc[r] = scaled_fma(dots, w[b].scales, xb.scale(r), acc[r]);
    }
  }
  finish_tile_avx2<RT>(out, ld_out, acc, bias, n);
}

// ---- AVX-VNNI: RT rows x 8 outputs (group g), the unsigned weights of the
// 512-bit tile on 256-bit registers ----

template <int RT, typename Packed, bool kQ4>
__attribute__((target("avx2,fma,f16c"))) void tile_avx_vnni(float* out, int64_t ld_out, const Packed* w,
                                                             const int8_t* x, int64_t nb, const float* bias,
                                                             int64_t n) {
  __m256 acc[RT];
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80)), low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const TileBlock<RT> xb = TileBlock<RT>::at(x, b);
    __m256i dots[RT];
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) dots[r] = _mm256_set1_epi32(xb.correction(r));
    #pragma GCC unroll 16
    for (int k = 0; k < (kQ4 ? 4 : 8); ++k) {
      const __m256i run = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q + 32 * k));
      if constexpr (kQ4) {
        const __m256i lo = _mm256_and_si256(run, low), hi = _mm256_and_si256(_mm256_srli_epi16(run, 4), low);
        #pragma GCC unroll 16
        for (int r = 0; r < RT; ++r) {
          dots[r] = dpbusd256<Q8Isa::kAvxVnni>(dots[r], lo, _mm256_set1_epi32(xb.run(k, r)));
          dots[r] = dpbusd256<Q8Isa::kAvxVnni>(dots[r], hi, _mm256_set1_epi32(xb.run(4 + k, r)));
        }
      } else {
        const __m256i wu = _mm256_xor_si256(run, sign);
        #pragma GCC unroll 16
        for (int r = 0; r < RT; ++r)
          dots[r] = dpbusd256<Q8Isa::kAvxVnni>(dots[r], wu, _mm256_set1_epi32(xb.run(k, r)));
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) acc[r] = scaled_fma(dots[r], w[b].scales, xb.scale(r), acc[r]);
  }
  finish_tile_avx2<RT>(out, ld_out, acc, bias, n);
}

// Tiles of RT rows for one column block, then the rows left over one tile of
// fewer rows: Tile<rows> is a callable template taking the row count.
template <int RT, typename TileFn>
void run_rows(int64_t rows, TileFn tile) {
  int64_t r = 0;
  for (; r + RT <= rows; r += RT) tile(r, std::integral_constant<int, RT>{});
  const int64_t left = rows - r;
  if constexpr (RT > 1) {
    if (left > 0) {
      // One tile of the rest: instantiations for 1..RT-1 rows.
      [&]<int... Is>(std::integer_sequence<int, Is...>) {
        ((left == Is + 1 ? (tile(r, std::integral_constant<int, Is + 1>{}), 0) : 0), ...);
      }(std::make_integer_sequence<int, RT - 1>{});
    }
  }
}

template <typename Packed, bool kQ4>
void gemm(float* out, int64_t ld_out, const float* x, int64_t ld_x, const Packed* w, const float* bias, int64_t R,
          int64_t C, int64_t OC, Q8Isa isa) {
  const bool vnni = isa == Q8Isa::kAvx512Vnni;
  const int64_t tile_rows = vnni ? kTileRows : kTileRowsAvx2;
  thread_local GemmInput in;
  quantize_rows(in, x, ld_x, R, C, tile_rows, kQ4 ? 8 : 128);
  const GemmInput& input = in;
  const int64_t nb = input.nb, groups = packed_groups(OC);
  const int64_t panel =
      std::max<int64_t>(tile_rows, kPanelBytes / (nb * kRowBlockBytes) / tile_rows * tile_rows);
  static const Packed zero{};  // the second group of a lone last group: scales 0, codes 0
  // Column blocks: pairs of groups (VNNI) or single groups (AVX2).
  const int64_t per_block = vnni ? 2 : 1;
  const int64_t blocks = (groups + per_block - 1) / per_block;
  parallel_for(blocks, true, [&](int64_t first, int64_t last) {
    for (int64_t p0 = 0; p0 < R; p0 += panel) {
      const int64_t rows = std::min(panel, R - p0);
      for (int64_t cb = first; cb < last; ++cb) {
        const int64_t g = cb * per_block, o0 = g * kPackedRows;
        const int64_t n = std::min(per_block * kPackedRows, OC - o0);
        const float* bias_o = bias != nullptr ? bias + o0 : nullptr;
        const Packed* w0 = w + g * nb;
        if (vnni) {
          const bool two = g + 1 < groups;
          const Packed* w1 = two ? w0 + nb : &zero;
          const int64_t step = two ? 1 : 0;
          run_rows<kTileRows>(rows, [&](int64_t r, auto rt) {
            tile_vnni<decltype(rt)::value, Packed, kQ4>(out + (p0 + r) * ld_out + o0, ld_out, w0, w1, step,
                                                          input.tile(p0 + r), nb, bias_o, n);
          });
        } else {
          run_rows<kTileRowsAvx2>(rows, [&](int64_t r, auto rt) {
            constexpr int kRt = decltype(rt)::value;
            if (isa == Q8Isa::kAvxVnni)
              tile_avx_vnni<kRt, Packed, kQ4>(out + (p0 + r) * ld_out + o0, ld_out, w0, input.tile(p0 + r), nb,
                                              bias_o, n);
            else if constexpr (kQ4)
              tile_avx2_q4<kRt>(out + (p0 + r) * ld_out + o0, ld_out, w0, input.tile(p0 + r), nb, bias_o, n);
            else
              tile_avx2_q8<kRt>(out + (p0 + r) * ld_out + o0, ld_out, w0, input.tile(p0 + r), nb, bias_o, n);
          });
        }
      }
    }
  });
}

}  // namespace

void gemm_packed_q8(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ8* w, const float* bias,
                    int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  check_product("gemm_q8", R, C, OC, ld_out, ld_x, isa);
  if (isa == Q8Isa::kPortable) return matmul_packed_q8(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
  gemm<PackedQ8, false>(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
}

void gemm_packed_q4(float* out, int64_t ld_out, const float* x, int64_t ld_x, const PackedQ4* w, const float* bias,
                    int64_t R, int64_t C, int64_t OC, Q8Isa isa) {
  check_product("gemm_q4", R, C, OC, ld_out, ld_x, isa);
  if (isa == Q8Isa::kPortable) return matmul_packed_q4(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
  gemm<PackedQ4, true>(out, ld_out, x, ld_x, w, bias, R, C, OC, isa);
}

}  // namespace hymba::cpu
