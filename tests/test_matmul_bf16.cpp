// bf16 and float32 row products (kernels/cpu/matmul_bf16.h): the rounding, the product against
// the plain reference on awkward shapes (ragged runs of 8 and 16), every
// instruction set this CPU has against the portable path (bit for bit), the
// lane order itself on a hand-made row, and thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/reference/matmul_bf16.h"

namespace hymba {
namespace {

std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (rng.uniform() + rng.uniform() + rng.uniform() - 1.5f) * 2.0f;
  return v;
}

TEST(MatmulBf16, RoundsToNearestEven) {
  const std::vector<float> x = {1.0f, -2.5f, 1.0f + 0x1p-7f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0.0f};
  std::vector<uint16_t> b(x.size());
  cpu::quantize_bf16(b.data(), x.data(), 2, 3);
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0xC020);
  EXPECT_EQ(b[2], 0x3F81);  // exactly representable: 7 stored mantissa bits
  EXPECT_EQ(b[3], 0x3F80);  // a tie rounds to the even mantissa
  EXPECT_EQ(b[4], 0x3F82);  // a tie rounds up to the even one
  EXPECT_EQ(b[5], 0x0000);
}

TEST(MatmulBf16, MatchesReferenceOnEveryIsa) {
  for (const int64_t R : {1, 3})
    for (const int64_t C : {1, 7, 8, 9, 15, 16, 17, 31, 100, 257})
      for (const int64_t OC : {1, 5, 33})
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC << " bias=" << with_bias);
          const auto w = random_normal(static_cast<size_t>(OC * C), 11 * C + OC, 0.2f);
          const auto x = random_normal(static_cast<size_t>(R * C), 13 * C + R);
          const auto bias = random_normal(static_cast<size_t>(OC), 17);
          std::vector<uint16_t> wb(w.size());
          cpu::quantize_bf16(wb.data(), w.data(), OC, C);
          const float* b = with_bias ? bias.data() : nullptr;
          const std::vector<double> expected = ref::matmul_bf16(x.data(), wb.data(), b, R, C, OC);
          std::vector<float> portable;
          for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
            std::vector<float> out(static_cast<size_t>(R * OC), NAN);
            cpu::matmul_bf16(out.data(), OC, x.data(), C, wb.data(), b, R, C, OC, isa);
            for (size_t i = 0; i < out.size(); ++i)
              EXPECT_NEAR(out[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << to_string(isa) << " i=" << i;
            if (isa == cpu::Q8Isa::kPortable) portable = out;
            else EXPECT_EQ(std::memcmp(out.data(), portable.data(), out.size() * sizeof(float)), 0) << to_string(isa);
          }
        }
}

// The documented order, checked where it shows: a large value in element 0
// and small ones that round away against it unless added to another lane
// first. Element 0 (lane 0, even run) gets 2^24; elements 8 and 16 sit in
// lane 0 of the odd and the even run again. Summed in element order,
// 2^24 + 1 + 1 + ... loses every 1; the lanes keep the 1s of other lanes
// apart and add them to 2^24 at the end.
TEST(MatmulBf16, SumsInTheDocumentedLaneOrder) {
  // Five equal rows: the first four go through the four-row kernel, the fifth alone.
  const int64_t C = 24, OC = 5;
  std::vector<float> x(C, 1.0f), w(OC * C, 1.0f);
  x[0] = 0x1p24f;
  std::vector<uint16_t> wb(OC * C);
  cpu::quantize_bf16(wb.data(), w.data(), OC, C);
  // Lanes: even[0] = 2^24 + 1 (element 16) -> 2^24 (rounded), odd[0] = 1
  // (element 8); other lanes hold 1 (even: elements 1-7 and 17-23 -> 2 each;
  // odd: 9-15 -> 1 each). s = even + odd: s0 = 2^24 + 1 -> 2^24, s1..7 = 3.
  // q0 = s0 + s4 = 2^24 + 3 -> 2^24 + 4, q1..3 = 6; (q0 + q2) + (q1 + q3)
  // = (2^24 + 10 -> 2^24 + 10) + 12 = 2^24 + 22.
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> out(OC);
    cpu::matmul_bf16(out.data(), OC, x.data(), C, wb.data(), nullptr, 1, C, OC, isa);
    for (int64_t o = 0; o < OC; ++o) EXPECT_EQ(out[o], 0x1p24f + 22.0f) << to_string(isa) << " row " << o;
  }
}

TEST(MatmulBf16, ResultsDoNotDependOnTheThreadCount) {
  const int64_t R = 3, C = 200, OC = 77;
  const auto w = random_normal(static_cast<size_t>(OC * C), 5);
  const auto x = random_normal(static_cast<size_t>(R * C), 6);
  std::vector<uint16_t> wb(w.size());
  cpu::quantize_bf16(wb.data(), w.data(), OC, C);
  std::vector<float> one(static_cast<size_t>(R * OC)), two(one.size());
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::matmul_bf16(one.data(), OC, x.data(), C, wb.data(), nullptr, R, C, OC);
  omp_set_num_threads(2);
  cpu::matmul_bf16(two.data(), OC, x.data(), C, wb.data(), nullptr, R, C, OC);
  omp_set_num_threads(before);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// The float32 form (a decode step's one-row products, cpu::decode_linear): the
// same order on float32 weights, against a double reference, bit for bit
// across instruction sets, thread counts and the four-row / one-row paths.
TEST(MatmulF32Rows, MatchesReferenceOnEveryIsaBitForBit) {
  for (const int64_t R : {1, 2})
    for (const int64_t C : {1, 7, 8, 9, 16, 17, 136, 257})
      for (const int64_t OC : {1, 5, 300}) {
        SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC);
        const auto w = random_normal(static_cast<size_t>(OC * C), 7 * C + OC, 0.2f);
        const auto x = random_normal(static_cast<size_t>(R * C), 3 * C + R);
        const auto bias = random_normal(static_cast<size_t>(OC), 9);
        std::vector<double> expected(static_cast<size_t>(R * OC));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t o = 0; o < OC; ++o) {
            double sum = bias[o];
            for (int64_t c = 0; c < C; ++c) sum += double{x[r * C + c]} * w[o * C + c];
            expected[r * OC + o] = sum;
          }
        std::vector<float> portable;
        for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
          std::vector<float> out(static_cast<size_t>(R * OC), NAN);
          cpu::matmul_f32_rows(out.data(), OC, x.data(), C, w.data(), bias.data(), R, C, OC, isa);
          for (size_t i = 0; i < out.size(); ++i)
            EXPECT_NEAR(out[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << to_string(isa) << " i=" << i;
          if (isa == cpu::Q8Isa::kPortable) portable = out;
          else EXPECT_EQ(std::memcmp(out.data(), portable.data(), out.size() * sizeof(float)), 0) << to_string(isa);
        }
      }
}

TEST(MatmulF32Rows, SumsInTheDocumentedLaneOrderOnAnyThreadCount) {
  // As SumsInTheDocumentedLaneOrder, on float32 weights: 2^24 + 22 on every row.
  const int64_t C = 24, OC = 5;
  std::vector<float> x(C, 1.0f), w(OC * C, 1.0f);
  x[0] = 0x1p24f;
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> out(OC);
    cpu::matmul_f32_rows(out.data(), OC, x.data(), C, w.data(), nullptr, 1, C, OC, isa);
    for (int64_t o = 0; o < OC; ++o) EXPECT_EQ(out[o], 0x1p24f + 22.0f) << to_string(isa) << " row " << o;
  }
  // A product large enough to split over threads: each row's bits do not move.
  const int64_t big_c = 200, big_oc = 301;
  const auto bw = random_normal(static_cast<size_t>(big_oc * big_c), 21), bx = random_normal(big_c, 22);
  std::vector<float> one(big_oc), two(big_oc);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::matmul_f32_rows(one.data(), big_oc, bx.data(), big_c, bw.data(), nullptr, 1, big_c, big_oc);
  omp_set_num_threads(2);
  cpu::matmul_f32_rows(two.data(), big_oc, bx.data(), big_c, bw.data(), nullptr, 1, big_c, big_oc);
  omp_set_num_threads(before);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(MatmulBf16, BadShapesAreErrors) {
  float out = 0, x = 1;
  const uint16_t w = 0x3F80;
  EXPECT_THROW(cpu::matmul_bf16(&out, 1, &x, 1, &w, nullptr, 1, 0, 1), std::exception);
  EXPECT_THROW(cpu::matmul_bf16(&out, 0, &x, 1, &w, nullptr, 1, 1, 1), std::exception);
}

}  // namespace
}  // namespace hymba
