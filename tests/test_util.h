// Shared helpers for kernel tests: random data and float64 finite-difference
// gradient checks.
//
// How a backward is checked: the scalar reference forward (templated on T) is
// evaluated in double precision; the scalar loss L = sum(out * w) with random
// weights w gives, by central differences, dL/dinput for every input element.
// The fast float32 backward, fed dout = w, must match within the stated
// tolerance. Inputs are random (never zeros) and shapes small.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/threading.h"

namespace hymba::test {

// Wall-clock bounds in tests (a linear-time guard, say) are set for optimized
// builds; sanitizer builds run them 5-20x slower, so the bounds scale by this.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kSlowBuildFactor = 20.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr double kSlowBuildFactor = 20.0;
#else
inline constexpr double kSlowBuildFactor = 1.0;
#endif
#else
inline constexpr double kSlowBuildFactor = 1.0;
#endif

// Runs fn and expects one hymba::Error on one line containing every part.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a hymba::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "no hymba::Error thrown; expected one mentioning " << (parts.empty() ? "" : parts[0]);
}

inline std::vector<float> random_floats(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// Largest |a - b| relative to the largest |b| (plus a floor so all-tiny
// gradients are compared absolutely).
inline double max_rel_error(const std::vector<float>& a, const std::vector<double>& b, double floor = 1e-6) {
  double scale = floor, err = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return err / scale;
}

// max |a - b| over n elements, divided by scale.
inline double rel_error(const float* a, const float* b, int64_t n, double scale) {
  double err = 0.0;
  for (int64_t i = 0; i < n; ++i) err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
  return err / scale;
}

// max |v| (at least 1e-6), a scale for rel_error.
inline double max_abs(const std::vector<float>& v) {
  double m = 1e-6;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double tol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_TRUE(std::isfinite(actual[i])) << what << " [" << i << "]";
  double err = max_rel_error(actual, expected);
  EXPECT_LE(err, tol) << what << ": max error relative to max magnitude = " << err;
}

inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double tol,
                         const std::string& what) {
  expect_close(actual, to_double(expected), tol, what);
}

// d loss / d x by a central difference (x perturbed in place, restored).
inline double central_difference(const std::function<double()>& loss, double& x, double eps) {
  const double saved = x;
  x = saved + eps;
  const double up = loss();
  x = saved - eps;
  const double down = loss();
  x = saved;
  return (up - down) / (2 * eps);
}

// Central differences of loss() with respect to every element of x.
inline std::vector<double> numeric_grad(const std::function<double()>& loss, std::vector<double>& x,
                                        double eps = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) g[i] = central_difference(loss, x[i], eps);
  return g;
}

// sum(out * w) in double.
inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& w) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
  return s;
}

// Checks one input's analytic gradient against finite differences.
inline void expect_grad_matches(const std::function<double()>& loss, std::vector<double>& x,
                                const std::vector<float>& analytic, double tol, const std::string& what,
                                double eps = 1e-6) {
  std::vector<double> numeric = numeric_grad(loss, x, eps);
  expect_close(analytic, numeric, tol, what + " (analytic vs float64 finite differences)");
}

// For whole-model checks, where differencing every element is too slow: the
// largest |analytic - numeric| over `samples` random elements of x[0, count)
// (all of them when count <= samples), and the largest |numeric| (floor 1e-4).
struct SampledGradError {
  double max_err = 0.0, max_num = 1e-4;
  double relative() const { return max_err / max_num; }
};
inline SampledGradError sampled_grad_error(const std::function<double()>& loss, double* x, const float* analytic,
                                           int64_t count, int64_t samples, Rng& pick, double eps = 1e-5) {
  SampledGradError e;
  for (int64_t k = 0; k < std::min(samples, count); ++k) {
    const int64_t i = count <= samples ? k : static_cast<int64_t>(pick.below(static_cast<uint64_t>(count)));
    const double num = central_difference(loss, x[i], eps);
    e.max_num = std::max(e.max_num, std::abs(num));
    e.max_err = std::max(e.max_err, std::abs(num - static_cast<double>(analytic[i])));
  }
  return e;
}

// Pointers to the rows of a block, `stride` elements apart (per-sequence
// states or caches as a kernel takes them).
template <typename T>
std::vector<T*> row_pointers(std::vector<T>& block, int64_t rows, int64_t stride) {
  std::vector<T*> p;
  for (int64_t r = 0; r < rows; ++r) p.push_back(block.data() + r * stride);
  return p;
}

// rows x cols values laid out ld apart, the floats past each row's cols set
// to pad: a strided operand, or an output whose padding a kernel must not
// write (NaN in an input shows a read).
inline std::vector<float> strided(const std::vector<float>& values, int64_t rows, int64_t cols, int64_t ld,
                                  float pad) {
  std::vector<float> out(static_cast<size_t>(rows * ld), pad);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(values.begin() + r * cols, cols, out.begin() + r * ld);
  return out;
}

// The rows x cols values of a strided buffer, expecting its padding still
// to be pad, bit for bit (nothing written outside the rows).
inline std::vector<float> unstrided(const std::vector<float>& buffer, int64_t rows, int64_t cols, int64_t ld,
                                    float pad) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), buffer.begin() + r * ld, buffer.begin() + r * ld + cols);
    for (int64_t c = cols; c < ld; ++c)
      EXPECT_EQ(std::memcmp(&buffer[static_cast<size_t>(r * ld + c)], &pad, sizeof(float)), 0) << "row " << r;
  }
  return out;
}

// Runs kernel() on 1, 2 and 3 threads (the count restored after): what it
// returns must be the same bits each time.
template <typename Kernel>
void expect_same_bits_on_any_thread_count(Kernel kernel) {
  const int before = num_threads();
  std::vector<float> first;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const std::vector<float> got = kernel();
    if (threads == 1) first = got;
    EXPECT_TRUE(got.size() == first.size() && std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0)
        << "threads " << threads;
  }
  set_num_threads(before);
}

}  // namespace hymba::test
