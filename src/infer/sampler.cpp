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
  HYMBA_CHECK(opt.min_p >= 0.0 && opt.min_p <= 1.0, "--min-p must be in [0, 1] (0 = off), got ", opt.min_p);
  HYMBA_CHECK(std::isfinite(opt.presence_penalty) && std::fabs(opt.presence_penalty) <= 2.0,
              "--presence-penalty must be in [-2, 2], got ", opt.presence_penalty);
  HYMBA_CHECK(std::isfinite(opt.frequency_penalty) && std::fabs(opt.frequency_penalty) <= 2.0,
              "--frequency-penalty must be in [-2, 2], got ", opt.frequency_penalty);
  HYMBA_CHECK(std::isfinite(opt.repetition_penalty) && opt.repetition_penalty > 0.0,
              "--repetition-penalty must be > 0 (1 = off), got ", opt.repetition_penalty);
  for (const auto& [id, bias] : opt.logit_bias) {
    HYMBA_CHECK(id >= 0, "--logit-bias: token id ", id, " is negative");
    HYMBA_CHECK(std::isfinite(bias) && std::fabs(bias) <= 100.0, "--logit-bias: the bias of token ", id,
                " must be in [-100, 100], got ", bias);
  }
}

void Sampler::set_prompt(const std::vector<int32_t>& prompt) {
  for (const int32_t id : prompt) {
    if (id < 0) continue;
    if (static_cast<size_t>(id) >= in_prompt_.size()) in_prompt_.resize(static_cast<size_t>(id) + 1, 0);
    in_prompt_[static_cast<size_t>(id)] = 1;
  }
}

const float* Sampler::adjusted(const float* logits, int64_t n) {
  if (!opt_.adjusts_logits()) return logits;
  adjusted_.assign(logits, logits + n);
  for (const auto& [id, bias] : opt_.logit_bias)
    if (id < n) adjusted_[static_cast<size_t>(id)] += bias;
  const size_t seen = std::max(generated_count_.size(), in_prompt_.size());
  for (size_t i = 0; i < seen && i < static_cast<size_t>(n); ++i) {
    const int32_t count = i < generated_count_.size() ? generated_count_[i] : 0;
    const bool prompt = i < in_prompt_.size() && in_prompt_[i] != 0;
    float& l = adjusted_[i];
    if ((count > 0 || prompt) && opt_.repetition_penalty != 1.0) {
      const auto r = static_cast<float>(opt_.repetition_penalty);
      l = l > 0.0f ? l / r : l * r;
    }
    if (count > 0)
      l -= static_cast<float>(opt_.presence_penalty + opt_.frequency_penalty * static_cast<double>(count));
  }
  return adjusted_.data();
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
  if (opt_.min_p > 0.0) {
    // Relative to the most likely token, whose weight is exp(0) = 1 when it survived top-k.
    double best = 0.0;
    for (const auto& c : cand) best = std::max(best, c.second);
    const double floor = opt_.min_p * best;
    cand.erase(std::remove_if(cand.begin(), cand.end(), [&](const auto& c) { return c.second < floor; }), cand.end());
    mass = 0.0;
    for (const auto& c : cand) mass += c.second;
  }
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

int32_t Sampler::sample(const float* raw, int64_t n) {
  const float* logits = adjusted(raw, n);
  int32_t token = -1;
  if (greedy()) {
    token = argmax(logits, n);
  } else {
    const auto dist = candidates(logits, n, false);
    const double u = rng_.uniform_double();
    double cum = 0.0;
    for (const auto& [id, p] : dist) {
      cum += p;
      if (u < cum) {
        token = id;
        break;
      }
    }
    if (token < 0) token = dist.back().first;  // u within rounding of 1
  }
  if (opt_.presence_penalty != 0.0 || opt_.frequency_penalty != 0.0 || opt_.repetition_penalty != 1.0) {
    if (static_cast<size_t>(token) >= generated_count_.size()) generated_count_.resize(static_cast<size_t>(token) + 1, 0);
    ++generated_count_[static_cast<size_t>(token)];
  }
  return token;
}

}  // namespace hymba::infer
