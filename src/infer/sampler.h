// Next-token choice from logits: logit biases and repetition penalties,
// then greedy, or temperature, top-k, top-p (nucleus) and min-p. Each sequence owns a Sampler whose random stream is
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
  double min_p = 0.0;        // drop tokens less likely than min_p x the most likely one; 0: off
  uint64_t seed = 0;
  // Added to a token's logit before anything else (OpenAI's logit_bias;
  // -100 bans a token in practice, +100 all but forces it).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // OpenAI's penalties on the tokens generated so far: presence subtracts
  // once from a token that appeared, frequency once per appearance.
  double presence_penalty = 0.0, frequency_penalty = 0.0;
  // llama.cpp's and Hugging Face's on the prompt and generated tokens: a
  // positive logit is divided by it, a negative one multiplied; 1: off.
  double repetition_penalty = 1.0;
  bool adjusts_logits() const {
    return !logit_bias.empty() || presence_penalty != 0.0 || frequency_penalty != 0.0 || repetition_penalty != 1.0;
  }
};

// Index of the largest logit (the lowest index among equals).
int32_t argmax(const float* logits, int64_t n);

class Sampler {
 public:
  // Checks the options; errors name --temperature, --top-k or --top-p.
  Sampler(const SamplingOptions& opt, uint64_t stream);

  bool greedy() const { return opt_.temperature == 0.0 || opt_.top_k == 1; }
  // The prompt's tokens, which the repetition penalty counts as seen.
  void set_prompt(const std::vector<int32_t>& prompt);
  // A token id in [0, n) from logits[0..n), after the biases and penalties;
  // the token then counts as generated for the penalties.
  int32_t sample(const float* logits, int64_t n);
  // The distribution sample() draws from when not greedy: (id, probability)
  // after temperature, top-k and top-p, most likely first, summing to 1.
  std::vector<std::pair<int32_t, double>> distribution(const float* logits, int64_t n) const;

 private:
  // The kept tokens and probabilities; sorted most likely first when asked
  // (top-p always sorts the nucleus).
  std::vector<std::pair<int32_t, double>> candidates(const float* logits, int64_t n, bool sorted) const;

  // logits with the biases and penalties applied (the input itself when none apply).
  const float* adjusted(const float* logits, int64_t n);

  SamplingOptions opt_;
  Rng rng_;
  std::vector<int32_t> generated_count_;  // per token id, grown on demand
  std::vector<uint8_t> in_prompt_;
  std::vector<float> adjusted_;
};

}  // namespace hymba::infer
