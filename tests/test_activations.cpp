#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>

#include "kernels/cpu/activations.h"
#include "kernels/reference/activations.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

// The fast kernels use a polynomial exp/log accurate to a few float ulps.
constexpr double kForwardTol = 2e-6;   // max-relative, against the float reference
constexpr double kBackwardTol = 1e-4;  // float32 analytic vs float64 finite differences
// Accumulating onto existing gradients may fuse the add into an FMA, so it is
// checked to float rounding rather than bit for bit.
constexpr double kAccumulateTol = 1e-6;

// Adds g to a copy of base: what an accumulating backward must produce.
std::vector<float> plus(std::vector<float> base, const std::vector<float>& g) {
  for (size_t i = 0; i < base.size(); ++i) base[i] += g[i];
  return base;
}

class ElementwiseForward : public ::testing::TestWithParam<int64_t> {};
class ElementwiseBackward : public ::testing::TestWithParam<int64_t> {};

TEST_P(ElementwiseForward, SiluForwardMatchesReference) {
  const int64_t n = GetParam();
  Rng rng(1);
  auto x = random_floats(n, rng, -12.0f, 12.0f);
  std::vector<float> out(n), ref(n);
  cpu::silu_forward(out.data(), x.data(), n);
  ref::silu_forward(ref.data(), x.data(), n);
  test::expect_close(out, ref, kForwardTol, "silu");
}

TEST_P(ElementwiseBackward, SiluBackwardMatchesFiniteDifferences) {
  const int64_t n = GetParam();
  Rng rng(2);
  auto x = random_floats(n, rng, -6.0f, 6.0f), dout = random_floats(n, rng);
  std::vector<float> dx(n, 0.0f);
  cpu::silu_backward(dx.data(), dout.data(), x.data(), n);
  auto xd = to_double(x), w = to_double(dout);
  std::vector<double> out(n);
  auto loss = [&] {
    ref::silu_forward(out.data(), xd.data(), n);
    return test::weighted_sum(out, w);
  };
  test::expect_grad_matches(loss, xd, dx, kBackwardTol, "silu dx");

  auto acc = random_floats(n, rng);
  const auto expected = plus(acc, dx);
  cpu::silu_backward(acc.data(), dout.data(), x.data(), n);
  test::expect_close(acc, expected, kAccumulateTol, "silu backward accumulates");
}

TEST_P(ElementwiseForward, SoftplusForwardMatchesReference) {
  const int64_t n = GetParam();
  Rng rng(3);
  auto x = random_floats(n, rng, -30.0f, 30.0f);
  std::vector<float> out(n), ref(n);
  cpu::softplus_forward(out.data(), x.data(), n);
  ref::softplus_forward(ref.data(), x.data(), n);
  test::expect_close(out, ref, kForwardTol, "softplus");
}

TEST_P(ElementwiseBackward, SoftplusBackwardMatchesFiniteDifferences) {
  const int64_t n = GetParam();
  Rng rng(4);
  auto x = random_floats(n, rng, -25.0f, 25.0f), dout = random_floats(n, rng);
  std::vector<float> dx(n, 0.0f);
  cpu::softplus_backward(dx.data(), dout.data(), x.data(), n);
  auto xd = to_double(x), w = to_double(dout);
  std::vector<double> out(n);
  auto loss = [&] {
    ref::softplus_forward(out.data(), xd.data(), n);
    return test::weighted_sum(out, w);
  };
  test::expect_grad_matches(loss, xd, dx, kBackwardTol, "softplus dx");

  auto acc = random_floats(n, rng);
  const auto expected = plus(acc, dx);
  cpu::softplus_backward(acc.data(), dout.data(), x.data(), n);
  test::expect_close(acc, expected, kAccumulateTol, "softplus backward accumulates");
}

// 40000 crosses the size at which the kernels go parallel.
INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseForward, ::testing::Values(1, 3, 17, 33, 40000));
INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseBackward, ::testing::Values(1, 3, 17, 33, 257));

TEST(Activations, ParallelPathMatchesSmallCallsExactly) {
  // Large calls run in parallel; element-wise results must not change.
  const int64_t n = 40000, chunk = 1000;
  Rng rng(7);
  auto x = random_floats(n, rng, -30.0f, 30.0f), dout = random_floats(n, rng);
  using Fwd = void (*)(float*, const float*, int64_t);
  using Bwd = void (*)(float*, const float*, const float*, int64_t);
  const std::pair<Fwd, Bwd> ops[] = {{cpu::silu_forward, cpu::silu_backward},
                                     {cpu::softplus_forward, cpu::softplus_backward}};
  for (auto [fwd, bwd] : ops) {
    std::vector<float> out(n), out_chunks(n), dx(n, 0.0f), dx_chunks(n, 0.0f);
    fwd(out.data(), x.data(), n);
    bwd(dx.data(), dout.data(), x.data(), n);
    for (int64_t i = 0; i < n; i += chunk) {
      fwd(out_chunks.data() + i, x.data() + i, chunk);
      bwd(dx_chunks.data() + i, dout.data() + i, x.data() + i, chunk);
    }
    EXPECT_EQ(out, out_chunks);
    EXPECT_EQ(dx, dx_chunks);
  }
}

TEST(Softplus, LinearAbove20AndStableFarBelow) {
  const std::vector<float> x = {20.0001f, 25.0f, 88.0f, 1e4f, 3e38f, -100.0f, -1000.0f, -1e30f};
  std::vector<float> out(x.size()), slope(x.size(), 0.0f), ones(x.size(), 1.0f);
  cpu::softplus_forward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  cpu::softplus_backward(slope.data(), ones.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i], x[i]) << "softplus(" << x[i] << ") must be x itself (PyTorch threshold 20)";
    EXPECT_EQ(slope[i], 1.0f) << "slope at " << x[i];
  }
  for (size_t i = 5; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(out[i]) && out[i] >= 0.0f) << "softplus(" << x[i] << ") = " << out[i];
    EXPECT_NEAR(out[i], std::exp(static_cast<double>(x[i])), 1e-38) << "softplus(" << x[i] << ")";
    EXPECT_TRUE(std::isfinite(slope[i]) && slope[i] >= 0.0f) << "slope at " << x[i];
  }
  // Just below the threshold the smooth branch is still in use.
  const float just_below = 19.5f;
  float y = 0.0f;
  cpu::softplus_forward(&y, &just_below, 1);
  EXPECT_NEAR(y, std::log1p(std::exp(19.5)), 2e-6);
}

TEST(Silu, ExtremeInputsStayFinite) {
  const std::vector<float> x = {-1000.0f, -100.0f, -88.0f, 88.0f, 100.0f, 1000.0f};
  std::vector<float> out(x.size()), dx(x.size(), 0.0f), ones(x.size(), 1.0f);
  cpu::silu_forward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  cpu::silu_backward(dx.data(), ones.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(out[i], x[i] > 0 ? x[i] : 0.0f, 1e-30) << "silu(" << x[i] << ")";
    EXPECT_NEAR(dx[i], x[i] > 0 ? 1.0f : 0.0f, 1e-30) << "silu'(" << x[i] << ")";
  }
}

TEST(Activations, NaNPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), one = 1.0f;
  float out = 0.0f, dx = 0.0f;
  cpu::silu_forward(&out, &nan, 1);
  EXPECT_TRUE(std::isnan(out));
  cpu::silu_backward(&dx, &one, &nan, 1);
  EXPECT_TRUE(std::isnan(dx));
  cpu::softplus_forward(&out, &nan, 1);
  EXPECT_TRUE(std::isnan(out));
  dx = 0.0f;
  cpu::softplus_backward(&dx, &one, &nan, 1);
  EXPECT_TRUE(std::isnan(dx));
}

TEST(Activations, NullGradientIsSkipped) {
  const float x = 0.5f, d = 1.0f;
  EXPECT_NO_THROW(cpu::silu_backward(nullptr, &d, &x, 1));
  EXPECT_NO_THROW(cpu::softplus_backward(nullptr, &d, &x, 1));
  EXPECT_NO_THROW(cpu::swiglu_backward(nullptr, nullptr, &d, &x, &x, 1, 1, 1));
}

struct SwigluShape {
  int64_t N, I;
  bool fused;  // gate|up interleaved per row in one [N, 2I] buffer
};

class SwigluTest : public ::testing::TestWithParam<SwigluShape> {};

TEST_P(SwigluTest, ForwardMatchesReference) {
  auto [N, I, fused] = GetParam();
  const int64_t ld_in = fused ? 2 * I : I;
  Rng rng(5);
  // Fused: one [N, 2I] buffer, gate = columns [0, I), up = [I, 2I).
  auto gate_buf = random_floats(N * ld_in, rng, -8.0f, 8.0f);
  auto up_buf = fused ? std::vector<float>() : random_floats(N * I, rng, -2.0f, 2.0f);
  const float* gate = gate_buf.data();
  const float* up = fused ? gate_buf.data() + I : up_buf.data();
  std::vector<float> out(N * I), ref(N * I);
  cpu::swiglu_forward(out.data(), gate, up, N, I, ld_in);
  ref::swiglu_forward(ref.data(), gate, up, N, I, ld_in);
  test::expect_close(out, ref, kForwardTol, "swiglu");
}

TEST_P(SwigluTest, BackwardMatchesFiniteDifferences) {
  // Plain copies: clang 14 cannot capture structured bindings in a lambda.
  const auto [n_rows, inner, fused] = GetParam();
  const int64_t N = n_rows, I = inner;
  const int64_t ld_in = 2 * I;  // gradients land in one fused [N, 2I] buffer
  Rng rng(6);
  auto gu = random_floats(N * ld_in, rng, -4.0f, 4.0f), dout = random_floats(N * I, rng);
  std::vector<float> grad(N * ld_in, 0.0f);
  if (fused) {
    cpu::swiglu_backward(grad.data(), grad.data() + I, dout.data(), gu.data(), gu.data() + I, N, I, ld_in);
  } else {
    // Same data through the separate-buffer layout (ld_in = I), scattered back.
    std::vector<float> gate(N * I), up(N * I), dgate(N * I, 0.0f), dup(N * I, 0.0f);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t i = 0; i < I; ++i) gate[r * I + i] = gu[r * ld_in + i], up[r * I + i] = gu[r * ld_in + I + i];
    cpu::swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), N, I, I);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t i = 0; i < I; ++i)
        grad[r * ld_in + i] = dgate[r * I + i], grad[r * ld_in + I + i] = dup[r * I + i];
  }
  auto gud = to_double(gu), w = to_double(dout);
  std::vector<double> out(N * I);
  auto loss = [&] {
    ref::swiglu_forward(out.data(), gud.data(), gud.data() + I, N, I, ld_in);
    return test::weighted_sum(out, w);
  };
  test::expect_grad_matches(loss, gud, grad, kBackwardTol, "swiglu dgate|dup");

  // Accumulates; each half alone (the other null) gives the same values.
  auto acc = random_floats(N * ld_in, rng);
  const auto expected = plus(acc, grad);
  cpu::swiglu_backward(acc.data(), nullptr, dout.data(), gu.data(), gu.data() + I, N, I, ld_in);
  cpu::swiglu_backward(nullptr, acc.data() + I, dout.data(), gu.data(), gu.data() + I, N, I, ld_in);
  test::expect_close(acc, expected, kAccumulateTol, "swiglu backward accumulates");

  // accumulate = false overwrites whatever was there (NaN included) with
  // exactly the values accumulating into zeros gives.
  std::vector<float> over(N * ld_in, std::numeric_limits<float>::quiet_NaN());
  cpu::swiglu_backward(over.data(), over.data() + I, dout.data(), gu.data(), gu.data() + I, N, I, ld_in, false);
  std::vector<float> zeroed(N * ld_in, 0.0f);
  cpu::swiglu_backward(zeroed.data(), zeroed.data() + I, dout.data(), gu.data(), gu.data() + I, N, I, ld_in);
  for (size_t i = 0; i < over.size(); ++i) ASSERT_EQ(over[i], zeroed[i]) << "overwrite, element " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwigluTest,
                         ::testing::Values(SwigluShape{1, 1, false}, SwigluShape{1, 1, true},
                                           SwigluShape{3, 17, false}, SwigluShape{3, 17, true},
                                           SwigluShape{5, 33, true}, SwigluShape{33, 9, false},
                                           SwigluShape{2, 300, true}));

TEST(Swiglu, LargeFusedForwardMatchesReference) {
  const int64_t N = 64, I = 700, ld_in = 2 * I;  // crosses the parallel threshold
  Rng rng(8);
  auto gu = random_floats(N * ld_in, rng, -8.0f, 8.0f);
  std::vector<float> out(N * I), ref(N * I);
  cpu::swiglu_forward(out.data(), gu.data(), gu.data() + I, N, I, ld_in);
  ref::swiglu_forward(ref.data(), gu.data(), gu.data() + I, N, I, ld_in);
  test::expect_close(out, ref, kForwardTol, "swiglu N=64 I=700 fused");
}

}  // namespace
}  // namespace hymba
