#include <gtest/gtest.h>

#include <cstring>
#include <ostream>

#include "core/threading.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/reference/conv1d.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

// Forward: float kernel vs float64 reference, relative to the largest output
// (observed <= 2e-7).
constexpr double kForwardTol = 1e-6;
// Backward: float kernel vs float64 central finite differences (observed <= 2e-7).
constexpr double kGradTol = 2e-6;

struct ConvShape {
  int64_t B, T, C, K;
  bool bias;
};

void PrintTo(const ConvShape& s, std::ostream* os) {
  *os << "B" << s.B << "T" << s.T << "C" << s.C << "K" << s.K << (s.bias ? "_bias" : "");
}

struct ConvData {
  std::vector<float> x, w, bias, dout;
};

ConvData make_data(const ConvShape& s, uint64_t seed) {
  Rng rng(seed);
  ConvData d;
  d.x = random_floats(s.B * s.T * s.C, rng);
  d.w = random_floats(s.C * s.K, rng, -0.8f, 0.8f);
  d.bias = random_floats(s.C, rng);
  d.dout = random_floats(s.B * s.T * s.C, rng);
  return d;
}

class Conv1dTest : public ::testing::TestWithParam<ConvShape> {};

TEST_P(Conv1dTest, ForwardMatchesReference) {
  const ConvShape s = GetParam();
  const ConvData d = make_data(s, 1);
  std::vector<float> out(s.B * s.T * s.C);
  cpu::conv1d_causal_forward(out.data(), d.x.data(), s.C, d.w.data(), s.bias ? d.bias.data() : nullptr, s.B, s.T, s.C,
                             s.K);
  auto xd = to_double(d.x), wd = to_double(d.w), bd = to_double(d.bias);
  std::vector<double> ref(out.size());
  ref::conv1d_causal_forward(ref.data(), xd.data(), wd.data(), s.bias ? bd.data() : nullptr, s.B, s.T, s.C, s.K);
  test::expect_close(out, ref, kForwardTol, "conv1d forward");
}

TEST_P(Conv1dTest, BackwardMatchesFiniteDifferences) {
  const ConvShape s = GetParam();
  const ConvData d = make_data(s, 2);
  std::vector<float> dx(d.x.size()), dw(d.w.size()), db(d.bias.size());
  cpu::conv1d_causal_backward(dx.data(), s.C, dw.data(), s.bias ? db.data() : nullptr, d.dout.data(), d.x.data(), s.C,
                              d.w.data(), s.B, s.T, s.C, s.K);

  auto xd = to_double(d.x), wd = to_double(d.w), bd = to_double(d.bias), wt = to_double(d.dout);
  std::vector<double> out(d.x.size());
  auto loss = [&] {
    ref::conv1d_causal_forward(out.data(), xd.data(), wd.data(), s.bias ? bd.data() : nullptr, s.B, s.T, s.C, s.K);
    return test::weighted_sum(out, wt);
  };
  test::expect_grad_matches(loss, xd, dx, kGradTol, "dx");
  test::expect_grad_matches(loss, wd, dw, kGradTol, "dweight");
  if (s.bias) test::expect_grad_matches(loss, bd, db, kGradTol, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv1dTest,
                         ::testing::Values(ConvShape{1, 1, 1, 1, true},   // single tap, single token
                                           ConvShape{2, 6, 5, 1, true},   // K = 1 is a per-channel scale
                                           ConvShape{2, 7, 3, 2, false},  // K = 2, no bias
                                           ConvShape{2, 3, 5, 4, true},   // T < K
                                           ConvShape{1, 2, 4, 4, true},   // T < K, one sequence
                                           ConvShape{3, 9, 70, 4, true},  // channel ranges with an odd tail
                                           ConvShape{2, 11, 7, 3, true}));

// x and dx are column slices of wider rows; gradients accumulate onto
// non-zero values; nothing outside the slices is written.
TEST(Conv1d, StridedSlicesAndAccumulation) {
  const ConvShape s{2, 9, 13, 4, true};
  const int64_t ld = 31, offset = 5;
  const ConvData d = make_data(s, 3);
  Rng rng(4);
  std::vector<float> wide_x = random_floats(s.B * s.T * ld, rng);
  for (int64_t r = 0; r < s.B * s.T; ++r) std::memcpy(&wide_x[r * ld + offset], &d.x[r * s.C], sizeof(float) * s.C);

  std::vector<float> out_contig(d.x.size()), out_strided(d.x.size());
  cpu::conv1d_causal_forward(out_contig.data(), d.x.data(), s.C, d.w.data(), d.bias.data(), s.B, s.T, s.C, s.K);
  cpu::conv1d_causal_forward(out_strided.data(), wide_x.data() + offset, ld, d.w.data(), d.bias.data(), s.B, s.T, s.C,
                             s.K);
  EXPECT_EQ(out_contig, out_strided);

  std::vector<float> dx(d.x.size()), dw(d.w.size()), db(d.bias.size());
  cpu::conv1d_causal_backward(dx.data(), s.C, dw.data(), db.data(), d.dout.data(), d.x.data(), s.C, d.w.data(), s.B,
                              s.T, s.C, s.K);

  const std::vector<float> wide_dx0 = random_floats(s.B * s.T * ld, rng), dw0 = random_floats(dw.size(), rng),
                           db0 = random_floats(db.size(), rng);
  std::vector<float> wide_dx = wide_dx0, dw_acc = dw0, db_acc = db0;
  cpu::conv1d_causal_backward(wide_dx.data() + offset, ld, dw_acc.data(), db_acc.data(), d.dout.data(),
                              wide_x.data() + offset, ld, d.w.data(), s.B, s.T, s.C, s.K);
  for (int64_t r = 0; r < s.B * s.T; ++r)
    for (int64_t j = 0; j < ld; ++j) {
      const size_t i = r * ld + j;
      if (j < offset || j >= offset + s.C)
        EXPECT_EQ(wide_dx[i], wide_dx0[i]) << "wrote outside the dx slice";
      else
        EXPECT_FLOAT_EQ(wide_dx[i], wide_dx0[i] + dx[r * s.C + j - offset]);
    }
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw_acc[i], dw0[i] + dw[i]);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_FLOAT_EQ(db_acc[i], db0[i] + db[i]);
}

TEST(Conv1d, NullGradientsAreSkipped) {
  const ConvShape s{2, 5, 9, 4, true};
  const ConvData d = make_data(s, 5);
  std::vector<float> dx(d.x.size()), dw(d.w.size()), db(d.bias.size());
  cpu::conv1d_causal_backward(dx.data(), s.C, dw.data(), db.data(), d.dout.data(), d.x.data(), s.C, d.w.data(), s.B,
                              s.T, s.C, s.K);
  std::vector<float> dw_only(d.w.size());
  cpu::conv1d_causal_backward(nullptr, s.C, dw_only.data(), nullptr, d.dout.data(), d.x.data(), s.C, d.w.data(), s.B,
                              s.T, s.C, s.K);
  EXPECT_EQ(dw_only, dw);
}

TEST(Conv1d, BackwardIsBitIdenticalAcrossThreadCounts) {
  const ConvShape s{3, 64, 200, 4, true};
  const ConvData d = make_data(s, 6);
  const int saved_threads = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3, 2}) {
    set_num_threads(threads);
    std::vector<float> dx(d.x.size()), dw(d.w.size()), db(d.bias.size()), out(d.x.size());
    cpu::conv1d_causal_forward(out.data(), d.x.data(), s.C, d.w.data(), d.bias.data(), s.B, s.T, s.C, s.K);
    cpu::conv1d_causal_backward(dx.data(), s.C, dw.data(), db.data(), d.dout.data(), d.x.data(), s.C, d.w.data(), s.B,
                                s.T, s.C, s.K);
    std::vector<float> all = out;
    all.insert(all.end(), dx.begin(), dx.end());
    all.insert(all.end(), dw.begin(), dw.end());
    all.insert(all.end(), db.begin(), db.end());
    results.push_back(std::move(all));
  }
  set_num_threads(saved_threads);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * sizeof(float)))
        << "run " << i << " differs";
}

}  // namespace
}  // namespace hymba
