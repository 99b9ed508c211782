// The GPT-style pieces: LayerNorm with weight and bias, GELU (tanh
// approximation and exact erf), learned absolute position embeddings. Each
// fast kernel against its scalar reference, each backward against float64
// finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/threading.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/reference/activations.h"
#include "kernels/reference/embedding.h"
#include "kernels/reference/layernorm.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

constexpr float kEps = 1e-5f;
constexpr double kForwardTol = 2e-6;
constexpr double kBackwardTol = 1e-4;

struct LnShape {
  int64_t N, C;
};

class LayerNormTest : public ::testing::TestWithParam<LnShape> {};

TEST_P(LayerNormTest, ForwardMatchesReference) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const LnShape shape = GetParam();
  const auto N = shape.N;
  const auto C = shape.C;
  Rng rng(1);
  auto x = random_floats(N * C, rng, -2.0f, 3.0f), w = random_floats(C, rng, 0.5f, 1.5f), b = random_floats(C, rng);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  std::vector<double> ref(N * C);
  ref::layernorm_forward(ref.data(), xd.data(), wd.data(), bd.data(), N, C, static_cast<double>(kEps));
  test::expect_close(out, ref, 1e-5, "layernorm out");
  // No bias, no saved statistics.
  std::vector<float> out2(N * C);
  cpu::layernorm_forward(out2.data(), nullptr, nullptr, x.data(), w.data(), nullptr, N, C, kEps);
  ref::layernorm_forward(ref.data(), xd.data(), wd.data(), static_cast<const double*>(nullptr), N, C,
                         static_cast<double>(kEps));
  test::expect_close(out2, ref, 1e-5, "layernorm out without bias");
}

TEST_P(LayerNormTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const LnShape shape = GetParam();
  const auto N = shape.N;
  const auto C = shape.C;
  Rng rng(2);
  auto x = random_floats(N * C, rng, -2.0f, 2.0f), w = random_floats(C, rng, 0.5f, 1.5f), b = random_floats(C, rng);
  auto dout = random_floats(N * C, rng);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);
  auto xd = to_double(x), wd = to_double(w), bd = to_double(b), wt = to_double(dout);
  std::vector<double> ref(N * C);
  auto loss = [&] {
    ref::layernorm_forward(ref.data(), xd.data(), wd.data(), bd.data(), N, C, static_cast<double>(kEps));
    return test::weighted_sum(ref, wt);
  };
  test::expect_grad_matches(loss, xd, dx, kBackwardTol, "dx");
  test::expect_grad_matches(loss, wd, dw, kBackwardTol, "dweight");
  test::expect_grad_matches(loss, bd, db, kBackwardTol, "dbias");

  // Accumulates, and each gradient alone gives the same values.
  std::vector<float> dx2(N * C, 1.0f), dw2(C, 1.0f), db2(C, 1.0f);
  cpu::layernorm_backward(dx2.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                          C);
  cpu::layernorm_backward(nullptr, dw2.data(), nullptr, dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                          C);
  cpu::layernorm_backward(nullptr, nullptr, db2.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                          C);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], dx[i] + 1.0f, 1e-5) << "dx " << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw2[i], dw[i] + 1.0f, 1e-5) << "dw " << i;
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db2[i], db[i] + 1.0f, 1e-5) << "db " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest,
                         ::testing::Values(LnShape{1, 4}, LnShape{3, 5}, LnShape{4, 16}, LnShape{7, 33},
                                           LnShape{2, 130}));

TEST(LayerNorm, BitIdenticalAcrossThreadCounts) {
  const int64_t N = 300, C = 96;
  Rng rng(3);
  auto x = random_floats(N * C, rng, -2.0f, 2.0f), w = random_floats(C, rng, 0.5f, 1.5f), b = random_floats(C, rng);
  auto dout = random_floats(N * C, rng);
  auto run = [&](int threads) {
    ThreadLimit limit(threads);
    std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
    out.insert(out.end(), db.begin(), db.end());
    return out;
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(LayerNorm, ConstantRowGivesBias) {
  const int64_t C = 8;
  std::vector<float> x(C, 3.5f), w(C, 2.0f), b(C), out(C);
  for (int64_t c = 0; c < C; ++c) b[c] = static_cast<float>(c);
  cpu::layernorm_forward(out.data(), nullptr, nullptr, x.data(), w.data(), b.data(), 1, C, kEps);
  for (int64_t c = 0; c < C; ++c) EXPECT_FLOAT_EQ(out[c], b[c]);
}

class GeluTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GeluTest, ForwardMatchesReference) {
  const int64_t n = GetParam();
  Rng rng(4);
  auto x = random_floats(n, rng, -6.0f, 6.0f);
  auto xd = to_double(x);
  std::vector<float> out(n);
  std::vector<double> ref(n);
  cpu::gelu_tanh_forward(out.data(), x.data(), n);
  ref::gelu_tanh_forward(ref.data(), xd.data(), n);
  test::expect_close(out, ref, kForwardTol, "gelu_tanh");
  cpu::gelu_erf_forward(out.data(), x.data(), n);
  ref::gelu_erf_forward(ref.data(), xd.data(), n);
  test::expect_close(out, ref, kForwardTol, "gelu_erf");
}

TEST_P(GeluTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = GetParam();
  Rng rng(5);
  auto x = random_floats(n, rng, -4.0f, 4.0f), dout = random_floats(n, rng);
  auto xd = to_double(x), wt = to_double(dout);
  std::vector<double> ref(n);
  std::vector<float> dx(n, 0.0f);
  cpu::gelu_tanh_backward(dx.data(), dout.data(), x.data(), n);
  test::expect_grad_matches(
      [&] {
        ref::gelu_tanh_forward(ref.data(), xd.data(), n);
        return test::weighted_sum(ref, wt);
      },
      xd, dx, kBackwardTol, "gelu_tanh dx");
  std::fill(dx.begin(), dx.end(), 0.0f);
  cpu::gelu_erf_backward(dx.data(), dout.data(), x.data(), n);
  test::expect_grad_matches(
      [&] {
        ref::gelu_erf_forward(ref.data(), xd.data(), n);
        return test::weighted_sum(ref, wt);
      },
      xd, dx, kBackwardTol, "gelu_erf dx");
}

INSTANTIATE_TEST_SUITE_P(Sizes, GeluTest, ::testing::Values(1, 3, 17, 257));

TEST(Gelu, KnownValues) {
  // GPT-2's gelu_new and torch.nn.functional.gelu at a few points.
  const std::vector<float> x = {-3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f};
  const std::vector<double> tanh_expected = {-0.0036373, -0.1588080, 0.0, 0.3457140, 0.8411920, 2.9963627};
  const std::vector<double> erf_expected = {-0.0040497, -0.1586553, 0.0, 0.3457312, 0.8413447, 2.9959502};
  std::vector<float> out(x.size());
  cpu::gelu_tanh_forward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], tanh_expected[i], 2e-6) << "gelu_tanh(" << x[i] << ")";
  cpu::gelu_erf_forward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], erf_expected[i], 2e-6) << "gelu_erf(" << x[i] << ")";
}

TEST(PositionEmbedding, ForwardAddsRowsAndBackwardAccumulates) {
  const int64_t P = 6, C = 5, N = 4;
  Rng rng(6);
  auto table = random_floats(P * C, rng), x = random_floats(N * C, rng), dout = random_floats(N * C, rng);
  // Rows 0..N-1 (positions null) and explicit positions with a repeat.
  const std::vector<int64_t> pos = {5, 2, 5, 0};
  for (const int64_t* p : {static_cast<const int64_t*>(nullptr), pos.data()}) {
    std::vector<float> y = x;
    cpu::position_embedding_forward(y.data(), table.data(), p, N, P, C);
    std::vector<double> ref = to_double(x), td = to_double(table), wt = to_double(dout);
    ref::position_embedding_forward(ref.data(), td.data(), p, N, C);
    test::expect_close(y, ref, 0.0, "position forward");
    std::vector<float> dtable(P * C, 0.0f);
    cpu::position_embedding_backward(dtable.data(), dout.data(), p, N, P, C);
    auto xd = to_double(x);
    test::expect_grad_matches(
        [&] {
          std::vector<double> o = xd;
          ref::position_embedding_forward(o.data(), td.data(), p, N, C);
          return test::weighted_sum(o, wt);
        },
        td, dtable, kBackwardTol, "dtable");
  }
}

TEST(PositionEmbedding, PositionBeyondTableThrowsNamingTheLimit) {
  const int64_t P = 4, C = 2;
  std::vector<float> table(P * C, 0.0f), x(6 * C, 0.0f);
  try {
    cpu::position_embedding_forward(x.data(), table.data(), nullptr, 6, P, C);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos) << e.what();
  }
  const std::vector<int64_t> pos = {1, 4};
  EXPECT_THROW(cpu::position_embedding_forward(x.data(), table.data(), pos.data(), 2, P, C), Error);
}

}  // namespace
}  // namespace hymba
