#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/threading.h"
#include "kernels/cpu/matmul.h"
#include "kernels/reference/matmul.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

struct MatmulShape {
  int64_t BT, C, OC;
  bool bias;
};

class MatmulTest : public ::testing::TestWithParam<MatmulShape> {};

TEST_P(MatmulTest, ForwardMatchesReference) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const MatmulShape shape = GetParam();
  const auto BT = shape.BT;
  const auto C = shape.C;
  const auto OC = shape.OC;
  const auto has_bias = shape.bias;
  Rng rng(1);
  auto x = random_floats(BT * C, rng), w = random_floats(OC * C, rng), b = random_floats(OC, rng);
  std::vector<float> out(BT * OC), ref(BT * OC);
  cpu::matmul_forward(out.data(), x.data(), w.data(), has_bias ? b.data() : nullptr, BT, C, OC);
  ref::matmul_forward(ref.data(), x.data(), w.data(), has_bias ? b.data() : nullptr, BT, C, OC);
  test::expect_close(out, ref, 1e-5, "matmul forward");
}

TEST_P(MatmulTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const MatmulShape shape = GetParam();
  const auto BT = shape.BT;
  const auto C = shape.C;
  const auto OC = shape.OC;
  const auto has_bias = shape.bias;
  Rng rng(2);
  auto x = random_floats(BT * C, rng), w = random_floats(OC * C, rng), b = random_floats(OC, rng);
  auto dout = random_floats(BT * OC, rng);
  // Non-zero initial gradients check that backward accumulates.
  std::vector<float> dx0 = random_floats(BT * C, rng), dw0 = random_floats(OC * C, rng), db0 = random_floats(OC, rng);
  std::vector<float> dx = dx0, dw = dw0, db = db0;
  cpu::matmul_backward(dx.data(), dw.data(), has_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), BT, C,
                       OC);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];
  for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];

  auto xd = to_double(x), wd = to_double(w), bd = to_double(b), wt = to_double(dout);
  std::vector<double> out(BT * OC);
  auto loss = [&] {
    ref::matmul_forward(out.data(), xd.data(), wd.data(), has_bias ? bd.data() : nullptr, BT, C, OC);
    return test::weighted_sum(out, wt);
  };
  test::expect_grad_matches(loss, xd, dx, 1e-4, "dinp");
  test::expect_grad_matches(loss, wd, dw, 1e-4, "dweight");
  if (has_bias) test::expect_grad_matches(loss, bd, db, 1e-4, "dbias");
}

TEST(Matmul, StridedSlicesReadAndWriteInPlace) {
  // out occupies columns [2, 2+OC) of a wider buffer; inp columns [1, 1+C).
  const int64_t BT = 5, C = 3, OC = 4, ld_in = 7, ld_out = 9;
  Rng rng(3);
  auto wide_in = random_floats(BT * ld_in, rng), w = random_floats(OC * C, rng);
  std::vector<float> wide_out(BT * ld_out, 42.0f);
  cpu::matmul_forward(wide_out.data() + 2, ld_out, wide_in.data() + 1, ld_in, w.data(), nullptr, BT, C, OC);
  for (int64_t r = 0; r < BT; ++r)
    for (int64_t j = 0; j < ld_out; ++j) {
      if (j < 2 || j >= 2 + OC) {
        EXPECT_EQ(wide_out[r * ld_out + j], 42.0f) << "wrote outside the slice";
        continue;
      }
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += wide_in[r * ld_in + 1 + c] * w[(j - 2) * C + c];
      EXPECT_NEAR(wide_out[r * ld_out + j], s, 1e-5);
    }
}

TEST_P(MatmulTest, BackwardCanOverwriteDinp) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const MatmulShape shape = GetParam();
  const auto BT = shape.BT;
  const auto C = shape.C;
  const auto OC = shape.OC;
  Rng rng(4);
  auto x = random_floats(BT * C, rng), w = random_floats(OC * C, rng), dout = random_floats(BT * OC, rng);
  // Overwriting NaN gives exactly what accumulating into zeros gives; dweight
  // still accumulates.
  std::vector<float> dx_over(BT * C, std::numeric_limits<float>::quiet_NaN()), dx_acc(BT * C, 0.0f);
  auto dw0 = random_floats(OC * C, rng);
  std::vector<float> dw_over = dw0, dw_acc = dw0;
  cpu::matmul_backward(dx_over.data(), C, dw_over.data(), nullptr, dout.data(), OC, x.data(), C, w.data(), BT, C, OC,
                       /*overwrite_dinp=*/true);
  cpu::matmul_backward(dx_acc.data(), C, dw_acc.data(), nullptr, dout.data(), OC, x.data(), C, w.data(), BT, C, OC);
  for (size_t i = 0; i < dx_over.size(); ++i) ASSERT_EQ(dx_over[i], dx_acc[i]) << "dinp element " << i;
  for (size_t i = 0; i < dw_over.size(); ++i) ASSERT_EQ(dw_over[i], dw_acc[i]) << "dweight element " << i;
}

// Float32 products run as row bands on the team (matmul.cpp): forward and
// input-gradient products from 768 rows a band, the weight gradient when
// OC >= C, every band above 10^6 multiply-adds. Banded products must give
// the bits of one thread's single call at any thread count, with rows that
// split into ragged bands. Every product of these shapes is banded at 2 and
// 3 threads, into as many bands as fit.
TEST(Matmul, ProductsGiveTheSameBitsAtEveryThreadCount) {
  struct Shape {
    int64_t BT, C, OC;
  };
  const int saved_threads = num_threads();
  for (const Shape s : {Shape{2401, 40, 136}, Shape{2500, 128, 200}, Shape{2304, 96, 192}}) {
    Rng rng(5);
    const auto x = random_floats(s.BT * s.C, rng), w = random_floats(s.OC * s.C, rng);
    const auto dout = random_floats(s.BT * s.OC, rng), bias = random_floats(s.OC, rng);
    std::vector<float> first_y, first_dx, first_dw;
    for (int threads : {1, 2, 3, 2}) {
      set_num_threads(threads);
      std::vector<float> y(s.BT * s.OC), dx(s.BT * s.C, 0.5f), dw(s.OC * s.C, 0.25f);
      cpu::matmul_forward(y.data(), x.data(), w.data(), bias.data(), s.BT, s.C, s.OC);
      cpu::matmul_backward(dx.data(), dw.data(), nullptr, dout.data(), x.data(), w.data(), s.BT, s.C, s.OC);
      if (first_y.empty()) {
        first_y = y, first_dx = dx, first_dw = dw;
        continue;
      }
      const std::string where = "BT " + std::to_string(s.BT) + ", C " + std::to_string(s.C) + ", OC " +
                                std::to_string(s.OC) + ", threads " + std::to_string(threads);
      EXPECT_EQ(std::memcmp(y.data(), first_y.data(), y.size() * sizeof(float)), 0) << "forward, " << where;
      EXPECT_EQ(std::memcmp(dx.data(), first_dx.data(), dx.size() * sizeof(float)), 0) << "dinp, " << where;
      EXPECT_EQ(std::memcmp(dw.data(), first_dw.data(), dw.size() * sizeof(float)), 0) << "dweight, " << where;
    }
  }
  set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTest,
                         ::testing::Values(MatmulShape{1, 1, 1, true}, MatmulShape{3, 5, 7, true},
                                           MatmulShape{7, 4, 3, false}, MatmulShape{13, 17, 11, true},
                                           MatmulShape{33, 9, 65, true}));

}  // namespace
}  // namespace hymba
