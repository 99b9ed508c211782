#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace hymba::infer {

namespace {

// Most likely first; equal probabilities keep the lower id first.
bool more_likely(const std::pair<int32_t, double>& a, const std::pair<int32_t, double>& b) {
  return a.second > b.second || (a.second == b.second && a.first < b.first);
}

}  // namespace

int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingOptions& opt, uint64_t stream) : opt_(opt), rng_(Rng(opt.seed).split(stream)) {
  HYMBA_CHECK(std::isfinite(opt.temperature) && opt.temperature >= 0.0,
              "--temperature must be >= 0 (0 = greedy), got ", opt.temperature);
  HYMBA_CHECK(opt.top_k >= 0, "--top-k must be >= 0 (0 = off), got ", opt.top_k);
  HYMBA_CHECK(opt.top_p > 0.0 && opt.top_p <= 1.0, "--top-p must be in (0, 1], got ", opt.top_p);
}

std::vector<std::pair<int32_t, double>> Sampler::candidates(const float* logits, int64_t n, bool sorted) const {
  HYMBA_CHECK(n >= 1, "sampler: no logits");
  // exp((l - max) / T) in double: a tiny temperature leaves (nearly) all mass on the maximum.
  const float top = logits[argmax(logits, n)];
  std::vector<std::pair<int32_t, double>> cand(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double w = std::exp((static_cast<double>(logits[i]) - top) / opt_.temperature);
    cand[static_cast<size_t>(i)] = {static_cast<int32_t>(i), std::isnan(w) ? 0.0 : w};
  }
  if (opt_.top_k > 0 && opt_.top_k < n) {
    const auto k = static_cast<std::ptrdiff_t>(opt_.top_k);
    std::nth_element(cand.begin(), cand.begin() + (k - 1), cand.end(), more_likely);
    cand.resize(static_cast<size_t>(k));
  }
  double mass = 0.0;
  for (const auto& c : cand) mass += c.second;
  HYMBA_CHECK(mass > 0.0, "sampler: the logits are not finite");
  if (opt_.top_p < 1.0) {
    // Nuclei are usually a few dozen tokens: sort a prefix, and all only if it falls short.
    size_t prefix = std::min<size_t>(cand.size(), 64);
    for (;;) {
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(prefix), cand.end(), more_likely);
      double cum = 0.0;
      size_t size = 0;
      while (size < prefix && cum < opt_.top_p * mass) cum += cand[size++].second;
      if (cum >= opt_.top_p * mass || prefix == cand.size()) {
        cand.resize(size);
        mass = cum;
        break;
      }
      prefix = cand.size();
    }
  } else if (sorted) {
    std::sort(cand.begin(), cand.end(), more_likely);
  }
  for (auto& c : cand) c.second /= mass;
  return cand;
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(const float* logits, int64_t n) const {
  return candidates(logits, n, true);
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  if (greedy()) return argmax(logits, n);
  const auto dist = candidates(logits, n, false);
  const double u = rng_.uniform_double();
  double cum = 0.0;
  for (const auto& [id, p] : dist) {
    cum += p;
    if (u < cum) return id;
  }
  return dist.back().first;  // u within rounding of 1
}

}  // namespace hymba::infer
