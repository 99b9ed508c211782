#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/threading.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/reference/rmsnorm.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

constexpr float kEps = 1e-5f;
constexpr double kForwardTol = 1e-6;   // float32 vs float32 reference, max-relative
constexpr double kRstdTol = 1e-6;      // relative, against a float64 computation
constexpr double kBackwardTol = 1e-4;  // float32 analytic vs float64 finite differences
// Accumulating onto existing gradients may fuse the add into an FMA, so it is
// checked to float rounding rather than bit for bit.
constexpr double kAccumulateTol = 1e-6;

struct RmsShape {
  int64_t N, C;
};

class RmsNormTest : public ::testing::TestWithParam<RmsShape> {};

TEST_P(RmsNormTest, ForwardMatchesReference) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RmsShape shape = GetParam();
  const auto N = shape.N;
  const auto C = shape.C;
  Rng rng(1);
  auto x = random_floats(N * C, rng, -2.0f, 2.0f), w = random_floats(C, rng, 0.5f, 1.5f);
  std::vector<float> out(N * C), ref(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  ref::rmsnorm_forward(ref.data(), x.data(), w.data(), N, C, kEps);
  test::expect_close(out, ref, kForwardTol, "rmsnorm out");
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(x[n * C + c]) * x[n * C + c];
    const double expected = 1.0 / std::sqrt(ss / static_cast<double>(C) + kEps);
    EXPECT_NEAR(rstd[n], expected, kRstdTol * expected) << "row " << n;
  }
  // rstd may be null when not training.
  std::vector<float> out2(N * C);
  cpu::rmsnorm_forward(out2.data(), nullptr, x.data(), w.data(), N, C, kEps);
  EXPECT_EQ(out2, out);
}

TEST_P(RmsNormTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const RmsShape shape = GetParam();
  const auto N = shape.N;
  const auto C = shape.C;
  // With one channel out = sign(x) * w up to eps, so dx ~ eps / x^2 is pure
  // cancellation in float; a large eps keeps it measurable.
  const float eps = C == 1 ? 0.5f : kEps;
  Rng rng(2);
  auto x = random_floats(N * C, rng, -2.0f, 2.0f), w = random_floats(C, rng, 0.5f, 1.5f);
  auto dout = random_floats(N * C, rng);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
  cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);

  auto xd = to_double(x), wd = to_double(w), wt = to_double(dout);
  std::vector<double> ref(N * C);
  auto loss = [&] {
    ref::rmsnorm_forward(ref.data(), xd.data(), wd.data(), N, C, static_cast<double>(eps));
    return test::weighted_sum(ref, wt);
  };
  test::expect_grad_matches(loss, xd, dx, kBackwardTol, "dx");
  test::expect_grad_matches(loss, wd, dw, kBackwardTol, "dweight");

  // Backward accumulates onto non-zero gradients; each gradient alone (the
  // other null) gives the same values.
  auto dx_acc = random_floats(N * C, rng), dw_acc = random_floats(C, rng);
  std::vector<float> dx_expected = dx_acc, dw_expected = dw_acc;
  for (size_t i = 0; i < dx.size(); ++i) dx_expected[i] += dx[i];
  for (size_t i = 0; i < dw.size(); ++i) dw_expected[i] += dw[i];
  cpu::rmsnorm_backward(dx_acc.data(), nullptr, dout.data(), x.data(), w.data(), rstd.data(), N, C);
  cpu::rmsnorm_backward(nullptr, dw_acc.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  test::expect_close(dx_acc, dx_expected, kAccumulateTol, "dx accumulates");
  test::expect_close(dw_acc, dw_expected, kAccumulateTol, "dweight accumulates");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(RmsShape{1, 1}, RmsShape{3, 17}, RmsShape{17, 33}, RmsShape{5, 64},
                                           RmsShape{2, 130}, RmsShape{33, 3}));

TEST(RmsNorm, LargeRowMatchesFloat64) {
  const int64_t N = 3, C = 4099;
  Rng rng(3);
  auto x = random_floats(N * C, rng, -3.0f, 3.0f), w = random_floats(C, rng, 0.5f, 1.5f);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  auto xd = to_double(x), wd = to_double(w);
  std::vector<double> ref(N * C);
  ref::rmsnorm_forward(ref.data(), xd.data(), wd.data(), N, C, static_cast<double>(kEps));
  test::expect_close(out, ref, kForwardTol, "rmsnorm out, C = 4099");
}

TEST(RmsNorm, BackwardIsBitIdenticalAcrossRunsAndThreadCounts) {
  const int64_t N = 1031, C = 197;
  Rng rng(4);
  auto x = random_floats(N * C, rng), w = random_floats(C, rng), dout = random_floats(N * C, rng);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  const int saved_threads = num_threads();
  std::vector<float> first_dx, first_dw;
  for (int threads : {2, 2, 1, 3}) {
    set_num_threads(threads);
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
    cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    if (first_dw.empty()) first_dx = dx, first_dw = dw;
    EXPECT_EQ(std::memcmp(dw.data(), first_dw.data(), C * sizeof(float)), 0) << "dweight, threads = " << threads;
    EXPECT_EQ(std::memcmp(dx.data(), first_dx.data(), N * C * sizeof(float)), 0) << "dx, threads = " << threads;
  }
  set_num_threads(saved_threads);
}

}  // namespace
}  // namespace hymba
