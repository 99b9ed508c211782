#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "core/threading.h"
#include "kernels/cpu/selective_scan.h"
#include "kernels/reference/selective_scan.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

// Forward (y, h_last, chunk states): float kernel vs float64 reference,
// relative to the largest magnitude (observed ~2e-7; exp/log1p are within ~2 ulp).
constexpr double kForwardTol = 2e-6;
// Backward: float kernel vs float64 central finite differences of the
// reference forward, relative to the largest gradient magnitude (observed <= 1.5e-6).
constexpr double kGradTol = 2e-5;
// Directional-derivative check for shapes too large for per-element finite
// differences: |analytic - numeric| / sum_i |g_i v_i| (observed <= 1e-7).
constexpr double kDirectionalTol = 1e-5;

struct ScanCase {
  int64_t B, T, D, N;
  bool z, delta_bias, softplus, h0;
};

std::string case_name(const ScanCase& c) {
  std::ostringstream name;
  name << "B" << c.B << "T" << c.T << "D" << c.D << "N" << c.N << (c.z ? "_z" : "") << (c.delta_bias ? "_bias" : "")
       << (c.softplus ? "_softplus" : "") << (c.h0 ? "_h0" : "");
  return name.str();
}

void PrintTo(const ScanCase& c, std::ostream* os) { *os << case_name(c); }

// Random inputs in realistic ranges, all contiguous.
struct ScanData {
  ScanCase c;
  std::vector<float> u, delta, delta_bias, A_log, Bm, Cm, Dskip, z, h0;
};

ScanData make_data(const ScanCase& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t BTD = c.B * c.T * c.D, BTN = c.B * c.T * c.N;
  ScanData s{c, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  s.u = random_floats(BTD, rng, -1.5f, 1.5f);
  // Pre-softplus delta around [-3, 1]; without softplus delta is dt itself.
  s.delta = c.softplus ? random_floats(BTD, rng, -3.0f, 1.0f) : random_floats(BTD, rng, 0.02f, 0.6f);
  s.delta_bias = c.softplus ? random_floats(c.D, rng, -0.5f, 0.5f) : random_floats(c.D, rng, 0.01f, 0.1f);
  s.A_log.resize(c.D * c.N);
  for (int64_t d = 0; d < c.D; ++d)
    for (int64_t n = 0; n < c.N; ++n)
      s.A_log[d * c.N + n] = std::log(static_cast<float>(n + 1)) + 0.3f * (rng.uniform() - 0.5f);
  s.Bm = random_floats(BTN, rng);
  s.Cm = random_floats(BTN, rng);
  s.Dskip = random_floats(c.D, rng, 0.5f, 1.5f);
  s.z = random_floats(BTD, rng, -2.0f, 2.0f);
  s.h0 = random_floats(c.B * c.D * c.N, rng);
  return s;
}

cpu::ScanArgs contiguous_args(const ScanData& s) {
  const ScanCase& c = s.c;
  cpu::ScanArgs a;
  a.B = c.B, a.T = c.T, a.D = c.D, a.N = c.N;
  a.u = s.u.data(), a.ld_u = c.D;
  a.delta = s.delta.data(), a.ld_delta = c.D;
  a.delta_bias = c.delta_bias ? s.delta_bias.data() : nullptr;
  a.delta_softplus = c.softplus;
  a.A_log = s.A_log.data();
  a.Bm = s.Bm.data(), a.ld_B = c.N;
  a.Cm = s.Cm.data(), a.ld_C = c.N;
  a.Dskip = s.Dskip.data();
  a.z = c.z ? s.z.data() : nullptr, a.ld_z = c.D;
  a.h0 = c.h0 ? s.h0.data() : nullptr;
  return a;
}

// The reference in float64 over a double copy of every input.
struct DoubleScan {
  ScanCase c;
  std::vector<double> u, delta, delta_bias, A_log, Bm, Cm, Dskip, z, h0, y, h_last;

  explicit DoubleScan(const ScanData& s)
      : c(s.c),
        u(to_double(s.u)),
        delta(to_double(s.delta)),
        delta_bias(to_double(s.delta_bias)),
        A_log(to_double(s.A_log)),
        Bm(to_double(s.Bm)),
        Cm(to_double(s.Cm)),
        Dskip(to_double(s.Dskip)),
        z(to_double(s.z)),
        h0(to_double(s.h0)),
        y(s.u.size()),
        h_last(s.h0.size()) {}

  void run() {
    ref::selective_scan_forward(y.data(), h_last.data(), u.data(), delta.data(),
                                c.delta_bias ? delta_bias.data() : nullptr, c.softplus, A_log.data(), Bm.data(),
                                Cm.data(), Dskip.data(), c.z ? z.data() : nullptr, c.h0 ? h0.data() : nullptr, c.B, c.T,
                                c.D, c.N);
  }
};

// Tokens [t0, t0 + len) of every sequence, repacked contiguously.
ScanData slice_tokens(const ScanData& s, int64_t t0, int64_t len) {
  const ScanCase& c = s.c;
  ScanData part = s;
  part.c.T = len;
  auto take = [&](const std::vector<float>& v, int64_t width) {
    std::vector<float> out;
    for (int64_t b = 0; b < c.B; ++b)
      out.insert(out.end(), v.begin() + (b * c.T + t0) * width, v.begin() + (b * c.T + t0 + len) * width);
    return out;
  };
  part.u = take(s.u, c.D), part.delta = take(s.delta, c.D), part.z = take(s.z, c.D);
  part.Bm = take(s.Bm, c.N), part.Cm = take(s.Cm, c.N);
  return part;
}

// Reference state after the first `prefix` tokens of every sequence.
std::vector<double> reference_state_after(const ScanData& s, int64_t prefix) {
  DoubleScan ref(slice_tokens(s, 0, prefix));
  ref.run();
  return ref.h_last;
}

struct Gradients {
  std::vector<float> du, ddelta, ddelta_bias, dA_log, dB, dC, dDskip, dz;

  explicit Gradients(const ScanCase& c)
      : du(c.B * c.T * c.D),
        ddelta(du.size()),
        ddelta_bias(c.D),
        dA_log(c.D * c.N),
        dB(c.B * c.T * c.N),
        dC(dB.size()),
        dDskip(c.D),
        dz(du.size()) {}

  cpu::ScanGrads contiguous(const ScanCase& c) {
    cpu::ScanGrads g;
    g.du = du.data(), g.ld_du = c.D;
    g.ddelta = ddelta.data(), g.ld_ddelta = c.D;
    g.ddelta_bias = ddelta_bias.data();
    g.dA_log = dA_log.data();
    g.dB = dB.data(), g.ld_dB = c.N;
    g.dC = dC.data(), g.ld_dC = c.N;
    g.dDskip = dDskip.data();
    g.dz = dz.data(), g.ld_dz = c.D;
    return g;
  }

  std::vector<float> concatenated() const {
    std::vector<float> all;
    for (const auto* v : {&du, &ddelta, &ddelta_bias, &dA_log, &dB, &dC, &dDskip, &dz})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  }
};

struct ForwardResult {
  std::vector<float> y, chunk_states, h_last;
};

ForwardResult run_forward(const cpu::ScanArgs& a) {
  ForwardResult r{std::vector<float>(a.B * a.T * a.D), std::vector<float>(a.B * cpu::scan_num_chunks(a.T) * a.D * a.N),
                  std::vector<float>(a.B * a.D * a.N)};
  cpu::selective_scan_forward(r.y.data(), r.chunk_states.data(), r.h_last.data(), a);
  return r;
}

// Forward then backward with dy, accumulating into grads.
void run_backward(const ScanData& s, const std::vector<float>& dy, Gradients& grads) {
  const cpu::ScanArgs a = contiguous_args(s);
  const ForwardResult fwd = run_forward(a);
  cpu::selective_scan_backward(grads.contiguous(s.c), dy.data(), fwd.chunk_states.data(), a);
}

class ScanTest : public ::testing::TestWithParam<ScanCase> {};

TEST_P(ScanTest, ForwardMatchesReference) {
  const ScanCase c = GetParam();
  const ScanData s = make_data(c, 11);
  const ForwardResult fwd = run_forward(contiguous_args(s));
  DoubleScan ref(s);
  ref.run();
  test::expect_close(fwd.y, ref.y, kForwardTol, "y");
  test::expect_close(fwd.h_last, ref.h_last, kForwardTol, "h_last");

  // Without chunk_states or h_last (inference) y is the same.
  std::vector<float> y_only(fwd.y.size());
  cpu::selective_scan_forward(y_only.data(), nullptr, nullptr, contiguous_args(s));
  EXPECT_EQ(y_only, fwd.y);

  // Chunk c's saved state is the state after c * kScanChunk tokens.
  const int64_t n_chunks = cpu::scan_num_chunks(c.T), DN = c.D * c.N;
  for (int64_t k = 0; k < n_chunks; ++k) {
    std::vector<double> expected = k == 0 ? (c.h0 ? to_double(s.h0) : std::vector<double>(c.B * DN, 0.0))
                                          : reference_state_after(s, k * cpu::kScanChunk);
    std::vector<float> saved;
    for (int64_t b = 0; b < c.B; ++b)
      saved.insert(saved.end(), fwd.chunk_states.begin() + (b * n_chunks + k) * DN,
                   fwd.chunk_states.begin() + (b * n_chunks + k + 1) * DN);
    test::expect_close(saved, expected, kForwardTol, "chunk state " + std::to_string(k));
  }
}

TEST_P(ScanTest, BackwardMatchesFiniteDifferences) {
  const ScanCase c = GetParam();
  const ScanData s = make_data(c, 12);
  Rng rng(13);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  Gradients g(c);
  run_backward(s, dy, g);

  DoubleScan ref(s);
  const std::vector<double> w = to_double(dy);
  auto loss = [&] {
    ref.run();
    return test::weighted_sum(ref.y, w);
  };
  test::expect_grad_matches(loss, ref.u, g.du, kGradTol, "du");
  test::expect_grad_matches(loss, ref.delta, g.ddelta, kGradTol, "ddelta");
  if (c.delta_bias) test::expect_grad_matches(loss, ref.delta_bias, g.ddelta_bias, kGradTol, "ddelta_bias");
  test::expect_grad_matches(loss, ref.A_log, g.dA_log, kGradTol, "dA_log");
  test::expect_grad_matches(loss, ref.Bm, g.dB, kGradTol, "dB");
  test::expect_grad_matches(loss, ref.Cm, g.dC, kGradTol, "dC");
  test::expect_grad_matches(loss, ref.Dskip, g.dDskip, kGradTol, "dDskip");
  if (c.z) test::expect_grad_matches(loss, ref.z, g.dz, kGradTol, "dz");
  // Gradients of inputs that are absent stay untouched.
  if (!c.z) {
    EXPECT_EQ(g.dz, std::vector<float>(g.dz.size(), 0.0f));
  }
  if (!c.delta_bias) {
    EXPECT_EQ(g.ddelta_bias, std::vector<float>(g.ddelta_bias.size(), 0.0f));
  }
}

// Small D and N where T is large keep the finite differences cheap.
INSTANTIATE_TEST_SUITE_P(
    Shapes, ScanTest,
    ::testing::Values(ScanCase{1, 1, 1, 1, true, true, true, false},        // smallest
                      ScanCase{2, 5, 3, 4, true, true, true, true},         // everything on, with h0
                      ScanCase{1, 63, 3, 4, false, true, true, false},      // one chunk minus one, no z
                      ScanCase{1, 64, 2, 16, true, false, true, true},      // exactly one chunk, no delta_bias
                      ScanCase{2, 65, 2, 4, true, true, true, true},        // one chunk plus one
                      ScanCase{1, 65, 3, 1, true, true, false, true},       // N = 1, delta used as dt
                      ScanCase{1, 130, 1, 2, true, true, true, true},       // three chunks
                      ScanCase{2, 5, 19, 4, true, true, true, true},        // odd D spanning two channel blocks
                      ScanCase{1, 3, 33, 16, false, false, false, false}),  // three blocks, everything off
    [](const ::testing::TestParamInfo<ScanCase>& param) { return case_name(param.param); });

// Larger shape: analytic gradients contracted with a random direction vs a
// central difference along that direction, one per input.
TEST(SelectiveScan, BackwardMatchesDirectionalDerivativesOnLargerShape) {
  const ScanCase c{2, 300, 40, 16, true, true, true, true};  // crosses a backward window (256 tokens)
  const ScanData s = make_data(c, 21);
  Rng rng(22);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  Gradients g(c);
  run_backward(s, dy, g);

  DoubleScan ref(s);
  const std::vector<double> w = to_double(dy);
  auto check = [&](std::vector<double>& x, const std::vector<float>& grad, const char* what) {
    const std::vector<double> v = to_double(random_floats(x.size(), rng));
    const std::vector<double> saved = x;
    const double eps = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] + eps * v[i];
    ref.run();
    const double up = test::weighted_sum(ref.y, w);
    for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] - eps * v[i];
    ref.run();
    const double down = test::weighted_sum(ref.y, w);
    x = saved;
    double analytic = 0.0, scale = 1e-12;
    for (size_t i = 0; i < x.size(); ++i) {
      analytic += grad[i] * v[i];
      scale += std::abs(grad[i] * v[i]);
    }
    const double err = std::abs(analytic - (up - down) / (2 * eps)) / scale;
    EXPECT_LE(err, kDirectionalTol) << what;
  };
  check(ref.u, g.du, "du");
  check(ref.delta, g.ddelta, "ddelta");
  check(ref.delta_bias, g.ddelta_bias, "ddelta_bias");
  check(ref.A_log, g.dA_log, "dA_log");
  check(ref.Bm, g.dB, "dB");
  check(ref.Cm, g.dC, "dC");
  check(ref.Dskip, g.dDskip, "dDskip");
  check(ref.z, g.dz, "dz");
}

TEST(SelectiveScan, BackwardAccumulatesOntoExistingGradients) {
  const ScanCase c{2, 70, 19, 4, true, true, true, true};
  const ScanData s = make_data(c, 31);
  Rng rng(32);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  Gradients fresh(c);
  run_backward(s, dy, fresh);
  Gradients initial(c);
  for (auto* v : {&initial.du, &initial.ddelta, &initial.ddelta_bias, &initial.dA_log, &initial.dB, &initial.dC,
                  &initial.dDskip, &initial.dz})
    *v = random_floats(v->size(), rng);
  Gradients accumulated = initial;
  run_backward(s, dy, accumulated);
  const auto f = fresh.concatenated(), i0 = initial.concatenated(), acc = accumulated.concatenated();
  for (size_t i = 0; i < acc.size(); ++i) ASSERT_FLOAT_EQ(acc[i], i0[i] + f[i]) << "element " << i;
}

TEST(SelectiveScan, NullGradientsAreSkipped) {
  const ScanCase c{1, 70, 19, 4, true, true, true, false};
  const ScanData s = make_data(c, 41);
  Rng rng(42);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  Gradients all(c);
  run_backward(s, dy, all);
  Gradients some(c);
  cpu::ScanGrads g;
  g.dB = some.dB.data(), g.ld_dB = c.N;
  g.dA_log = some.dA_log.data();
  g.dz = some.dz.data(), g.ld_dz = c.D;
  const cpu::ScanArgs a = contiguous_args(s);
  const ForwardResult fwd = run_forward(a);
  cpu::selective_scan_backward(g, dy.data(), fwd.chunk_states.data(), a);
  EXPECT_EQ(some.dB, all.dB);
  EXPECT_EQ(some.dA_log, all.dA_log);
  EXPECT_EQ(some.dz, all.dz);
}

// Scanning tokens [0, T1) then [T1, T) with h0 = the first call's h_last
// gives the same outputs as one call (this is how decoding continues a prompt).
TEST(SelectiveScan, SplitSequenceMatchesOneCall) {
  const ScanCase c{2, 150, 19, 4, true, true, true, true};
  const ScanData s = make_data(c, 51);
  const ForwardResult whole = run_forward(contiguous_args(s));

  const int64_t T1 = 70;
  const ScanData first = slice_tokens(s, 0, T1);
  ScanData second = slice_tokens(s, T1, c.T - T1);
  const ForwardResult r1 = run_forward(contiguous_args(first));
  second.h0 = r1.h_last;
  const ForwardResult r2 = run_forward(contiguous_args(second));

  std::vector<float> joined;
  for (int64_t b = 0; b < c.B; ++b) {
    joined.insert(joined.end(), r1.y.begin() + b * T1 * c.D, r1.y.begin() + (b + 1) * T1 * c.D);
    joined.insert(joined.end(), r2.y.begin() + b * (c.T - T1) * c.D, r2.y.begin() + (b + 1) * (c.T - T1) * c.D);
  }
  test::expect_close(joined, whole.y, 1e-6, "y of split calls");
  test::expect_close(r2.h_last, whole.h_last, 1e-6, "h_last of split calls");
}

// Inputs read as column slices of fused projection rows and gradients written
// into slices of wide rows give bit-identical results to contiguous buffers,
// and nothing outside the slices is written.
TEST(SelectiveScan, StridedSlicesMatchContiguous) {
  const ScanCase c{2, 70, 19, 4, true, true, true, true};
  const ScanData s = make_data(c, 61);
  Rng rng(62);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  const int64_t rows = c.B * c.T, D = c.D, N = c.N;
  // Row of the fused "xz/dt" buffer: [pad 3 | u | delta | z | pad 2]; BC row: [pad 1 | B | C | pad 3].
  const int64_t ld_x = 3 + 3 * D + 2, ld_bc = 1 + 2 * N + 3;
  std::vector<float> wide_x = random_floats(rows * ld_x, rng), wide_bc = random_floats(rows * ld_bc, rng);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&wide_x[r * ld_x + 3], &s.u[r * D], D * sizeof(float));
    std::memcpy(&wide_x[r * ld_x + 3 + D], &s.delta[r * D], D * sizeof(float));
    std::memcpy(&wide_x[r * ld_x + 3 + 2 * D], &s.z[r * D], D * sizeof(float));
    std::memcpy(&wide_bc[r * ld_bc + 1], &s.Bm[r * N], N * sizeof(float));
    std::memcpy(&wide_bc[r * ld_bc + 1 + N], &s.Cm[r * N], N * sizeof(float));
  }
  cpu::ScanArgs a = contiguous_args(s);
  a.u = wide_x.data() + 3, a.ld_u = ld_x;
  a.delta = wide_x.data() + 3 + D, a.ld_delta = ld_x;
  a.z = wide_x.data() + 3 + 2 * D, a.ld_z = ld_x;
  a.Bm = wide_bc.data() + 1, a.ld_B = ld_bc;
  a.Cm = wide_bc.data() + 1 + N, a.ld_C = ld_bc;

  const ForwardResult contiguous = run_forward(contiguous_args(s));
  const ForwardResult strided = run_forward(a);
  EXPECT_EQ(strided.y, contiguous.y);
  EXPECT_EQ(strided.chunk_states, contiguous.chunk_states);
  EXPECT_EQ(strided.h_last, contiguous.h_last);

  Gradients expected(c);
  run_backward(s, dy, expected);
  const std::vector<float> dwide_x0 = random_floats(rows * ld_x, rng), dwide_bc0 = random_floats(rows * ld_bc, rng);
  std::vector<float> dwide_x(rows * ld_x, 0.0f), dwide_bc(rows * ld_bc, 0.0f);
  // Zero inside the slices so results compare bit for bit; sentinels outside.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < ld_x; ++j)
      if (j < 3 || j >= 3 + 3 * D) dwide_x[r * ld_x + j] = dwide_x0[r * ld_x + j];
    for (int64_t j = 0; j < ld_bc; ++j)
      if (j < 1 || j >= 1 + 2 * N) dwide_bc[r * ld_bc + j] = dwide_bc0[r * ld_bc + j];
  }
  const std::vector<float> dwide_x_before = dwide_x, dwide_bc_before = dwide_bc;
  Gradients shared(c);  // per-channel gradients stay contiguous
  cpu::ScanGrads g = shared.contiguous(c);
  g.du = dwide_x.data() + 3, g.ld_du = ld_x;
  g.ddelta = dwide_x.data() + 3 + D, g.ld_ddelta = ld_x;
  g.dz = dwide_x.data() + 3 + 2 * D, g.ld_dz = ld_x;
  g.dB = dwide_bc.data() + 1, g.ld_dB = ld_bc;
  g.dC = dwide_bc.data() + 1 + N, g.ld_dC = ld_bc;
  cpu::selective_scan_backward(g, dy.data(), strided.chunk_states.data(), a);

  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < ld_x; ++j) {
      const float v = dwide_x[r * ld_x + j];
      if (j < 3 || j >= 3 + 3 * D) {
        ASSERT_EQ(v, dwide_x_before[r * ld_x + j]) << "wrote outside the slices";
        continue;
      }
      const int64_t col = j - 3, which = col / D, d = col % D;
      const auto& ref = which == 0 ? expected.du : which == 1 ? expected.ddelta : expected.dz;
      ASSERT_EQ(v, ref[r * D + d]) << "row " << r << " column " << j;
    }
    for (int64_t j = 0; j < ld_bc; ++j) {
      const float v = dwide_bc[r * ld_bc + j];
      if (j < 1 || j >= 1 + 2 * N) {
        ASSERT_EQ(v, dwide_bc_before[r * ld_bc + j]) << "wrote outside the slices";
        continue;
      }
      const int64_t col = j - 1;
      ASSERT_EQ(v, col < N ? expected.dB[r * N + col] : expected.dC[r * N + col - N]) << "row " << r;
    }
  }
  EXPECT_EQ(shared.dA_log, expected.dA_log);
  EXPECT_EQ(shared.dDskip, expected.dDskip);
  EXPECT_EQ(shared.ddelta_bias, expected.ddelta_bias);
}

TEST(SelectiveScan, ResultsAreBitIdenticalAcrossRunsAndThreadCounts) {
  const ScanCase c{2, 300, 50, 16, true, true, true, true};
  const ScanData s = make_data(c, 71);
  Rng rng(72);
  const std::vector<float> dy = random_floats(c.B * c.T * c.D, rng);
  const int saved_threads = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {2, 2, 1, 3}) {
    set_num_threads(threads);
    const ForwardResult fwd = run_forward(contiguous_args(s));
    Gradients g(c);
    cpu::selective_scan_backward(g.contiguous(c), dy.data(), fwd.chunk_states.data(), contiguous_args(s));
    std::vector<float> all = g.concatenated();
    all.insert(all.end(), fwd.y.begin(), fwd.y.end());
    all.insert(all.end(), fwd.h_last.begin(), fwd.h_last.end());
    results.push_back(std::move(all));
  }
  set_num_threads(saved_threads);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * sizeof(float)))
        << "run " << i << " differs";
}

TEST(SelectiveScan, EmptySequenceCopiesInitialState) {
  const ScanCase c{2, 0, 5, 3, true, true, true, true};
  const ScanData s = make_data(c, 81);
  std::vector<float> h_last(c.B * c.D * c.N, -7.0f);
  cpu::selective_scan_forward(nullptr, nullptr, h_last.data(), contiguous_args(s));
  EXPECT_EQ(h_last, s.h0);
}

}  // namespace
}  // namespace hymba
