// The Mamba-1 recurrence of a decode step (kernels/cpu/ssm_step.h): against
// its plain reference (kernels/reference/ssm_step.h) in float64 on ragged
// shapes, token by token against the full selective scan with the conv step
// in front (as a decoder runs them), and the same bits on any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/conv_step.h"
#include "kernels/cpu/selective_scan.h"
#include "kernels/cpu/ssm_step.h"
#include "kernels/reference/ssm_step.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::max_abs;
using test::random_floats;
using test::rel_error;

// The single-token kernels against the full-sequence kernels on one layer.
constexpr double kStepRelTol = 2e-5;
// Against the float64 reference: float32 sums and the fast exp / softplus.
constexpr double kReferenceRelTol = 1e-5;

// Shapes: a state under 8 wide with channels off the runs of 8 and
// Mamba's 4 taps; states of 8 plus a tail with 3 taps (the generic conv);
// whole runs of 8 channels and of 8 state entries.
TEST(SsmStep, ConvAndSsmStepsFollowTheFullScan) {
  struct Shape {
    int64_t D, N, K;
  };
  for (const Shape shape : {Shape{21, 5, 4}, Shape{19, 13, 3}, Shape{16, 16, 4}}) {
    SCOPED_TRACE("D " + std::to_string(shape.D) + " N " + std::to_string(shape.N) + " K " + std::to_string(shape.K));
    const int64_t B = 2, T = 9, D = shape.D, N = shape.N, K = shape.K;
    Rng rng(42);
    const auto x = random_floats(B * T * D, rng), w = random_floats(D * K, rng), bias = random_floats(D, rng);
    const auto delta = random_floats(B * T * D, rng, -3.0f, 1.0f), delta_bias = random_floats(D, rng, -1.0f, 0.5f);
    const auto A_log = random_floats(D * N, rng, -1.0f, 2.0f), Bm = random_floats(B * T * N, rng),
               Cm = random_floats(B * T * N, rng), Dskip = random_floats(D, rng), z = random_floats(B * T * D, rng);
    std::vector<float> xc(B * T * D), u(B * T * D), y(B * T * D), h_last(B * D * N);
    cpu::conv1d_causal_forward(xc.data(), x.data(), D, w.data(), bias.data(), B, T, D, K);
    cpu::silu_forward(u.data(), xc.data(), B * T * D);
    cpu::ScanArgs sa;
    sa.B = B;
    sa.T = T;
    sa.D = D;
    sa.N = N;
    sa.u = u.data();
    sa.ld_u = D;
    sa.delta = delta.data();
    sa.ld_delta = D;
    sa.delta_bias = delta_bias.data();
    sa.A_log = A_log.data();
    sa.Bm = Bm.data();
    sa.ld_B = N;
    sa.Cm = Cm.data();
    sa.ld_C = N;
    sa.Dskip = Dskip.data();
    sa.z = z.data();
    sa.ld_z = D;
    cpu::selective_scan_forward(y.data(), nullptr, h_last.data(), sa);

    std::vector<float> A(D * N);
    for (int64_t i = 0; i < D * N; ++i) A[i] = -std::exp(A_log[i]);
    std::vector<std::vector<float>> conv_state(B, std::vector<float>(D * (K - 1)));
    std::vector<std::vector<float>> ssm_state(B, std::vector<float>(D * N));
    float* conv_ptrs[] = {conv_state[0].data(), conv_state[1].data()};
    float* ssm_ptrs[] = {ssm_state[0].data(), ssm_state[1].data()};
    std::vector<float> xc_t(B * D), u_t(B * D), delta_t(B * D), y_t(B * D);
    const double y_scale = max_abs(y), xc_scale = max_abs(xc);
    for (int64_t t = 0; t < T; ++t) {
      // Rows b of token t: strided views into the [B, T, *] inputs.
      cpu::conv_step(xc_t.data(), x.data() + t * D, T * D, conv_ptrs, w.data(), bias.data(), B, D, K);
      cpu::silu_forward(u_t.data(), xc_t.data(), B * D);
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(delta.begin() + (b * T + t) * D, D, delta_t.begin() + b * D);
      cpu::SsmStepArgs a;
      a.B = B;
      a.D = D;
      a.N = N;
      a.u = u_t.data();
      a.delta = delta_t.data();
      a.delta_bias = delta_bias.data();
      a.A = A.data();
      a.Bm = Bm.data() + t * N;
      a.ld_B = T * N;
      a.Cm = Cm.data() + t * N;
      a.ld_C = T * N;
      a.Dskip = Dskip.data();
      a.z = z.data() + t * D;
      a.ld_z = T * D;
      cpu::ssm_step(y_t.data(), ssm_ptrs, a);
      for (int64_t b = 0; b < B; ++b) {
        ASSERT_LE(rel_error(xc_t.data() + b * D, xc.data() + (b * T + t) * D, D, xc_scale), kStepRelTol) << t;
        ASSERT_LE(rel_error(y_t.data() + b * D, y.data() + (b * T + t) * D, D, y_scale), kStepRelTol) << t;
      }
    }
    for (int64_t b = 0; b < B; ++b)
      EXPECT_LE(rel_error(ssm_state[b].data(), h_last.data() + b * D * N, D * N, max_abs(h_last)), kStepRelTol);
  }
}

// One step's operands for B rows, as a decoder passes them: Bm, Cm and z
// slices of one fused row (ld floats, 3 more than the three slices).
template <typename T>
struct SsmStepData {
  int64_t B = 0, D = 0, N = 0, ld = 0;
  bool gated = true;
  std::vector<T> u, delta, delta_bias, A, fused, Dskip;
  std::vector<T> h;  // [B, D, N]

  SsmStepData() = default;
  // The same operands in another element type (the reference's float64).
  template <typename U>
  explicit SsmStepData(const SsmStepData<U>& o)
      : B(o.B), D(o.D), N(o.N), ld(o.ld), gated(o.gated), u(o.u.begin(), o.u.end()),
        delta(o.delta.begin(), o.delta.end()), delta_bias(o.delta_bias.begin(), o.delta_bias.end()),
        A(o.A.begin(), o.A.end()), fused(o.fused.begin(), o.fused.end()), Dskip(o.Dskip.begin(), o.Dskip.end()),
        h(o.h.begin(), o.h.end()) {}

  template <typename Args>
  Args args() const {
    Args a;
    a.B = B;
    a.D = D;
    a.N = N;
    a.u = u.data();
    a.delta = delta.data();
    a.delta_bias = delta_bias.data();
    a.A = A.data();
    a.Bm = fused.data();
    a.ld_B = ld;
    a.Cm = fused.data() + N;
    a.ld_C = ld;
    a.Dskip = Dskip.data();
    a.z = gated ? fused.data() + 2 * N : nullptr;
    a.ld_z = ld;
    return a;
  }
  std::vector<T*> states() { return test::row_pointers(h, B, D * N); }
};

SsmStepData<float> random_step(int64_t B, int64_t D, int64_t N, bool gated, Rng& rng) {
  SsmStepData<float> s;
  s.B = B;
  s.D = D;
  s.N = N;
  s.ld = 2 * N + D + 3;
  s.gated = gated;
  s.u = random_floats(B * D, rng);
  s.delta = random_floats(B * D, rng, -3.0f, 1.0f);
  s.delta_bias = random_floats(D, rng, -1.0f, 0.5f);
  s.A = random_floats(D * N, rng, -2.0f, -0.1f);
  s.fused = random_floats(B * s.ld, rng);
  s.Dskip = random_floats(D, rng);
  s.h = random_floats(B * D * N, rng);
  return s;
}

// Shapes: channels and states under 8, off the runs of 8, whole runs, one
// state entry; with and without the gate. Three steps in a row, each from
// the state the last one left.
TEST(SsmStep, MatchesTheReferenceOnRaggedShapes) {
  struct Shape {
    int64_t B, D, N;
  };
  for (const Shape shape : {Shape{1, 5, 3}, Shape{2, 21, 5}, Shape{3, 19, 13}, Shape{2, 16, 16}, Shape{1, 9, 1}})
    for (const bool gated : {true, false}) {
      SCOPED_TRACE("B " + std::to_string(shape.B) + " D " + std::to_string(shape.D) + " N " +
                   std::to_string(shape.N) + (gated ? " gated" : ""));
      Rng rng(7);
      SsmStepData<float> fast = random_step(shape.B, shape.D, shape.N, gated, rng);
      SsmStepData<double> ref(fast);
      std::vector<float> y(static_cast<size_t>(shape.B * shape.D));
      std::vector<double> y_ref(y.size());
      for (int step = 0; step < 3; ++step) {
        cpu::ssm_step(y.data(), fast.states().data(), fast.args<cpu::SsmStepArgs>());
        ref::ssm_step(y_ref.data(), ref.states().data(), ref.args<ref::SsmStepArgs<double>>());
        test::expect_close(y, y_ref, kReferenceRelTol, "y, step " + std::to_string(step));
        test::expect_close(fast.h, ref.h, kReferenceRelTol, "h, step " + std::to_string(step));
      }
    }
}

// Above the kernel's threshold for threads: rows of 8 channels split over them.
TEST(SsmStep, SameBitsOnAnyThreadCount) {
  Rng rng(17);
  const SsmStepData<float> start = random_step(2, 1100, 16, true, rng);
  test::expect_same_bits_on_any_thread_count([&] {
    SsmStepData<float> s = start;
    std::vector<float> y(static_cast<size_t>(s.B * s.D));
    cpu::ssm_step(y.data(), s.states().data(), s.args<cpu::SsmStepArgs>());
    y.insert(y.end(), s.h.begin(), s.h.end());
    return y;
  });
}

}  // namespace
}  // namespace hymba
