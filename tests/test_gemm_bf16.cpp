// The bf16 matrix product (kernels/cpu/gemm_bf16.h) on every instruction set
// this CPU has: against the float64 reference of the rounded elements on
// awkward shapes and all four layouts, against the exact product within
// bf16's tolerance, the documented summation order on hand-made sums,
// thread-count independence, and matmul_forward/backward under a bf16 scope.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/reference/gemm_bf16.h"

namespace hymba {
namespace {

using cpu::Bf16GemmIsa;
using cpu::GemmOperand;

std::vector<float> random_normal(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

struct Shape {
  int64_t M, N, K;
};

// Rows, columns and k that leave ragged micro tiles (12 x 32), odd k and
// more than one block of k (256 pairs).
const Shape kShapes[] = {{1, 1, 1},    {5, 17, 3},  {12, 32, 2},  {13, 33, 255},
                         {25, 70, 256}, {3, 40, 513}, {97, 5, 514}, {130, 65, 600}};

// Stores op(X) [rows, cols] as X (transposed: as X^T), with `pad` spare columns per row.
GemmOperand store(std::vector<float>& buf, int64_t rows, int64_t cols, bool transposed, uint64_t seed) {
  const int64_t pad = 3, stored_rows = transposed ? cols : rows, ld = (transposed ? rows : cols) + pad;
  buf = random_normal(static_cast<size_t>(stored_rows * ld), seed);
  return {buf.data(), ld, transposed};
}

TEST(GemmBf16, MatchesTheFloat64ReferenceOnEveryLayoutAndIsa) {
  for (const Shape& s : kShapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 1.0f, 0.5f}) {
          SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " tA=" << ta
                                          << " tB=" << tb << " beta=" << beta);
          std::vector<float> a, b;
          const GemmOperand A = store(a, s.M, s.K, ta, 1 + s.K), B = store(b, s.K, s.N, tb, 2 + s.N);
          const ref::GemmBf16Result want = ref::gemm_bf16(s.M, s.N, s.K, A, B);
          const int64_t ldc = s.N + 2;
          const std::vector<float> c0 = random_normal(static_cast<size_t>(s.M * ldc), 3);
          for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
            std::vector<float> c = c0;
            cpu::gemm_bf16(s.M, s.N, s.K, A, B, beta, c.data(), ldc, isa);
            for (int64_t i = 0; i < s.M; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                const size_t at = static_cast<size_t>(i * ldc + j);
                if (j >= s.N) {
                  ASSERT_EQ(c[at], c0[at]) << "wrote past column N";
                  continue;
                }
                const size_t w = static_cast<size_t>(i * s.N + j);
                const double start = beta == 0.0f ? 0.0 : double{beta} * c0[at];
                // float32 sums of K products plus one per block and C's: each
                // rounding is at most 2^-24 of the running magnitude.
                const double tol = (s.K + 4) * 0x1p-24 * (want.magnitude[w] + std::fabs(start)) + 1e-30;
                ASSERT_NEAR(c[at], start + want.c[w], tol) << to_string(isa) << " i=" << i << " j=" << j;
              }
          }
        }
}

TEST(GemmBf16, StaysWithinBf16ToleranceOfTheExactProduct) {
  const int64_t M = 40, N = 50, K = 300;
  const auto a = random_normal(M * K, 4), b = random_normal(K * N, 5);
  for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
    std::vector<float> c(M * N);
    cpu::gemm_bf16(M, N, K, {a.data(), K, false}, {b.data(), N, false}, 0.0f, c.data(), N, isa);
    double worst = 0.0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          exact += double{a[i * K + k]} * b[k * N + j];
          magnitude += std::fabs(double{a[i * K + k]} * b[k * N + j]);
        }
        // Each factor rounds by at most 2^-9 of itself, a product by 2^-8.
        const double err = std::fabs(c[i * N + j] - exact) / magnitude;
        EXPECT_LE(err, 0x1p-8 + K * 0x1p-24) << to_string(isa);
        worst = std::max(worst, err);
      }
    EXPECT_GT(worst, 1e-6) << to_string(isa) << ": no bf16 rounding seen; were the inputs rounded at all?";
  }
}

TEST(GemmBf16, BetaZeroNeverReadsC) {
  const auto a = random_normal(6 * 600, 6), b = random_normal(600 * 9, 7);
  for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
    for (const int64_t K : {0, 7, 600}) {  // no product, one block of k, two
      std::vector<float> c(6 * 9, NAN);
      cpu::gemm_bf16(6, 9, K, {a.data(), 600, false}, {b.data(), 9, false}, 0.0f, c.data(), 9, isa);
      for (const float x : c) ASSERT_TRUE(std::isfinite(x)) << to_string(isa) << " K=" << K;
      if (K == 0) {
        EXPECT_EQ(c, std::vector<float>(6 * 9, 0.0f));
      }
    }
  }
}

// Products of powers of two, summed as documented: a block's sum starts at
// zero and adds product by product; blocks are added to C in order.
TEST(GemmBf16, SumsInTheDocumentedOrder) {
  const float tiny = 0x1p-12f;  // tiny * tiny = 2^-24, half an ulp of 1
  auto product = [](const std::vector<float>& a, const std::vector<float>& b, float beta, float c0, Bf16GemmIsa isa) {
    float c = c0;
    const auto K = static_cast<int64_t>(a.size());
    cpu::gemm_bf16(1, 1, K, {a.data(), K, false}, {b.data(), 1, false}, beta, &c, 1, isa);
    return c;
  };
  for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
    SCOPED_TRACE(to_string(isa));
    // 1 + (2^-24 + 2^-24): the block's sum reaches C whole.
    EXPECT_EQ(product({tiny, tiny}, {tiny, tiny}, 1.0f, 1.0f, isa), 1.0f + 0x1p-23f);
    // (1 + 2^-24) + 2^-24 inside one block: each addition rounds back to 1
    // on the portable path (vdpbf16ps as Intel's manual writes it; AMD Zen 5
    // does the same). Hardware that adds a pair's two products before
    // rounding gives 1 + 2^-23; the header allows the paths to differ so.
    const float pair = product({1.0f, 0.0f, tiny, tiny}, {1.0f, 0.0f, tiny, tiny}, 0.0f, 0.0f, isa);
    if (isa == Bf16GemmIsa::kPortable) {
      EXPECT_EQ(pair, 1.0f);
    } else {
      EXPECT_TRUE(pair == 1.0f || pair == 1.0f + 0x1p-23f) << pair;
    }
    // The same products in two blocks: 1 + (2^-24 + 2^-24).
    const int64_t K = 2 * cpu::kBf16GemmBlockPairs + 2;
    std::vector<float> a(K, 0.0f), b(K, 0.0f);
    a[0] = b[0] = 1.0f;
    a[K - 2] = b[K - 2] = a[K - 1] = b[K - 1] = tiny;
    EXPECT_EQ(product(a, b, 0.0f, 0.0f, isa), 1.0f + 0x1p-23f);
  }
}

TEST(GemmBf16, ResultsDoNotDependOnTheThreadCount) {
  const int64_t M = 200, N = 70, K = 513;
  const auto a = random_normal(K * M, 8), b = random_normal(N * K, 9);
  const int before = omp_get_max_threads();
  for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
    std::vector<float> one(M * N), two(M * N);
    omp_set_num_threads(1);
    cpu::gemm_bf16(M, N, K, {a.data(), M, true}, {b.data(), K, true}, 0.0f, one.data(), N, isa);
    omp_set_num_threads(2);
    cpu::gemm_bf16(M, N, K, {a.data(), M, true}, {b.data(), K, true}, 0.0f, two.data(), N, isa);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << to_string(isa);
  }
  omp_set_num_threads(before);
}

TEST(GemmBf16, NamesItsInstructionSets) {
  const std::vector<Bf16GemmIsa> here = cpu::bf16_gemm_isas_here();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(here.front(), Bf16GemmIsa::kPortable);
  EXPECT_TRUE(cpu::bf16_gemm_isa_available(cpu::best_bf16_gemm_isa()));
  EXPECT_STREQ(to_string(Bf16GemmIsa::kAvx512Bf16), "avx512-bf16");
  if (!cpu::bf16_gemm_isa_available(Bf16GemmIsa::kAvx512Bf16)) {
    float c = 0.0f, one = 1.0f;
    EXPECT_THROW(cpu::gemm_bf16(1, 1, 1, {&one, 1, false}, {&one, 1, false}, 0.0f, &c, 1, Bf16GemmIsa::kAvx512Bf16),
                 Error);
  }
}

// matmul_forward/backward inside a bf16 scope are these products; outside
// it they are OpenBLAS's float32 ones again.
TEST(MatmulPrecision, ScopeRoutesLinearLayersThroughBf16) {
  const int64_t BT = 30, C = 20, OC = 24;
  const auto x = random_normal(BT * C, 10), w = random_normal(OC * C, 11), bias = random_normal(OC, 12),
             dout = random_normal(BT * OC, 13);
  auto forward = [&] {
    std::vector<float> out(BT * OC);
    cpu::matmul_forward(out.data(), x.data(), w.data(), bias.data(), BT, C, OC);
    return out;
  };
  auto backward = [&] {
    std::vector<float> dx(BT * C, 0.5f), dw(OC * C, 0.25f);
    cpu::matmul_backward(dx.data(), dw.data(), nullptr, dout.data(), x.data(), w.data(), BT, C, OC);
    dx.insert(dx.end(), dw.begin(), dw.end());
    return dx;
  };
  const std::vector<float> f32_out = forward(), f32_grads = backward();
  for (const Bf16GemmIsa isa : cpu::bf16_gemm_isas_here()) {
    std::vector<float> out, grads;
    {
      const cpu::MatmulPrecisionScope scope(cpu::MatmulPrecision::kBf16, isa);
      EXPECT_EQ(cpu::matmul_precision(), cpu::MatmulPrecision::kBf16);
      out = forward();
      grads = backward();
    }
    EXPECT_EQ(cpu::matmul_precision(), cpu::MatmulPrecision::kF32);
    std::vector<float> want_out(BT * OC), want_dx(BT * C, 0.5f), want_dw(OC * C, 0.25f);
    for (int64_t r = 0; r < BT; ++r)
      for (int64_t j = 0; j < OC; ++j) want_out[r * OC + j] = bias[j];
    cpu::gemm_bf16(BT, OC, C, {x.data(), C, false}, {w.data(), C, true}, 1.0f, want_out.data(), OC, isa);
    cpu::gemm_bf16(BT, C, OC, {dout.data(), OC, false}, {w.data(), C, false}, 1.0f, want_dx.data(), C, isa);
    cpu::gemm_bf16(OC, C, BT, {dout.data(), OC, true}, {x.data(), C, false}, 1.0f, want_dw.data(), C, isa);
    want_dx.insert(want_dx.end(), want_dw.begin(), want_dw.end());
    EXPECT_EQ(out, want_out) << to_string(isa);
    EXPECT_EQ(grads, want_dx) << to_string(isa);
    EXPECT_NE(out, f32_out) << "the bf16 scope left the float32 product in place";
  }
  EXPECT_EQ(forward(), f32_out);
  EXPECT_EQ(backward(), f32_grads);
}

TEST(MatmulPrecision, ParsesItsNames) {
  EXPECT_EQ(cpu::parse_matmul_precision("bf16"), cpu::MatmulPrecision::kBf16);
  EXPECT_EQ(cpu::parse_matmul_precision("f32"), cpu::MatmulPrecision::kF32);
  EXPECT_FALSE(cpu::parse_matmul_precision("fp16").has_value());
  EXPECT_STREQ(to_string(cpu::MatmulPrecision::kBf16), "bf16");
}

}  // namespace
}  // namespace hymba
