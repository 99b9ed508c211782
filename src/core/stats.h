// Summary statistics of repeated measurements: mean, standard deviation and
// a Student t confidence interval (the study's repeats, docs/results.md).
#pragma once

#include <cstdint>
#include <vector>

namespace hymba {

// P(T <= t) for Student's t with `df` degrees of freedom (df >= 1).
double student_t_cdf(double t, double df);
// The t with P(T <= t) = p, for 0 < p < 1 and df >= 1.
double student_t_quantile(double p, double df);

struct Spread {
  int64_t n = 0;
  double mean = 0.0;
  double sd = 0.0;          // sample standard deviation (n - 1); 0 when n < 2
  double half_width = 0.0;  // t_{(1+level)/2, n-1} * sd / sqrt(n); 0 when n < 2
  double min = 0.0, max = 0.0;
  bool has_interval() const { return n >= 2; }
  double low() const { return mean - half_width; }
  double high() const { return mean + half_width; }
};

// Mean, spread and the two-sided `level` interval of the mean of `xs`
// (empty: n = 0). The interval assumes independent, roughly normal values.
Spread spread_of(const std::vector<double>& xs, double level = 0.95);

}  // namespace hymba
