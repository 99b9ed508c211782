// Text generation over the cached decoder: prefill every prompt on its own,
// then decode all unfinished sequences together, one token each per step,
// until each hits EOS, a stop string or the token limit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "infer/decoder.h"
#include "infer/json_constraint.h"
#include "infer/sampler.h"

namespace hymba::infer {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;          // sequence i samples from stream i
  std::vector<std::string> stop;     // stop strings, matched on the decoded text
  bool stop_at_eos = true;           // the tokenizer's eos ends a sequence
  // JSON mode: the text is one JSON object and the sequence ends when it
  // closes (FinishReason::kStop); infer/json_constraint.h.
  bool json_object = false;
};

enum class FinishReason { kLength, kEos, kStop };
const char* to_string(FinishReason r);

struct Generation {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // generated ids (an ending EOS is not included)
  std::string text;             // decoded tokens, cut where a stop string begins
  FinishReason finish = FinishReason::kLength;
};

struct GenerateStats {
  int64_t sequences = 0;
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;        // generated tokens, all sequences
  int64_t decode_tokens = 0;     // tokens fed through decode steps
  int64_t decode_steps = 0;
  double prefill_seconds = 0.0;  // prefills and their first sampled token
  double decode_seconds = 0.0;   // decode steps and sampling
  int64_t kv_cache_bytes = 0, mamba_state_bytes = 0;  // allocated, all sequences
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0; }
  double decode_tokens_per_second() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0; }
  // Generated tokens per second of the whole run (prefill included).
  double tokens_per_second() const {
    const double s = prefill_seconds + decode_seconds;
    return s > 0 ? new_tokens / s : 0.0;
  }
};

// Receives text as soon as it is final: a tail that may still become a stop
// string, or an incomplete UTF-8 character, is held back until it cannot.
using TextCallback = std::function<void(int64_t sequence, std::string_view text)>;
// Receives each sequence once, as soon as it has finished.
using DoneCallback = std::function<void(int64_t sequence, const Generation& generation)>;

// Checks the options (generate() does too); errors name the flag.
void validate(const GenerateOptions& opt);

// One sequence being generated: its cache, its sampler (stream `stream` of
// the seed) and its text so far. generate() runs a fixed set of them; the
// server's scheduler (src/serve/) admits new ones between decode steps.
class SequenceRun {
 public:
  // Allocates the cache for prompt + opt.max_new_tokens tokens.
  SequenceRun(const Decoder& decoder, std::vector<int32_t> prompt, const GenerateOptions& opt, uint64_t stream);
  // Continues `cache`, which already holds the first `cached` prompt tokens
  // (fewer than the prompt has; 0: it is started over) and has room for the
  // rest + max_new_tokens.
  SequenceRun(const Decoder& decoder, SequenceCache cache, int64_t cached, std::vector<int32_t> prompt,
              const GenerateOptions& opt, uint64_t stream);

  // Prefills the prompt and takes the first token. Returns the text that
  // has become final (see TextCallback), valid until the next call.
  std::string_view prefill(Decoder& decoder, const Tokenizer& tokenizer);
  // Feeds at most max_tokens more prompt tokens (the server interleaves a
  // long prompt's chunks with other sequences' decode steps); once the
  // prompt is in, takes the first token as prefill() does.
  std::string_view prefill_some(Decoder& decoder, const Tokenizer& tokenizer, int64_t max_tokens);
  bool prefilling() const { return prefilled_ < static_cast<int64_t>(gen_.prompt.size()); }
  int64_t prompt_tokens_left() const { return static_cast<int64_t>(gen_.prompt.size()) - prefilled_; }
  // Samples the next token from this sequence's logits (the decoder's
  // vocab_size of them) and takes it; returns the text now final.
  std::string_view take(const float* logits, const Tokenizer& tokenizer);

  bool done() const { return done_; }
  SequenceCache& cache() { return cache_; }
  int32_t last_token() const { return gen_.tokens.back(); }  // the token to feed next (while !done())
  int64_t sampled() const { return sampled_; }                // tokens taken, an ending EOS included
  const Generation& generation() const { return gen_; }
  Generation release() { return std::move(gen_); }
  SequenceCache release_cache() { return std::move(cache_); }

 private:
  std::string_view accept(int32_t token, const Tokenizer& tokenizer);
  // Both constructors: the prompt fits the model's positions; stop strings measured.
  void check_and_prepare(const Decoder& decoder);

  GenerateOptions opt_;
  size_t longest_stop_ = 0;
  uint64_t stream_;
  Generation gen_;
  SequenceCache cache_;
  Sampler sampler_;
  std::optional<JsonConstraint> json_;  // JSON mode's state, from the first token on
  std::vector<float> masked_;           // JSON mode: the logits with the refused tokens at -inf
  int64_t sampled_ = 0;
  int64_t prefilled_ = 0;    // prompt tokens in the cache
  size_t emitted_ = 0;       // bytes of gen_.text already passed on
  size_t stop_checked_ = 0;  // text before this offset holds no stop string
  bool done_ = false;
};

// Generates a continuation of every prompt (token ids, each non-empty).
// Sampling is limited to ids the tokenizer can decode (the model's vocabulary
// may be larger than the tokenizer's).
std::vector<Generation> generate(Decoder& decoder, const Tokenizer& tokenizer,
                                 const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt,
                                 const TextCallback& on_text = {}, GenerateStats* stats = nullptr,
                                 const DoneCallback& on_done = {});

}  // namespace hymba::infer
