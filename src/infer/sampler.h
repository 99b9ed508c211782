// Next-token choice from logits: greedy, temperature, top-k and top-p
// (nucleus). Each sequence owns a Sampler whose random stream is
// Rng(seed).split(stream), so a seed reproduces every sequence of a batch
// whatever the batch's size or order of finishing.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace hymba::infer {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy (argmax)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  double top_p = 0.95;       // keep the smallest set with this much probability; 1: all
  uint64_t seed = 0;
};

// Index of the largest logit (the lowest index among equals).
int32_t argmax(const float* logits, int64_t n);

class Sampler {
 public:
  // Checks the options; errors name --temperature, --top-k or --top-p.
  Sampler(const SamplingOptions& opt, uint64_t stream);

  bool greedy() const { return opt_.temperature == 0.0 || opt_.top_k == 1; }
  // A token id in [0, n) from logits[0..n).
  int32_t sample(const float* logits, int64_t n);
  // The distribution sample() draws from when not greedy: (id, probability)
  // after temperature, top-k and top-p, most likely first, summing to 1.
  std::vector<std::pair<int32_t, double>> distribution(const float* logits, int64_t n) const;

 private:
  // The kept tokens and probabilities; sorted most likely first when asked
  // (top-p always sorts the nucleus).
  std::vector<std::pair<int32_t, double>> candidates(const float* logits, int64_t n, bool sorted) const;

  SamplingOptions opt_;
  Rng rng_;
};

}  // namespace hymba::infer
