#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace hymba {

namespace {

// The continued fraction of the regularized incomplete beta function
// (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    for (const double num :
         {m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)), -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))}) {
      d = 1.0 + num * d;
      if (std::fabs(d) < kTiny) d = kTiny;
      c = 1.0 + num / c;
      if (std::fabs(c) < kTiny) c = kTiny;
      d = 1.0 / d;
      h *= d * c;
    }
    if (std::fabs(d * c - 1.0) < kEps) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * beta_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * beta_fraction(b, a, 1.0 - x) / b;
}

}  // namespace

double student_t_cdf(double t, double df) {
  HYMBA_CHECK(df >= 1.0, "student_t_cdf: degrees of freedom ", df, " must be >= 1");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * incomplete_beta(0.5 * df, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
  HYMBA_CHECK(p > 0.0 && p < 1.0, "student_t_quantile: p ", p, " must lie in (0, 1)");
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);
  double lo = 0.0, hi = 1.0;
  while (student_t_cdf(hi, df) < p) hi *= 2.0;  // df 1, p 0.9999: about 3,200
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Spread spread_of(const std::vector<double>& xs, double level) {
  HYMBA_CHECK(level > 0.0 && level < 1.0, "confidence level ", level, " must lie in (0, 1)");
  Spread s;
  s.n = static_cast<int64_t>(xs.size());
  if (xs.empty()) return s;
  double sum = 0.0;
  for (double x : xs) sum += x;
  s.mean = sum / static_cast<double>(s.n);
  s.min = *std::min_element(xs.begin(), xs.end());
  s.max = *std::max_element(xs.begin(), xs.end());
  if (s.n < 2) return s;
  double squares = 0.0;
  for (double x : xs) squares += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(squares / static_cast<double>(s.n - 1));
  const double t = student_t_quantile(0.5 * (1.0 + level), static_cast<double>(s.n - 1));
  s.half_width = t * s.sd / std::sqrt(static_cast<double>(s.n));
  return s;
}

}  // namespace hymba
