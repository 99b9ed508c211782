// The q4 block format (kernels/cpu/quant_q4.h, GGUF's Q4_0): hand-computed
// blocks in llama.cpp's rounding, the nibble order, ragged tails, the
// quantizer and the product against the plain reference on random shapes,
// every instruction set this CPU has against the portable path (bit for
// bit), and thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/reference/quant_q4.h"

namespace hymba {
namespace {

using cpu::BlockQ4;

std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (rng.uniform() + rng.uniform() + rng.uniform() - 1.5f) * 2.0f;
  return v;
}

int code_of(const BlockQ4& b, int i) { return i < 16 ? b.q[i] & 0x0F : b.q[i - 16] >> 4; }

// x[i] = i - 16 with x[0] = -16: the largest magnitude is negative, so
// d = -16 / -8 = 2 and code = trunc((i - 16) / 2 + 8.5) = trunc(i / 2 + 0.5),
// at most 15 (i = 31 would give 16).
TEST(QuantQ4, HandComputedBlockInLlamaCppRounding) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 16);
  BlockQ4 b{};
  cpu::quantize_q4(&b, x.data(), 1, 32);
  EXPECT_EQ(b.scale, f32_to_f16(2.0f));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code_of(b, i), std::min(15, (i + 1) / 2)) << i;
  // Nibble order: byte j holds element j low and element j + 16 high.
  EXPECT_EQ(b.q[0], 0x80);  // element 0: code 0; element 16: code 8
  EXPECT_EQ(b.q[15], 0xF8);  // element 15: code 8; element 31: code 15 (clamped)
  std::vector<float> back(32);
  cpu::dequantize_q4(back.data(), &b, 1, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], 2.0f * static_cast<float>(code_of(b, i) - 8));
}

// A positive maximum makes d negative: the maximum itself still maps to
// code 0 and comes back exactly; the first of two equal magnitudes wins.
TEST(QuantQ4, PositiveMaximumGivesNegativeScale) {
  std::vector<float> x(32, 0.0f);
  x[5] = 4.0f;
  x[9] = -4.0f;  // same magnitude, later: does not change the sign
  x[20] = 1.0f;
  BlockQ4 b{};
  cpu::quantize_q4(&b, x.data(), 1, 32);
  EXPECT_EQ(f16_to_f32(b.scale), -0.5f);
  EXPECT_EQ(code_of(b, 5), 0);
  EXPECT_EQ(code_of(b, 9), 15);  // -4 / -0.5 + 8.5 = 16.5 -> clamped to 15: 3.5 back
  EXPECT_EQ(code_of(b, 20), 6);  // 1 / -0.5 + 8.5 = 6.5 -> 6
  EXPECT_EQ(code_of(b, 0), 8);
  std::vector<float> back(32);
  cpu::dequantize_q4(back.data(), &b, 1, 32);
  EXPECT_EQ(back[5], 4.0f);
  EXPECT_EQ(back[9], -3.5f);
  EXPECT_EQ(back[20], 1.0f);
  EXPECT_EQ(back[0], 0.0f);
}

TEST(QuantQ4, ZeroAndNonFiniteBlocksStayDefined) {
  const std::vector<float> zeros(32, 0.0f);
  BlockQ4 b{};
  cpu::quantize_q4(&b, zeros.data(), 1, 32);
  EXPECT_EQ(b.scale, 0x8000) << "0 / -8 is -0, as llama.cpp stores it";
  for (uint8_t q : b.q) EXPECT_EQ(q, 0x88);
  std::vector<float> x(32, 1.0f);
  x[3] = NAN;
  cpu::quantize_q4(&b, x.data(), 1, 32);
  EXPECT_EQ(code_of(b, 3), 8);
  EXPECT_EQ(code_of(b, 0), 0);
}

// C = 37: two blocks per row, the second holding 5 values and 27 pads of
// code 8; dequantizing writes exactly C values per row.
TEST(QuantQ4, RaggedTailIsZeroPadded) {
  const int64_t N = 3, C = 37;
  const auto x = random_normal(N * C, 7);
  ASSERT_EQ(cpu::q4_blocks_per_row(C), 2);
  std::vector<BlockQ4> q(static_cast<size_t>(N * 2));
  cpu::quantize_q4(q.data(), x.data(), N, C);
  for (int64_t n = 0; n < N; ++n)
    for (int i = 5; i < 32; ++i) EXPECT_EQ(code_of(q[static_cast<size_t>(n * 2 + 1)], i), 8);
  std::vector<float> back(static_cast<size_t>(N * C + 1), 42.0f);
  cpu::dequantize_q4(back.data(), q.data(), N, C);
  EXPECT_EQ(back.back(), 42.0f) << "wrote past N * C";
}

// Quantizer: byte-identical to the reference, with and without a row
// stride; round trip within one step (half a step except at the clamped
// code 15, which can be a whole step off).
TEST(QuantQ4, QuantizerMatchesReferenceAndRoundTripsWithinAStep) {
  for (const int64_t C : {1, 31, 32, 33, 100, 257}) {
    const int64_t N = 5, nb = cpu::q4_blocks_per_row(C);
    const auto x = random_normal(static_cast<size_t>(N * C), 100 + C, 3.0f);
    std::vector<BlockQ4> fast(static_cast<size_t>(N * nb)), ref(fast.size()), strided(fast.size());
    cpu::quantize_q4(fast.data(), x.data(), N, C);
    ref::quantize_q4(ref.data(), x.data(), N, C);
    ASSERT_EQ(std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(BlockQ4)), 0) << "C=" << C;
    std::vector<float> wide(static_cast<size_t>(N * (C + 3)), NAN);
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(&wide[static_cast<size_t>(n * (C + 3))], &x[static_cast<size_t>(n * C)], sizeof(float) * C);
    cpu::quantize_q4(strided.data(), wide.data(), C + 3, N, C);
    ASSERT_EQ(std::memcmp(fast.data(), strided.data(), fast.size() * sizeof(BlockQ4)), 0) << "strided C=" << C;
    std::vector<float> back(static_cast<size_t>(N * C));
    cpu::dequantize_q4(back.data(), fast.data(), N, C);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const float step = std::fabs(f16_to_f32(fast[static_cast<size_t>(n * nb + c / 32)].scale));
        const auto i = static_cast<size_t>(n * C + c);
        EXPECT_LE(std::fabs(back[i] - x[i]), step * 1.01f) << "C=" << C << " n=" << n << " c=" << c;
      }
  }
}

TEST(QuantQ4, MatmulMatchesReferenceOnEveryIsa) {
  for (const int64_t R : {1, 3, 7})
    for (const int64_t C : {1, 31, 32, 33, 100, 257})
      for (const int64_t OC : {1, 5, 64})
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC << " bias=" << with_bias);
          const int64_t nb = cpu::q4_blocks_per_row(C);
          const auto w = random_normal(static_cast<size_t>(OC * C), 11 * C + OC, 0.2f);
          const auto x = random_normal(static_cast<size_t>(R * C), 13 * C + R);
          const auto bias = random_normal(static_cast<size_t>(OC), 17);
          std::vector<BlockQ4> wq(static_cast<size_t>(OC * nb));
          cpu::quantize_q4(wq.data(), w.data(), OC, C);
          const float* b = with_bias ? bias.data() : nullptr;
          const std::vector<double> expected = ref::matmul_q4(x.data(), wq.data(), b, R, C, OC);
          std::vector<float> portable;
          for (const cpu::Q4Isa isa : cpu::q8_isas_here()) {
            std::vector<float> out(static_cast<size_t>(R * OC), NAN);
            cpu::matmul_q4(out.data(), x.data(), wq.data(), b, R, C, OC, isa);
            for (size_t i = 0; i < out.size(); ++i)
              EXPECT_NEAR(out[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << to_string(isa) << " i=" << i;
            if (isa == cpu::Q4Isa::kPortable) portable = out;
            else EXPECT_EQ(std::memcmp(out.data(), portable.data(), out.size() * sizeof(float)), 0) << to_string(isa);
          }
        }
}

// Row strides: the strided call writes only its columns and equals the packed one.
TEST(QuantQ4, StridedMatmulEqualsPacked) {
  const int64_t R = 3, C = 70, OC = 9, nb = cpu::q4_blocks_per_row(C);
  const auto w = random_normal(static_cast<size_t>(OC * C), 21);
  const auto x = random_normal(static_cast<size_t>(R * (C + 5)), 22);
  std::vector<BlockQ4> wq(static_cast<size_t>(OC * nb));
  cpu::quantize_q4(wq.data(), w.data(), OC, C);
  std::vector<float> packed_x(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(&packed_x[static_cast<size_t>(r * C)], &x[static_cast<size_t>(r * (C + 5))], sizeof(float) * C);
  std::vector<float> packed(static_cast<size_t>(R * OC)), strided(static_cast<size_t>(R * (OC + 2)), 7.0f);
  cpu::matmul_q4(packed.data(), packed_x.data(), wq.data(), nullptr, R, C, OC);
  cpu::matmul_q4(strided.data(), OC + 2, x.data(), C + 5, wq.data(), nullptr, R, C, OC);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t o = 0; o < OC; ++o)
      EXPECT_EQ(strided[static_cast<size_t>(r * (OC + 2) + o)], packed[static_cast<size_t>(r * OC + o)]);
    EXPECT_EQ(strided[static_cast<size_t>(r * (OC + 2) + OC)], 7.0f);
  }
}

// Against the float32 product: the error is 4-bit quantization's, a
// relative RMS of a few percent on normal-like data.
TEST(QuantQ4, MatmulIsCloseToTheFloatProduct) {
  const int64_t R = 4, C = 512, OC = 96, nb = cpu::q4_blocks_per_row(C);
  const auto w = random_normal(static_cast<size_t>(OC * C), 3, 0.05f);
  const auto x = random_normal(static_cast<size_t>(R * C), 4);
  std::vector<BlockQ4> wq(static_cast<size_t>(OC * nb));
  cpu::quantize_q4(wq.data(), w.data(), OC, C);
  std::vector<float> out(static_cast<size_t>(R * OC));
  cpu::matmul_q4(out.data(), x.data(), wq.data(), nullptr, R, C, OC);
  double err2 = 0, ref2 = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double exact = 0;
      for (int64_t c = 0; c < C; ++c) exact += double{x[static_cast<size_t>(r * C + c)]} * w[static_cast<size_t>(o * C + c)];
      const double e = out[static_cast<size_t>(r * OC + o)] - exact;
      err2 += e * e;
      ref2 += exact * exact;
    }
  const double rel = std::sqrt(err2 / ref2);
  EXPECT_LT(rel, 0.12) << "relative RMS error of q4 x q8 against float32";
  EXPECT_GT(rel, 0.005) << "4 bits cannot be this close: is the weight really quantized?";
}

TEST(QuantQ4, ResultsDoNotDependOnTheThreadCount) {
  const int64_t R = 3, C = 200, OC = 77, nb = cpu::q4_blocks_per_row(C);
  const auto w = random_normal(static_cast<size_t>(OC * C), 5);
  const auto x = random_normal(static_cast<size_t>(R * C), 6);
  std::vector<BlockQ4> wq(static_cast<size_t>(OC * nb));
  cpu::quantize_q4(wq.data(), w.data(), OC, C);
  std::vector<float> one(static_cast<size_t>(R * OC)), two(one.size());
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::matmul_q4(one.data(), x.data(), wq.data(), nullptr, R, C, OC);
  omp_set_num_threads(2);
  cpu::matmul_q4(two.data(), x.data(), wq.data(), nullptr, R, C, OC);
  omp_set_num_threads(before);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace hymba
