// The q8 block format (kernels/cpu/quant_q8.h): hand-computed blocks, ragged
// tails, the quantizer and the product against the plain reference on random
// shapes, every instruction set this CPU has against the portable path (bit
// for bit), and thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "kernels/cpu/quant_q8.h"
#include "kernels/reference/quant_q8.h"

namespace hymba {
namespace {

using cpu::BlockQ8;

std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (rng.uniform() + rng.uniform() + rng.uniform() - 1.5f) * 2.0f;  // roughly normal, never all zero
  return v;
}

// max|x| = 63.5 makes the scale exactly 0.5 (63.5 / 127), so q = 2x exactly.
TEST(QuantQ8, HandComputedBlock) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i - 16);
  x[0] = -63.5f;
  BlockQ8 b{};
  cpu::quantize_q8(&b, x.data(), 1, 32);
  EXPECT_EQ(b.scale, f32_to_f16(0.5f));
  EXPECT_EQ(b.q[0], -127);
  for (int i = 1; i < 32; ++i) EXPECT_EQ(b.q[i], i - 16) << i;
  std::vector<float> back(32);
  cpu::dequantize_q8(back.data(), &b, 1, 32);
  EXPECT_EQ(back, x);  // exact: every value is a multiple of the scale
}

// Halves round to even (nearbyint); a block of zeros has scale 0 and no NaN.
TEST(QuantQ8, RoundingAndZeroBlocks) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // scale 1
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.49f;
  BlockQ8 b{};
  cpu::quantize_q8(&b, x.data(), 1, 32);
  EXPECT_EQ(f16_to_f32(b.scale), 1.0f);
  EXPECT_EQ(b.q[1], 2);
  EXPECT_EQ(b.q[2], -4);
  EXPECT_EQ(b.q[3], 0);
  const std::vector<float> zeros(32, 0.0f);
  cpu::quantize_q8(&b, zeros.data(), 1, 32);
  EXPECT_EQ(b.scale, 0);
  for (int8_t q : b.q) EXPECT_EQ(q, 0);
  std::vector<float> back(32, 1.0f);
  cpu::dequantize_q8(back.data(), &b, 1, 32);
  EXPECT_EQ(back, zeros);
}

// Non-finite inputs give no undefined conversion: NaN quantizes to 0, and an
// infinite block's scale is infinite, so the product is not finite either
// (the decoder's finite-logits check then names the problem).
TEST(QuantQ8, NonFiniteInputsStayDefined) {
  std::vector<float> x(32, 1.0f);
  x[3] = NAN;
  BlockQ8 b{};
  cpu::quantize_q8(&b, x.data(), 1, 32);
  EXPECT_EQ(b.q[3], 0);
  EXPECT_EQ(b.q[0], 127);
  x[3] = INFINITY;
  cpu::quantize_q8(&b, x.data(), 1, 32);
  EXPECT_TRUE(std::isinf(f16_to_f32(b.scale)));
  float out = 0;
  const std::vector<float> ones(32, 1.0f);
  cpu::matmul_q8(&out, ones.data(), &b, nullptr, 1, 32, 1);
  EXPECT_FALSE(std::isfinite(out));
}

// C = 37: two blocks per row, the second holding 5 values and 27 zero pads;
// dequantizing writes exactly C values per row.
TEST(QuantQ8, RaggedTailIsZeroPadded) {
  const int64_t N = 3, C = 37;
  const auto x = random_normal(N * C, 7);
  ASSERT_EQ(cpu::q8_blocks_per_row(C), 2);
  std::vector<BlockQ8> q(static_cast<size_t>(N * 2));
  cpu::quantize_q8(q.data(), x.data(), N, C);
  for (int64_t n = 0; n < N; ++n)
    for (int i = 5; i < 32; ++i) EXPECT_EQ(q[static_cast<size_t>(n * 2 + 1)].q[i], 0);
  std::vector<float> back(static_cast<size_t>(N * C + 1), 42.0f);
  cpu::dequantize_q8(back.data(), q.data(), N, C);
  EXPECT_EQ(back.back(), 42.0f) << "wrote past N * C";
}

// Quantizer: byte-identical to the reference; round trip within half a step.
TEST(QuantQ8, QuantizerMatchesReferenceAndRoundTripsWithinHalfAStep) {
  for (const int64_t C : {1, 31, 32, 33, 100, 257}) {
    const int64_t N = 5, nb = cpu::q8_blocks_per_row(C);
    const auto x = random_normal(static_cast<size_t>(N * C), 100 + C, 3.0f);
    std::vector<BlockQ8> fast(static_cast<size_t>(N * nb)), ref(fast.size());
    cpu::quantize_q8(fast.data(), x.data(), N, C);
    ref::quantize_q8(ref.data(), x.data(), N, C);
    ASSERT_EQ(std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(BlockQ8)), 0) << "C=" << C;
    std::vector<float> back(static_cast<size_t>(N * C));
    cpu::dequantize_q8(back.data(), fast.data(), N, C);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const float step = f16_to_f32(fast[static_cast<size_t>(n * nb + c / 32)].scale);
        const auto i = static_cast<size_t>(n * C + c);
        EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * step * 1.01f) << "C=" << C << " n=" << n << " c=" << c;
      }
  }
}

// Whole blocks take their own (vectorised) path: byte-identical to the
// reference with NaN, infinities, an all-zero block, negative zeros and
// values on rounding ties.
TEST(QuantQ8, WholeBlocksWithSpecialValuesMatchTheReference) {
  const int64_t N = 6, C = 64;
  auto x = random_normal(static_cast<size_t>(N * C), 31, 2.0f);
  x[5] = NAN;
  x[64 + 7] = INFINITY;
  x[128 + 9] = -INFINITY;
  std::fill(x.begin() + 192, x.begin() + 224, 0.0f);  // row 3, block 0
  x[224] = -0.0f;
  for (int i = 0; i < 32; ++i) x[256 + i] = 0.5f * static_cast<float>(i - 16);  // ties once scaled
  x[256 + 31] = 127.0f;
  std::vector<BlockQ8> fast(static_cast<size_t>(N * 2)), ref(fast.size());
  cpu::quantize_q8(fast.data(), x.data(), N, C);
  ref::quantize_q8(ref.data(), x.data(), N, C);
  for (size_t b = 0; b < fast.size(); ++b)
    EXPECT_EQ(std::memcmp(&fast[b], &ref[b], sizeof(BlockQ8)), 0) << "block " << b;
}

// The product against the reference (exact int dots, double sums) on awkward
// shapes, with and without bias, on every instruction set this CPU has; the
// SIMD path equals the portable one bit for bit.
TEST(QuantQ8, MatmulMatchesReferenceOnEveryIsa) {
  for (const int64_t R : {1, 3, 7})
    for (const int64_t C : {1, 31, 32, 33, 100, 257})
      for (const int64_t OC : {1, 5, 64})
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC << " bias=" << with_bias);
          const int64_t nb = cpu::q8_blocks_per_row(C);
          const auto w = random_normal(static_cast<size_t>(OC * C), 11 * C + OC, 0.2f);
          const auto x = random_normal(static_cast<size_t>(R * C), 13 * C + R);
          const auto bias = random_normal(static_cast<size_t>(OC), 17);
          std::vector<BlockQ8> wq(static_cast<size_t>(OC * nb));
          cpu::quantize_q8(wq.data(), w.data(), OC, C);
          const float* b = with_bias ? bias.data() : nullptr;
          const std::vector<double> expected = ref::matmul_q8(x.data(), wq.data(), b, R, C, OC);
          std::vector<float> portable;
          for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
            std::vector<float> out(static_cast<size_t>(R * OC), NAN);
            cpu::matmul_q8(out.data(), x.data(), wq.data(), b, R, C, OC, isa);
            for (size_t i = 0; i < out.size(); ++i)
              EXPECT_NEAR(out[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << to_string(isa) << " i=" << i;
            if (isa == cpu::Q8Isa::kPortable) portable = out;
            else EXPECT_EQ(std::memcmp(out.data(), portable.data(), out.size() * sizeof(float)), 0) << to_string(isa);
          }
        }
}

// Against the float32 product: the error is the quantization's, a small
// fraction of the output's spread on normal-like data.
TEST(QuantQ8, MatmulIsCloseToTheFloatProduct) {
  const int64_t R = 4, C = 512, OC = 96, nb = cpu::q8_blocks_per_row(C);
  const auto w = random_normal(static_cast<size_t>(OC * C), 3, 0.05f);
  const auto x = random_normal(static_cast<size_t>(R * C), 4);
  std::vector<BlockQ8> wq(static_cast<size_t>(OC * nb));
  cpu::quantize_q8(wq.data(), w.data(), OC, C);
  std::vector<float> out(static_cast<size_t>(R * OC));
  cpu::matmul_q8(out.data(), x.data(), wq.data(), nullptr, R, C, OC);
  double err2 = 0, ref2 = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double exact = 0;
      for (int64_t c = 0; c < C; ++c) exact += double{x[static_cast<size_t>(r * C + c)]} * w[static_cast<size_t>(o * C + c)];
      const double e = out[static_cast<size_t>(r * OC + o)] - exact;
      err2 += e * e;
      ref2 += exact * exact;
    }
  EXPECT_LT(std::sqrt(err2 / ref2), 0.01) << "relative RMS error of q8 x q8 against float32";
}

TEST(QuantQ8, ResultsDoNotDependOnTheThreadCount) {
  const int64_t R = 3, C = 200, OC = 77, nb = cpu::q8_blocks_per_row(C);
  const auto w = random_normal(static_cast<size_t>(OC * C), 5);
  const auto x = random_normal(static_cast<size_t>(R * C), 6);
  std::vector<BlockQ8> wq(static_cast<size_t>(OC * nb));
  cpu::quantize_q8(wq.data(), w.data(), OC, C);
  std::vector<float> one(static_cast<size_t>(R * OC)), two(one.size());
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::matmul_q8(one.data(), x.data(), wq.data(), nullptr, R, C, OC);
  omp_set_num_threads(2);
  cpu::matmul_q8(two.data(), x.data(), wq.data(), nullptr, R, C, OC);
  omp_set_num_threads(before);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace hymba
