// The causal conv1d of a decode step (kernels/cpu/conv_step.h): against its
// plain reference (kernels/reference/conv_step.h) in float64 on ragged
// shapes, step after step, and the same bits on any thread count. Its
// agreement with the full convolution is checked with the scan's
// (test_ssm_step.cpp, ConvAndSsmStepsFollowTheFullScan).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/conv_step.h"
#include "kernels/reference/conv_step.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;

// Against the float64 reference: K float32 multiply-adds a channel.
constexpr double kReferenceRelTol = 1e-6;

// Shapes: channels under 8 and off any run, Mamba's 4 taps (the unrolled
// loop) and others (the generic one), one tap (no state); with and without
// a bias. Inputs are strided rows whose floats past C are NaN, so reading
// one would show. Four steps in a row, each from the state the last left.
TEST(ConvStep, MatchesTheReferenceOnRaggedShapes) {
  struct Shape {
    int64_t B, C, K;
  };
  for (const Shape shape : {Shape{1, 5, 4}, Shape{3, 21, 4}, Shape{2, 19, 3}, Shape{2, 16, 2}, Shape{1, 7, 1}})
    for (const bool with_bias : {true, false}) {
      const int64_t B = shape.B, C = shape.C, K = shape.K, ld_x = C + 3;
      SCOPED_TRACE("B " + std::to_string(B) + " C " + std::to_string(C) + " K " + std::to_string(K) +
                   (with_bias ? " bias" : ""));
      Rng rng(11);
      const auto w = random_floats(C * K, rng), bias = random_floats(C, rng);
      std::vector<float> state = random_floats(B * C * (K - 1), rng);
      std::vector<double> state_ref = test::to_double(state);
      const std::vector<double> w_ref = test::to_double(w), bias_ref = test::to_double(bias);
      const auto rows = test::row_pointers(state, B, C * (K - 1));
      const auto rows_ref = test::row_pointers(state_ref, B, C * (K - 1));
      for (int step = 0; step < 4; ++step) {
        const std::vector<float> x = test::strided(random_floats(B * C, rng), B, C, ld_x, NAN);
        const std::vector<double> x_ref = test::to_double(x);
        std::vector<float> out(static_cast<size_t>(B * C));
        std::vector<double> out_ref(out.size());
        cpu::conv_step(out.data(), x.data(), ld_x, rows.data(), w.data(), with_bias ? bias.data() : nullptr, B, C, K);
        ref::conv_step(out_ref.data(), x_ref.data(), ld_x, rows_ref.data(), w_ref.data(),
                       with_bias ? bias_ref.data() : nullptr, B, C, K);
        test::expect_close(out, out_ref, kReferenceRelTol, "out, step " + std::to_string(step));
        // The state holds the last inputs as they were: exactly.
        EXPECT_EQ(state, test::to_float(state_ref)) << "step " << step;
      }
    }
}

// Above the kernel's threshold for threads: channels split over them.
TEST(ConvStep, SameBitsOnAnyThreadCount) {
  const int64_t B = 2, C = 4200, K = 4;
  Rng rng(17);
  const auto x = random_floats(B * C, rng), w = random_floats(C * K, rng), bias = random_floats(C, rng);
  const auto start = random_floats(B * C * (K - 1), rng);
  test::expect_same_bits_on_any_thread_count([&] {
    std::vector<float> state = start, out(static_cast<size_t>(B * C));
    const auto rows = test::row_pointers(state, B, C * (K - 1));
    cpu::conv_step(out.data(), x.data(), C, rows.data(), w.data(), bias.data(), B, C, K);
    out.insert(out.end(), state.begin(), state.end());
    return out;
  });
}

}  // namespace
}  // namespace hymba
