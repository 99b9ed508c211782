// Block products of many rows (kernels/cpu/quant_gemm.cpp): gemm_packed_q8 /
// gemm_packed_q4 against the scalar reference in the documented order
// (kernels/reference/quant_gemm.h), bit for bit, on every instruction set this
// CPU has, on ragged shapes (rows not a multiple of the tile, outputs not a
// multiple of 8 or 16, widths not a multiple of 32, row panels); against the
// one-row kernels row by row (a prefill chunk gives a decode step's bits);
// thread-count independence; extreme codes; bad shapes as one-line errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/reference/quant_gemm.h"
#include "kernels/reference/quant_q4.h"
#include "kernels/reference/quant_q8.h"
#include "test_util.h"

namespace hymba {
namespace {

using cpu::BlockQ4;
using cpu::BlockQ8;
using cpu::PackedQ4;
using cpu::PackedQ8;

std::vector<float> random_values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  return test::random_floats(static_cast<size_t>(n), rng);
}

// One matrix in both formats, as rows of blocks and packed.
struct Matrix {
  int64_t OC, C;
  std::vector<BlockQ8> b8;
  std::vector<BlockQ4> b4;
  std::vector<PackedQ8> p8;
  std::vector<PackedQ4> p4;
  Matrix(const std::vector<float>& w, int64_t oc, int64_t c) : OC(oc), C(c) {
    const int64_t nb = cpu::q8_blocks_per_row(C);
    b8.resize(static_cast<size_t>(OC * nb));
    b4.resize(b8.size());
    cpu::quantize_q8(b8.data(), w.data(), OC, C);
    cpu::quantize_q4(b4.data(), w.data(), OC, C);
    p8.resize(static_cast<size_t>(cpu::packed_groups(OC) * nb));
    p4.resize(p8.size());
    cpu::pack_q8(p8.data(), b8.data(), OC, C);
    cpu::pack_q4(p4.data(), b4.data(), OC, C);
  }
};

bool same_rows(const std::vector<float>& got, int64_t ld, const std::vector<float>& want, int64_t R, int64_t OC) {
  for (int64_t r = 0; r < R; ++r)
    if (std::memcmp(got.data() + r * ld, want.data() + r * OC, static_cast<size_t>(OC) * sizeof(float)) != 0)
      return false;
  return true;
}

std::string isa_names() {
  std::string names;
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) names += std::string(" ") + cpu::to_string(isa);
  return names;
}

TEST(QuantGemm, MatchesTheReferenceBitForBitOnRaggedShapes) {
  std::cout << "instruction sets checked:" << isa_names() << "\n";
  for (const int64_t R : {1, 3, 4, 7, 8, 9, 17, 30})
    for (const int64_t C : {1, 31, 32, 100, 257})
      for (const int64_t OC : {1, 7, 8, 9, 16, 17, 24, 41})
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "R=" << R << " C=" << C << " OC=" << OC << " bias=" << with_bias);
          const Matrix m(random_values(OC * C, 3 * C + OC), OC, C);
          // Strided input and output: ld_x = C + 2 (NaN between rows), ld_out = OC + 3.
          const int64_t ld_x = C + 2, ld_out = OC + 3;
          std::vector<float> x(static_cast<size_t>(R * ld_x), NAN);
          const auto values = random_values(R * C, 5 * C + R);
          for (int64_t r = 0; r < R; ++r) std::copy_n(values.data() + r * C, C, x.data() + r * ld_x);
          const auto bias = random_values(OC, 11);
          const float* b = with_bias ? bias.data() : nullptr;
          const auto want8 = ref::gemm_q8(x.data(), ld_x, m.b8.data(), b, R, C, OC);
          const auto want4 = ref::gemm_q4(x.data(), ld_x, m.b4.data(), b, R, C, OC);
          for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
            std::vector<float> got8(static_cast<size_t>(R * ld_out), -7.0f), got4(got8.size(), -7.0f);
            cpu::gemm_packed_q8(got8.data(), ld_out, x.data(), ld_x, m.p8.data(), b, R, C, OC, isa);
            cpu::gemm_packed_q4(got4.data(), ld_out, x.data(), ld_x, m.p4.data(), b, R, C, OC, isa);
            EXPECT_TRUE(same_rows(got8, ld_out, want8, R, OC)) << cpu::to_string(isa) << " q8";
            EXPECT_TRUE(same_rows(got4, ld_out, want4, R, OC)) << cpu::to_string(isa) << " q4";
            for (int64_t r = 0; r < R; ++r)
              for (int64_t j = OC; j < ld_out; ++j) {
                EXPECT_EQ(got8[static_cast<size_t>(r * ld_out + j)], -7.0f) << "q8 wrote past OC";
                EXPECT_EQ(got4[static_cast<size_t>(r * ld_out + j)], -7.0f) << "q4 wrote past OC";
              }
          }
        }
}

// Enough rows for several row panels (a panel holds about 384 KiB of input
// blocks: 88 rows at C = 4096), and a last panel of a ragged tile.
TEST(QuantGemm, RowPanelsGiveTheReferenceBits) {
  const int64_t R = 203, C = 4096 + 17, OC = 25;
  const Matrix m(random_values(OC * C, 21), OC, C);
  const auto x = random_values(R * C, 22);
  const auto want8 = ref::gemm_q8(x.data(), C, m.b8.data(), nullptr, R, C, OC);
  const auto want4 = ref::gemm_q4(x.data(), C, m.b4.data(), nullptr, R, C, OC);
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> got8(static_cast<size_t>(R * OC)), got4(got8.size());
    cpu::gemm_packed_q8(got8.data(), OC, x.data(), C, m.p8.data(), nullptr, R, C, OC, isa);
    cpu::gemm_packed_q4(got4.data(), OC, x.data(), C, m.p4.data(), nullptr, R, C, OC, isa);
    EXPECT_EQ(got8, want8) << cpu::to_string(isa);
    EXPECT_EQ(got4, want4) << cpu::to_string(isa);
  }
}

// A chunk of rows gives each row exactly what the one-row kernel (a decode
// step's product) gives it alone.
TEST(QuantGemm, ManyRowsEqualOneRowAtATime) {
  const int64_t R = 37, C = 300, OC = 70;
  const Matrix m(random_values(OC * C, 31), OC, C);
  const auto x = random_values(R * C, 32);
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> all8(static_cast<size_t>(R * OC)), all4(all8.size()), one8(all8.size()), one4(all8.size());
    cpu::matmul_packed_q8(all8.data(), OC, x.data(), C, m.p8.data(), nullptr, R, C, OC, isa);
    cpu::matmul_packed_q4(all4.data(), OC, x.data(), C, m.p4.data(), nullptr, R, C, OC, isa);
    for (int64_t r = 0; r < R; ++r) {
      cpu::matmul_packed_q8(one8.data() + r * OC, OC, x.data() + r * C, C, m.p8.data(), nullptr, 1, C, OC, isa);
      cpu::matmul_packed_q4(one4.data() + r * OC, OC, x.data() + r * C, C, m.p4.data(), nullptr, 1, C, OC, isa);
    }
    EXPECT_EQ(all8, one8) << cpu::to_string(isa);
    EXPECT_EQ(all4, one4) << cpu::to_string(isa);
  }
}

TEST(QuantGemm, ResultsDoNotDependOnTheThreadCount) {
  const int64_t R = 45, C = 520, OC = 203;
  const Matrix m(random_values(OC * C, 41), OC, C);
  const auto x = random_values(R * C, 42);
  const int before = omp_get_max_threads();
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> first8, first4;
    for (const int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> got8(static_cast<size_t>(R * OC)), got4(got8.size());
      cpu::gemm_packed_q8(got8.data(), OC, x.data(), C, m.p8.data(), nullptr, R, C, OC, isa);
      cpu::gemm_packed_q4(got4.data(), OC, x.data(), C, m.p4.data(), nullptr, R, C, OC, isa);
      if (first8.empty()) {
        first8 = got8;
        first4 = got4;
      }
      EXPECT_EQ(got8, first8) << cpu::to_string(isa) << " threads " << threads;
      EXPECT_EQ(got4, first4) << cpu::to_string(isa) << " threads " << threads;
    }
  }
  omp_set_num_threads(before);
}

// Weights of -128 (possible in a file) and q4 codes 0 and 15 against inputs
// of +-127 at the ends of the unsigned and signed ranges stay exact.
TEST(QuantGemm, ExtremeCodesStayExact) {
  const int64_t R = 9, C = 64, OC = 19, nb = 2;
  std::vector<BlockQ8> b8(static_cast<size_t>(OC * nb));
  std::vector<BlockQ4> b4(b8.size());
  for (size_t i = 0; i < b8.size(); ++i) {
    b8[i].scale = f32_to_f16(1.0f);
    b4[i].scale = f32_to_f16(1.0f);
    for (int e = 0; e < 32; ++e) b8[i].q[e] = static_cast<int8_t>(i % 3 == 0 ? -128 : 127);
    for (int j = 0; j < 16; ++j) b4[i].q[j] = i % 3 == 0 ? 0x00 : 0xFF;
  }
  std::vector<PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(OC) * nb));
  std::vector<PackedQ4> p4(p8.size());
  cpu::pack_q8(p8.data(), b8.data(), OC, C);
  cpu::pack_q4(p4.data(), b4.data(), OC, C);
  std::vector<float> x(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) x[static_cast<size_t>(r * C + c)] = r % 2 == 0 ? -1.0f : 1.0f;
  const auto want8 = ref::gemm_q8(x.data(), C, b8.data(), nullptr, R, C, OC);
  const auto want4 = ref::gemm_q4(x.data(), C, b4.data(), nullptr, R, C, OC);
  // The reference's own integer dots: row 0 (x = -127), output 0 (w = -128 then 127).
  const float xs = f16_to_f32(f32_to_f16(1.0f / 127.0f));
  EXPECT_EQ(want8[0], std::fma(32.0f * 127 * -127, xs, 32.0f * 128 * 127 * xs));
  for (const cpu::Q8Isa isa : cpu::q8_isas_here()) {
    std::vector<float> got8(want8.size()), got4(want4.size());
    cpu::gemm_packed_q8(got8.data(), OC, x.data(), C, p8.data(), nullptr, R, C, OC, isa);
    cpu::gemm_packed_q4(got4.data(), OC, x.data(), C, p4.data(), nullptr, R, C, OC, isa);
    EXPECT_EQ(got8, want8) << cpu::to_string(isa);
    EXPECT_EQ(got4, want4) << cpu::to_string(isa);
  }
}

// Close to the double product of the dequantized operands (ref::matmul_q8 /
// matmul_q4): the float sums of the blocks are the only difference.
TEST(QuantGemm, CloseToTheDoubleReference) {
  const int64_t R = 13, C = 777, OC = 33;
  const Matrix m(random_values(OC * C, 51), OC, C);
  const auto x = random_values(R * C, 52);
  const auto d8 = ref::matmul_q8(x.data(), m.b8.data(), nullptr, R, C, OC);
  const auto d4 = ref::matmul_q4(x.data(), m.b4.data(), nullptr, R, C, OC);
  std::vector<float> got8(static_cast<size_t>(R * OC)), got4(got8.size());
  cpu::gemm_packed_q8(got8.data(), OC, x.data(), C, m.p8.data(), nullptr, R, C, OC);
  cpu::gemm_packed_q4(got4.data(), OC, x.data(), C, m.p4.data(), nullptr, R, C, OC);
  test::expect_close(got8, d8, 1e-5, "q8");
  test::expect_close(got4, d4, 1e-5, "q4");
}

TEST(QuantGemm, BadShapesAreOneLineErrors) {
  const Matrix m(random_values(8 * 32, 61), 8, 32);
  std::vector<float> x(64), out(64);
  test::expect_error([&] { cpu::gemm_packed_q8(out.data(), 8, x.data(), 32, m.p8.data(), nullptr, 2, 0, 8); },
                     {"gemm_q8", "bad shape", "C=0"});
  test::expect_error([&] { cpu::gemm_packed_q4(out.data(), 4, x.data(), 32, m.p4.data(), nullptr, 2, 32, 8); },
                     {"gemm_q4", "bad shape", "ld_out=4"});
  test::expect_error([&] { cpu::gemm_packed_q8(out.data(), 8, x.data(), 16, m.p8.data(), nullptr, 2, 32, 8); },
                     {"gemm_q8", "ld_x=16"});
  test::expect_error([&] { cpu::pack_q8(nullptr, m.b8.data(), -1, 32); }, {"pack_q8", "bad shape"});
  test::expect_error([&] { cpu::pack_q4(nullptr, m.b4.data(), 8, 0); }, {"pack_q4", "bad shape"});
}

}  // namespace
}  // namespace hymba
