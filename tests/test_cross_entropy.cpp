#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/threading.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/reference/cross_entropy.h"
#include "test_util.h"

namespace hymba {
namespace {

using cpu::kIgnoreIndex;
using test::random_floats;
using test::to_double;

constexpr double kForwardTol = 1e-5;   // relative, loss vs the float64 reference
constexpr double kBackwardTol = 1e-4;  // float32 analytic vs float64 finite differences
// Accumulating onto existing gradients may fuse the add into an FMA, so it is
// checked to float rounding rather than bit for bit.
constexpr double kAccumulateTol = 1e-6;
constexpr double kHugeGradTol = 1e-5;  // max-relative, gradients at logits ~ +-1000 vs float64 softmax

struct CeShape {
  int64_t N, V;
  float smoothing;
};

// Random targets with every fourth row ignored.
std::vector<int32_t> random_targets(int64_t N, int64_t V, Rng& rng) {
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n)
    t[n] = n % 4 == 3 ? kIgnoreIndex : static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  return t;
}

class CrossEntropyTest : public ::testing::TestWithParam<CeShape> {};

TEST_P(CrossEntropyTest, ForwardMatchesReference) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const CeShape shape = GetParam();
  const auto N = shape.N;
  const auto V = shape.V;
  const auto eps = shape.smoothing;
  Rng rng(1);
  auto logits = random_floats(N * V, rng, -5.0f, 5.0f);
  auto targets = random_targets(N, V, rng);
  std::vector<float> losses(N, -1.0f);
  auto result = cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V, eps);
  auto ld = to_double(logits);
  std::vector<double> ref_losses(N);
  const double ref_sum = ref::cross_entropy_forward(ref_losses.data(), ld.data(), targets.data(), N, V,
                                                    static_cast<double>(eps));
  int64_t scored = 0;
  for (int32_t t : targets) scored += t != kIgnoreIndex;
  EXPECT_EQ(result.scored, scored);
  EXPECT_NEAR(result.loss_sum, ref_sum, kForwardTol * std::max(1.0, std::abs(ref_sum)));
  EXPECT_NEAR(result.mean(), scored ? ref_sum / scored : 0.0, kForwardTol * std::max(1.0, std::abs(ref_sum)));
  test::expect_close(losses, ref_losses, kForwardTol, "per-row losses");
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] != kIgnoreIndex) continue;
    EXPECT_EQ(losses[n], 0.0f) << "ignored row " << n;
  }
  // losses may be null.
  auto again = cpu::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V, eps);
  EXPECT_EQ(again.loss_sum, result.loss_sum);
}

TEST_P(CrossEntropyTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const CeShape shape = GetParam();
  const auto N = shape.N;
  const auto V = shape.V;
  const auto eps = shape.smoothing;
  Rng rng(2);
  auto logits = random_floats(N * V, rng, -5.0f, 5.0f);
  auto targets = random_targets(N, V, rng);
  const float dloss = 0.37f;
  std::vector<float> grad(N * V, 0.0f);
  cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, eps, dloss);
  auto ld = to_double(logits);
  auto loss = [&] {
    return dloss * ref::cross_entropy_forward<double>(nullptr, ld.data(), targets.data(), N, V,
                                                      static_cast<double>(eps));
  };
  test::expect_grad_matches(loss, ld, grad, kBackwardTol, "dlogits");
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] != kIgnoreIndex) continue;
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(grad[n * V + v], 0.0f) << "ignored row " << n;
  }

  // Accumulates onto non-zero gradients.
  auto acc = random_floats(N * V, rng);
  auto expected = acc;
  for (size_t i = 0; i < acc.size(); ++i) expected[i] += grad[i];
  cpu::cross_entropy_backward(acc.data(), logits.data(), targets.data(), N, V, eps, dloss);
  test::expect_close(acc, expected, kAccumulateTol, "dlogits accumulates");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CrossEntropyTest,
                         ::testing::Values(CeShape{1, 1, 0.0f}, CeShape{3, 5, 0.0f}, CeShape{3, 5, 0.1f},
                                           CeShape{17, 33, 0.0f}, CeShape{17, 33, 0.1f}, CeShape{9, 100, 0.1f},
                                           CeShape{5, 257, 0.0f}));

TEST(CrossEntropy, AllRowsIgnoredGiveZeroLossAndNoGradient) {
  const int64_t N = 4, V = 7;
  Rng rng(3);
  auto logits = random_floats(N * V, rng);
  const std::vector<int32_t> targets(N, kIgnoreIndex);
  std::vector<float> losses(N, 5.0f);
  auto r = cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V, 0.1f);
  EXPECT_EQ(r.scored, 0);
  EXPECT_EQ(r.correct, 0);
  EXPECT_EQ(r.loss_sum, 0.0);
  EXPECT_EQ(r.mean(), 0.0);
  EXPECT_EQ(losses, std::vector<float>(N, 0.0f));
  std::vector<float> grad(N * V, 0.0f);
  cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, 0.1f, 1.0f);
  EXPECT_EQ(grad, std::vector<float>(N * V, 0.0f));
}

TEST(CrossEntropy, HugeLogitsStayFiniteAndAccurate) {
  const int64_t N = 6, V = 50;
  Rng rng(4);
  auto logits = random_floats(N * V, rng, -1000.0f, 1000.0f);
  logits[2 * V + 7] = 1000.0f;  // ties and extremes
  logits[2 * V + 9] = 1000.0f;
  logits[3 * V + 1] = -1000.0f;
  const std::vector<int32_t> targets = {0, 3, 9, 1, kIgnoreIndex, 49};
  for (float eps : {0.0f, 0.1f}) {
    std::vector<float> losses(N);
    auto r = cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V, eps);
    auto ld = to_double(logits);
    std::vector<double> ref_losses(N);
    const double ref_sum =
        ref::cross_entropy_forward(ref_losses.data(), ld.data(), targets.data(), N, V, static_cast<double>(eps));
    ASSERT_TRUE(std::isfinite(r.loss_sum));
    EXPECT_NEAR(r.loss_sum, ref_sum, kForwardTol * std::abs(ref_sum));
    test::expect_close(losses, ref_losses, kForwardTol, "huge-logit losses");

    std::vector<float> grad(N * V, 0.0f);
    cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, eps, 1.0f);
    // Analytic float64 gradient: softmax - (1 - eps) onehot - eps / V.
    std::vector<double> expected(N * V, 0.0);
    for (int64_t n = 0; n < N; ++n) {
      if (targets[n] == kIgnoreIndex) continue;
      double m = ld[n * V];
      for (int64_t v = 1; v < V; ++v) m = std::max(m, ld[n * V + v]);
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(ld[n * V + v] - m);
      for (int64_t v = 0; v < V; ++v)
        expected[n * V + v] = std::exp(ld[n * V + v] - m) / z - eps / V - (v == targets[n] ? 1.0 - eps : 0.0);
    }
    test::expect_close(grad, expected, kHugeGradTol, "huge-logit gradients");
  }
}

TEST(CrossEntropy, NaNLogitMakesItsRowNaN) {
  const int64_t N = 2, V = 5;
  std::vector<float> logits = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5};
  logits[V + 3] = std::numeric_limits<float>::quiet_NaN();  // not the max, not the target
  const std::vector<int32_t> targets = {0, 1};
  std::vector<float> losses(N), grad(N * V, 0.0f);
  auto r = cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V, 0.0f);
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
  EXPECT_TRUE(std::isnan(r.loss_sum));
  cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, 0.0f, 1.0f);
  EXPECT_TRUE(std::isfinite(grad[0]));
  EXPECT_TRUE(std::isnan(grad[V]));
}

TEST(CrossEntropy, CountsArgmaxCorrectRows) {
  const int64_t N = 5, V = 4;
  // Row argmaxes: 2, 0, 3, 1 (tie between 1 and 3: first wins), 0.
  const std::vector<float> logits = {0, 1, 5, 2,  9, 1, 1, 1,  0, 0, 0, 3,  1, 4, 0, 4,  2, 1, 0, 0};
  const std::vector<int32_t> targets = {2, 1, 3, 1, kIgnoreIndex};
  auto r = cpu::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V, 0.0f);
  EXPECT_EQ(r.scored, 4);
  EXPECT_EQ(r.correct, 3);
}

TEST(CrossEntropy, TargetOutsideVocabularyThrowsNamingRowAndValue) {
  const int64_t N = 3, V = 6;
  std::vector<float> logits(N * V, 0.5f), grad(N * V, 0.0f);
  for (int32_t bad : {-1, 6, -101, 1 << 20}) {
    const std::vector<int32_t> targets = {0, kIgnoreIndex, bad};
    try {
      cpu::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V, 0.0f);
      ADD_FAILURE() << "no throw for target " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
    EXPECT_THROW(cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, 0.0f, 1.0f), Error);
  }
}

TEST(CrossEntropy, LossSumIsBitIdenticalAcrossThreadCounts) {
  const int64_t N = 203, V = 517;
  Rng rng(5);
  auto logits = random_floats(N * V, rng, -8.0f, 8.0f);
  auto targets = random_targets(N, V, rng);
  const int saved_threads = num_threads();
  set_num_threads(1);
  const auto one = cpu::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V, 0.1f);
  std::vector<float> grad_one(N * V, 0.0f);
  cpu::cross_entropy_backward(grad_one.data(), logits.data(), targets.data(), N, V, 0.1f, 1.0f / one.scored);
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    const auto many = cpu::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V, 0.1f);
    EXPECT_EQ(many.loss_sum, one.loss_sum) << "threads = " << threads;
    EXPECT_EQ(many.correct, one.correct);
    std::vector<float> grad(N * V, 0.0f);
    cpu::cross_entropy_backward(grad.data(), logits.data(), targets.data(), N, V, 0.1f, 1.0f / one.scored);
    EXPECT_EQ(std::memcmp(grad.data(), grad_one.data(), grad.size() * sizeof(float)), 0);
  }
  set_num_threads(saved_threads);
}

}  // namespace
}  // namespace hymba
