#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/rope.h"
#include "kernels/reference/rope.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

constexpr float kTheta = 10000.0f;
constexpr double kForwardTol = 2e-6;   // float32 vs float32 reference, max-relative
constexpr double kFormulaTol = 2e-6;   // absolute, against a float64 evaluation (inputs in [-1, 1])
constexpr double kBackwardTol = 1e-5;  // float32 analytic vs float64 finite differences
constexpr double kInverseTol = 1e-6;   // absolute, backward(forward(x)) vs x
constexpr double kRelativeTol = 1e-5;  // dot products of rotated vectors at shifted positions
constexpr float kSentinel = 42.0f;     // fills the parts of a row outside the rotated slice

struct RopeShape {
  int64_t B, T, H, D;
  int64_t pad;  // ld = H * D + pad
};

// pos0 per sequence: 0, then growing offsets (including a large one).
std::vector<int64_t> offsets(int64_t B) {
  std::vector<int64_t> pos0(B);
  for (int64_t b = 0; b < B; ++b) pos0[b] = b == 0 ? 0 : (b == 1 ? 7 : 100003 * b);
  return pos0;
}

class RopeTest : public ::testing::TestWithParam<RopeShape> {};

TEST_P(RopeTest, ForwardMatchesReference) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RopeShape shape = GetParam();
  const auto B = shape.B;
  const auto T = shape.T;
  const auto H = shape.H;
  const auto D = shape.D;
  const auto pad = shape.pad;
  const int64_t ld = H * D + pad;
  Rng rng(1);
  auto x = random_floats(B * T * ld, rng);
  auto pos0 = offsets(B);
  auto ref = x;
  cpu::rope_forward(x.data(), ld, B, T, H, D, pos0.data(), kTheta);
  ref::rope_forward(ref.data(), ld, B, T, H, D, pos0.data(), static_cast<double>(kTheta));
  test::expect_close(x, ref, kForwardTol, "rope forward");
}

TEST_P(RopeTest, MatchesExplicitFormulaInFloat64) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RopeShape shape = GetParam();
  const auto B = shape.B;
  const auto T = shape.T;
  const auto H = shape.H;
  const auto D = shape.D;
  const auto pad = shape.pad;
  const int64_t ld = H * D + pad;
  Rng rng(2);
  auto x = random_floats(B * T * ld, rng);
  auto pos0 = offsets(B);
  std::vector<double> expected = to_double(x);
  ref::rope_forward(expected.data(), ld, B, T, H, D, pos0.data(), static_cast<double>(kTheta));
  cpu::rope_forward(x.data(), ld, B, T, H, D, pos0.data(), kTheta);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], expected[i], kFormulaTol) << "element " << i;
}

TEST_P(RopeTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RopeShape shape = GetParam();
  const auto B = shape.B;
  const auto T = shape.T;
  const auto H = shape.H;
  const auto D = shape.D;
  const auto pad = shape.pad;
  const int64_t ld = H * D + pad;
  Rng rng(3);
  auto x = random_floats(B * T * ld, rng), dout = random_floats(B * T * ld, rng);
  // Padding columns are not outputs: zero their weight (and their gradient).
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = H * D; j < ld; ++j) dout[r * ld + j] = 0.0f;
  auto pos0 = offsets(B);
  std::vector<float> dx = dout;  // rope_backward transforms in place
  cpu::rope_backward(dx.data(), ld, B, T, H, D, pos0.data(), kTheta);
  auto xd = to_double(x), w = to_double(dout);
  std::vector<double> rotated;
  auto loss = [&] {
    rotated = xd;
    ref::rope_forward(rotated.data(), ld, B, T, H, D, pos0.data(), static_cast<double>(kTheta));
    return test::weighted_sum(rotated, w);
  };
  test::expect_grad_matches(loss, xd, dx, kBackwardTol, "rope dx");
}

TEST_P(RopeTest, BackwardInvertsForward) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RopeShape shape = GetParam();
  const auto B = shape.B;
  const auto T = shape.T;
  const auto H = shape.H;
  const auto D = shape.D;
  const auto pad = shape.pad;
  const int64_t ld = H * D + pad;
  Rng rng(4);
  const auto x = random_floats(B * T * ld, rng);
  auto pos0 = offsets(B);
  auto y = x;
  cpu::rope_forward(y.data(), ld, B, T, H, D, pos0.data(), kTheta);
  cpu::rope_backward(y.data(), ld, B, T, H, D, pos0.data(), kTheta);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], kInverseTol) << "element " << i;
}

TEST_P(RopeTest, TableMatchesDirectBitForBit) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RopeShape shape = GetParam();
  const auto B = shape.B;
  const auto T = shape.T;
  const auto H = shape.H;
  const auto D = shape.D;
  const auto pad = shape.pad;
  const int64_t ld = H * D + pad;
  Rng rng(8);
  const auto x = random_floats(B * T * ld, rng);
  std::vector<float> cos_t(T * D / 2), sin_t(T * D / 2);
  cpu::rope_table(cos_t.data(), sin_t.data(), T, D, kTheta);
  auto direct = x, table = x;
  cpu::rope_forward(direct.data(), ld, B, T, H, D, nullptr, kTheta);
  cpu::rope_forward_table(table.data(), ld, B, T, H, D, cos_t.data(), sin_t.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(table[i], direct[i]) << "forward, element " << i;
  cpu::rope_backward(direct.data(), ld, B, T, H, D, nullptr, kTheta);
  cpu::rope_backward_table(table.data(), ld, B, T, H, D, cos_t.data(), sin_t.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(table[i], direct[i]) << "backward, element " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeShape{1, 1, 1, 2, 0}, RopeShape{2, 3, 2, 8, 0},
                                           RopeShape{3, 5, 3, 34, 5}, RopeShape{1, 17, 1, 66, 0},
                                           RopeShape{2, 9, 4, 16, 3}, RopeShape{3, 1, 2, 128, 1}));

TEST(Rope, PerBatchOffsetsShiftPositions) {
  // Sequence 1 starts at position 5: its token t must equal token 5 + t of a
  // single sequence started at 0, bit for bit.
  const int64_t T = 3, H = 2, D = 16, ld = H * D;
  Rng rng(5);
  auto row = random_floats(ld, rng);
  std::vector<float> batched(2 * T * ld), single(8 * ld);
  for (int64_t r = 0; r < 2 * T; ++r) std::copy(row.begin(), row.end(), batched.begin() + r * ld);
  for (int64_t r = 0; r < 8; ++r) std::copy(row.begin(), row.end(), single.begin() + r * ld);
  const int64_t pos0[2] = {0, 5};
  cpu::rope_forward(batched.data(), ld, 2, T, H, D, pos0, kTheta);
  cpu::rope_forward(single.data(), ld, 1, 8, H, D, nullptr, kTheta);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < ld; ++j) {
      EXPECT_EQ(batched[t * ld + j], single[t * ld + j]) << "sequence 0, token " << t;
      EXPECT_EQ(batched[(T + t) * ld + j], single[(5 + t) * ld + j]) << "sequence 1, token " << t;
    }
}

TEST(Rope, StridedRowsTouchOnlyTheSlice) {
  // Q occupies columns [3, 3 + H*D) of rows ld = 50 wide (e.g. a fused QKV).
  const int64_t B = 2, T = 3, H = 2, D = 10, ld = 50, col0 = 3;
  Rng rng(6);
  std::vector<float> wide(B * T * ld, kSentinel);
  auto q = random_floats(B * T * H * D, rng);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = 0; j < H * D; ++j) wide[r * ld + col0 + j] = q[r * H * D + j];
  const int64_t pos0[2] = {4, 9};
  cpu::rope_forward(wide.data() + col0, ld, B, T, H, D, pos0, kTheta);
  cpu::rope_forward(q.data(), H * D, B, T, H, D, pos0, kTheta);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = 0; j < ld; ++j) {
      if (j < col0 || j >= col0 + H * D) {
        EXPECT_EQ(wide[r * ld + j], kSentinel) << "row " << r << " column " << j << " is outside the slice";
      } else {
        EXPECT_EQ(wide[r * ld + j], q[r * H * D + j - col0]) << "row " << r << " column " << j;
      }
    }
  cpu::rope_backward(wide.data() + col0, ld, B, T, H, D, pos0, kTheta);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = 0; j < ld; ++j) {
      if (j >= col0 && j < col0 + H * D) continue;
      EXPECT_EQ(wide[r * ld + j], kSentinel) << "backward wrote outside the slice";
    }
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  const int64_t D = 64;
  Rng rng(7);
  const auto q = random_floats(D, rng), k = random_floats(D, rng);
  auto rotated_dot = [&](int64_t pq, int64_t pk) {
    auto qr = q, kr = k;
    cpu::rope_forward(qr.data(), D, 1, 1, 1, D, &pq, kTheta);
    cpu::rope_forward(kr.data(), D, 1, 1, 1, D, &pk, kTheta);
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += static_cast<double>(qr[i]) * kr[i];
    return s;
  };
  for (int64_t delta : {0, 1, 5, 37}) {
    const double base = rotated_dot(delta, 0);
    for (int64_t shift : {1, 100, 4096, 123457}) {
      EXPECT_NEAR(rotated_dot(shift + delta, shift), base, kRelativeTol)
          << "delta " << delta << ", shift " << shift;
    }
  }
}

TEST(Rope, OddHeadDimensionThrows) {
  std::vector<float> x(12, 1.0f);
  EXPECT_THROW(cpu::rope_forward(x.data(), 3, 1, 4, 1, 3, nullptr, kTheta), Error);
  EXPECT_THROW(cpu::rope_backward(x.data(), 3, 1, 4, 1, 3, nullptr, kTheta), Error);
  try {
    cpu::rope_forward(x.data(), 3, 1, 4, 1, 3, nullptr, kTheta);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("D = 3"), std::string::npos) << e.what();
  }
}

TEST(Rope, RowStrideSmallerThanHeadsThrows) {
  std::vector<float> x(64, 1.0f);
  EXPECT_THROW(cpu::rope_forward(x.data(), 7, 1, 2, 1, 8, nullptr, kTheta), Error);
}

}  // namespace
}  // namespace hymba
