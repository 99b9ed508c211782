// Weights repacked 8 rows at a time (kernels/cpu/quant_packed.h): the byte
// layout by hand, padding rows, dequantizing any row range back to what the
// row blocks hold, and the products in exactly the documented summation
// order (one fused multiply-add per block of an exact integer dot) on every
// instruction set this CPU has, for ragged row counts, widths and batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "infer/weight_format.h"
#include "kernels/cpu/quant_packed.h"
#include "test_util.h"

namespace hymba {
namespace {

using cpu::BlockQ4;
using cpu::BlockQ8;
using cpu::PackedQ4;
using cpu::PackedQ8;

std::vector<float> random_weights(int64_t n, uint64_t seed) {
  Rng rng(seed);
  return test::random_floats(static_cast<size_t>(n), rng);
}

int q4_code(const BlockQ4& b, int i) { return i < 16 ? b.q[i] & 0x0F : b.q[i - 16] >> 4; }

// Rows of distinct bytes: row r, element e holds r * 32 + e - 100 (all within
// [-127, 127] for r < 7), so every byte's place in a run is checkable.
TEST(QuantPacked, Q8LayoutByHand) {
  const int64_t OC = 7, C = 32;  // one group, its last row padding
  std::vector<BlockQ8> rows(OC);
  for (int64_t r = 0; r < OC; ++r) {
    rows[r].scale = static_cast<uint16_t>(0x3C00 + r);
    for (int e = 0; e < 32; ++e) rows[r].q[e] = static_cast<int8_t>(r * 32 + e - 100);
  }
  PackedQ8 p;
  std::memset(&p, 0x5A, sizeof(p));
  cpu::pack_q8(&p, rows.data(), OC, C);
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(p.scales[r], r < OC ? 0x3C00 + r : 0) << r;
    for (int e = 0; e < 32; ++e)
      EXPECT_EQ(p.q[32 * (e / 4) + 4 * r + e % 4], r < OC ? rows[r].q[e] : 0) << "row " << r << " element " << e;
  }
}

TEST(QuantPacked, Q4LayoutByHand) {
  const int64_t OC = 9, C = 32;  // two groups, the second holding one row
  std::vector<BlockQ4> rows(OC);
  for (int64_t r = 0; r < OC; ++r) {
    rows[r].scale = static_cast<uint16_t>(0x3C00 + r);
    for (int j = 0; j < 16; ++j) rows[r].q[j] = static_cast<uint8_t>(((r + j) & 15) | (((3 * j + r) & 15) << 4));
  }
  std::vector<PackedQ4> p(2);
  cpu::pack_q4(p.data(), rows.data(), OC, C);
  for (int64_t o = 0; o < 16; ++o) {
    const PackedQ4& g = p[o / 8];
    const int64_t r = o % 8;
    EXPECT_EQ(g.scales[r], o < OC ? 0x3C00 + o : 0) << o;
    for (int e = 0; e < 32; ++e) {
      const int j = e % 16;
      const uint8_t byte = g.q[32 * (j / 4) + 4 * r + j % 4];
      EXPECT_EQ(e < 16 ? byte & 0x0F : byte >> 4, o < OC ? q4_code(rows[o], e) : 0) << "row " << o << " e " << e;
    }
  }
}

// Any row range of a packed matrix widens to exactly the row blocks' values.
TEST(QuantPacked, DequantizedRowRangesEqualTheRowBlocks) {
  for (const int64_t C : {1, 33, 100})
    for (const int64_t OC : {1, 8, 13, 24}) {
      SCOPED_TRACE(testing::Message() << "C=" << C << " OC=" << OC);
      const auto w = random_weights(OC * C, 7 * C + OC);
      std::vector<float> q8_rows(static_cast<size_t>(OC * C)), q4_rows(q8_rows.size());
      std::vector<BlockQ8> b8(static_cast<size_t>(OC * cpu::q8_blocks_per_row(C)));
      std::vector<BlockQ4> b4(static_cast<size_t>(OC * cpu::q4_blocks_per_row(C)));
      cpu::quantize_q8(b8.data(), w.data(), OC, C);
      cpu::quantize_q4(b4.data(), w.data(), OC, C);
      cpu::dequantize_q8(q8_rows.data(), b8.data(), OC, C);
      cpu::dequantize_q4(q4_rows.data(), b4.data(), OC, C);
      std::vector<PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(OC) * cpu::q8_blocks_per_row(C)));
      std::vector<PackedQ4> p4(static_cast<size_t>(cpu::packed_groups(OC) * cpu::q4_blocks_per_row(C)));
      cpu::pack_q8(p8.data(), b8.data(), OC, C);
      cpu::pack_q4(p4.data(), b4.data(), OC, C);
      for (const int64_t row0 : {int64_t{0}, OC / 2, OC - 1}) {
        const int64_t n = OC - row0;
        std::vector<float> got8(static_cast<size_t>(n * C)), got4(got8.size());
        cpu::dequantize_packed_q8(got8.data(), p8.data(), row0, n, C);
        cpu::dequantize_packed_q4(got4.data(), p4.data(), row0, n, C);
        EXPECT_EQ(std::memcmp(got8.data(), q8_rows.data() + row0 * C, got8.size() * sizeof(float)), 0) << row0;
        EXPECT_EQ(std::memcmp(got4.data(), q4_rows.data() + row0 * C, got4.size() * sizeof(float)), 0) << row0;
      }
    }
}

// The documented order, written out on the row blocks: per output, per
// block, one fma of the exact integer dot times (scale_w * scale_x); then
// the bias. Every instruction set must give exactly these bits.
TEST(QuantPacked, ProductsFollowTheDocumentedOrderOnEveryIsa) {
  std::string names;
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) names += std::string(" ") + cpu::to_string(isa);
  std::cout << "instruction sets checked:" << names << "\n";
  for (const int64_t R : {1, 2, 5})
    for (const int64_t C : {1, 31, 64, 257})
      for (const int64_t OC : {1, 7, 8, 17})
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC << " bias=" << with_bias);
          const int64_t nb = cpu::q8_blocks_per_row(C);
          const auto w = random_weights(OC * C, 3 * C + OC);
          const auto x = random_weights(R * C, 5 * C + R);
          const auto bias = random_weights(OC, 11);
          const float* b = with_bias ? bias.data() : nullptr;
          std::vector<BlockQ8> b8(static_cast<size_t>(OC * nb));
          std::vector<BlockQ4> b4(static_cast<size_t>(OC * nb));
          cpu::quantize_q8(b8.data(), w.data(), OC, C);
          cpu::quantize_q4(b4.data(), w.data(), OC, C);
          std::vector<PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(OC) * nb));
          std::vector<PackedQ4> p4(p8.size());
          cpu::pack_q8(p8.data(), b8.data(), OC, C);
          cpu::pack_q4(p4.data(), b4.data(), OC, C);
          std::vector<float> exp8(static_cast<size_t>(R * OC)), exp4(exp8.size());
          {
            std::vector<BlockQ8> xq(static_cast<size_t>(R * nb));
            cpu::quantize_q8(xq.data(), x.data(), R, C);
            for (int64_t r = 0; r < R; ++r)
              for (int64_t o = 0; o < OC; ++o) {
                float a8 = 0, a4 = 0;
                for (int64_t k = 0; k < nb; ++k) {
                  const BlockQ8& xb = xq[static_cast<size_t>(r * nb + k)];
                  const BlockQ8& w8 = b8[static_cast<size_t>(o * nb + k)];
                  const BlockQ4& w4 = b4[static_cast<size_t>(o * nb + k)];
                  int32_t d8 = 0, d4 = 0;
                  for (int e = 0; e < 32; ++e) {
                    d8 += int32_t{w8.q[e]} * xb.q[e];
                    d4 += (q4_code(w4, e) - 8) * int32_t{xb.q[e]};
                  }
                  const float xs = f16_to_f32(xb.scale);
                  a8 = std::fma(static_cast<float>(d8), f16_to_f32(w8.scale) * xs, a8);
                  a4 = std::fma(static_cast<float>(d4), f16_to_f32(w4.scale) * xs, a4);
                }
                const float bo = b != nullptr ? b[o] : 0.0f;
                exp8[static_cast<size_t>(r * OC + o)] = a8 + bo;
                exp4[static_cast<size_t>(r * OC + o)] = a4 + bo;
              }
          }
          for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
            // Strided output and input: ld_out = OC + 3, ld_x = C + 2.
            std::vector<float> xs(static_cast<size_t>(R * (C + 2)), NAN);
            for (int64_t r = 0; r < R; ++r) std::copy_n(x.data() + r * C, C, xs.data() + r * (C + 2));
            std::vector<float> got8(static_cast<size_t>(R * (OC + 3)), -7.0f), got4(got8.size(), -7.0f);
            cpu::matmul_packed_q8(got8.data(), OC + 3, xs.data(), C + 2, p8.data(), b, R, C, OC, isa);
            cpu::matmul_packed_q4(got4.data(), OC + 3, xs.data(), C + 2, p4.data(), b, R, C, OC, isa);
            for (int64_t r = 0; r < R; ++r) {
              EXPECT_EQ(std::memcmp(got8.data() + r * (OC + 3), exp8.data() + r * OC, OC * sizeof(float)), 0)
                  << cpu::to_string(isa) << " q8 row " << r;
              EXPECT_EQ(std::memcmp(got4.data() + r * (OC + 3), exp4.data() + r * OC, OC * sizeof(float)), 0)
                  << cpu::to_string(isa) << " q4 row " << r;
              for (int64_t j = OC; j < OC + 3; ++j) EXPECT_EQ(got8[static_cast<size_t>(r * (OC + 3) + j)], -7.0f);
            }
          }
        }
}

// Extreme codes: weights of -128 (possible in a file, never written by the
// quantizer) and q4 codes 0 and 15 against inputs of +-127 keep exact dots.
TEST(QuantPacked, ExtremeCodesStayExact) {
  const int64_t C = 64, OC = 8;
  std::vector<BlockQ8> b8(static_cast<size_t>(OC * 2));
  std::vector<BlockQ4> b4(b8.size());
  for (size_t i = 0; i < b8.size(); ++i) {
    b8[i].scale = f32_to_f16(1.0f);
    b4[i].scale = f32_to_f16(1.0f);
    for (int e = 0; e < 32; ++e) b8[i].q[e] = static_cast<int8_t>(i % 2 == 0 ? -128 : 127);
    for (int j = 0; j < 16; ++j) b4[i].q[j] = i % 2 == 0 ? 0x00 : 0xFF;
  }
  std::vector<PackedQ8> p8(2);
  std::vector<PackedQ4> p4(2);
  cpu::pack_q8(p8.data(), b8.data(), OC, C);
  cpu::pack_q4(p4.data(), b4.data(), OC, C);
  // x = -1 everywhere: the input quantizes to -127 with scale 1/127.
  const std::vector<float> x(C, -1.0f);
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> o8(OC), o4(OC);
    cpu::matmul_packed_q8(o8.data(), OC, x.data(), C, p8.data(), nullptr, 1, C, OC, isa);
    cpu::matmul_packed_q4(o4.data(), OC, x.data(), C, p4.data(), nullptr, 1, C, OC, isa);
    const float xs = f16_to_f32(f32_to_f16(1.0f / 127.0f));
    const float want8 = std::fma(32.0f * 127 * -127, xs, 32.0f * 128 * 127 * xs);
    const float want4 = std::fma(32.0f * 7 * -127, xs, 32.0f * 8 * 127 * xs);
    for (int64_t o = 0; o < OC; ++o) {
      EXPECT_EQ(o8[static_cast<size_t>(o)], want8) << cpu::to_string(isa);
      EXPECT_EQ(o4[static_cast<size_t>(o)], want4) << cpu::to_string(isa);
    }
  }
}

// A decoder makes its q8 / q4 copy of a float32 matrix a slice of 512 rows
// at a time (infer/weight_format.cpp): the copy must hold what the whole
// matrix quantized at once holds, and its products be matmul_q8/q4's bits.
// 1203 rows: two whole slices and a ragged one, itself not whole groups of 8.
TEST(QuantPacked, DecoderCopiesMadeASliceAtATimeEqualTheWholeMatrix) {
  const int64_t OC = 1203, C = 70, R = 2;
  const std::vector<float> w = random_weights(OC * C, 41), x = random_weights(R * C, 42);
  for (const infer::WeightFormat format : {infer::WeightFormat::kQ8, infer::WeightFormat::kQ4}) {
    SCOPED_TRACE(infer::to_string(format));
    infer::DecoderLinears linears(format);
    std::vector<float> out(static_cast<size_t>(R * OC)), expected(out.size()), whole(static_cast<size_t>(OC * C));
    linears.linear(out.data(), OC, x.data(), C, w.data(), R, C, OC);
    if (format == infer::WeightFormat::kQ8) {
      std::vector<BlockQ8> blocks(static_cast<size_t>(OC * cpu::q8_blocks_per_row(C)));
      cpu::quantize_q8(blocks.data(), w.data(), OC, C);
      cpu::dequantize_q8(whole.data(), blocks.data(), OC, C);
      cpu::matmul_q8(expected.data(), x.data(), blocks.data(), nullptr, R, C, OC);
    } else {
      std::vector<BlockQ4> blocks(static_cast<size_t>(OC * cpu::q4_blocks_per_row(C)));
      cpu::quantize_q4(blocks.data(), w.data(), OC, C);
      cpu::dequantize_q4(whole.data(), blocks.data(), OC, C);
      cpu::matmul_q4(expected.data(), x.data(), blocks.data(), nullptr, R, C, OC);
    }
    const std::vector<float> copy = linears.dequantized(w.data(), OC, C);
    EXPECT_EQ(std::memcmp(copy.data(), whole.data(), whole.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace hymba
