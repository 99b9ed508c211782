#include "infer/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace hymba::infer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes at the end of s that begin a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

// Length of the longest end of text that is the start of a stop string.
size_t stop_prefix_tail(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& s : stops)
    for (size_t len = std::min(s.size() - 1, text.size()); len > best; --len)
      if (text.ends_with(std::string_view(s).substr(0, len))) {
        best = len;
        break;
      }
  return best;
}

// Logits that are NaN or infinite (finite but huge weights overflow float32)
// would be sampled as garbage tokens: stop with the reason instead.
void check_finite_logits(const float* logits, int64_t vocab, size_t sequence) {
  for (int64_t v = 0; v < vocab; ++v)
    HYMBA_CHECK(std::isfinite(logits[v]), "generate: the model's logits for sequence ", sequence + 1,
                " are not finite (", logits[v], " at token ", v,
                "): its weights overflow float32 arithmetic; check the checkpoint");
}

}  // namespace

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return "stop";
  }
  return "?";
}

void validate(const GenerateOptions& opt) {
  HYMBA_CHECK(opt.max_new_tokens >= 1, "--max-new-tokens must be >= 1, got ", opt.max_new_tokens);
  for (const std::string& s : opt.stop) HYMBA_CHECK(!s.empty(), "--stop: a stop string is empty");
  Sampler check(opt.sampling, 0);  // throws on bad sampling options
}

SequenceRun::SequenceRun(const Decoder& decoder, std::vector<int32_t> prompt, const GenerateOptions& opt,
                         uint64_t stream)
    : opt_(opt),
      stream_(stream),
      gen_{std::move(prompt), {}, {}, FinishReason::kLength},
      cache_(decoder.new_cache(static_cast<int64_t>(gen_.prompt.size()) + opt.max_new_tokens)),
      sampler_(opt.sampling, stream) {
  check_and_prepare(decoder);
}

SequenceRun::SequenceRun(const Decoder& decoder, SequenceCache cache, int64_t cached, std::vector<int32_t> prompt,
                         const GenerateOptions& opt, uint64_t stream)
    : opt_(opt),
      stream_(stream),
      gen_{std::move(prompt), {}, {}, FinishReason::kLength},
      cache_(std::move(cache)),
      sampler_(opt.sampling, stream),
      prefilled_(cached) {
  const auto n = static_cast<int64_t>(gen_.prompt.size());
  HYMBA_CHECK(cached >= 0 && cached < n && (cached == 0 || cache_.tokens() == cached), "generate: a cache holding ",
              cache_.tokens(), " tokens cannot continue from ", cached, " of a ", n, "-token prompt");
  HYMBA_CHECK(n + opt.max_new_tokens <= cache_.max_tokens(), "generate: ", n, " prompt tokens + ",
              opt.max_new_tokens, " new (--max-new-tokens) do not fit the ", cache_.max_tokens(),
              " tokens of the cache");
  check_and_prepare(decoder);
}

void SequenceRun::check_and_prepare(const Decoder& decoder) {
  for (const std::string& s : opt_.stop) longest_stop_ = std::max(longest_stop_, s.size());
  HYMBA_CHECK(!gen_.prompt.empty(), "generate: prompt ", stream_, " has no tokens");
  if (opt_.sampling.repetition_penalty != 1.0) sampler_.set_prompt(gen_.prompt);
  const ModelConfig& c = decoder.config();
  if (c.position_embedding == PositionEmbedding::kLearned) {
    // Every token but the last generated one is fed back, each at its own learned position.
    const int64_t needed = c.num_memory_tokens + static_cast<int64_t>(gen_.prompt.size()) + opt_.max_new_tokens - 1;
    HYMBA_CHECK(needed <= c.max_position_embeddings, "generate: ", gen_.prompt.size(), " prompt tokens + ",
                opt_.max_new_tokens, " new (--max-new-tokens)", c.num_memory_tokens > 0 ? " + meta tokens" : "",
                " need ", needed, " learned positions, beyond the model's max_position_embeddings (",
                c.max_position_embeddings, ")");
  }
}

std::string_view SequenceRun::prefill(Decoder& decoder, const Tokenizer& tokenizer) {
  return prefill_some(decoder, tokenizer, prompt_tokens_left());
}

std::string_view SequenceRun::prefill_some(Decoder& decoder, const Tokenizer& tokenizer, int64_t max_tokens) {
  HYMBA_CHECK(prefilling() && max_tokens >= 1, "generate: nothing left to prefill");
  if (prefilled_ == 0) decoder.start(cache_);
  const int64_t n = std::min(max_tokens, prompt_tokens_left());
  const std::vector<float> logits =
      decoder.extend(cache_, std::span<const int32_t>(gen_.prompt).subspan(static_cast<size_t>(prefilled_),
                                                                         static_cast<size_t>(n)));
  prefilled_ += n;
  if (prefilling()) return {};
  return take(logits.data(), tokenizer);
}

std::string_view SequenceRun::take(const float* logits, const Tokenizer& tokenizer) {
  const int64_t vocab = tokenizer.vocab_size();
  check_finite_logits(logits, vocab, stream_);
  if (!opt_.json_object) return accept(sampler_.sample(logits, vocab), tokenizer);
  if (!json_) json_.emplace(token_pieces(tokenizer), tokenizer.eos_id());
  masked_.assign(logits, logits + vocab);
  json_->mask(masked_.data(), vocab);
  const int32_t token = sampler_.sample(masked_.data(), vocab);
  json_->accept(token);
  return accept(token, tokenizer);
}

// Ends the sequence on EOS, a stop string or the limit, and returns whatever
// text has become final.
std::string_view SequenceRun::accept(int32_t token, const Tokenizer& tokenizer) {
  ++sampled_;
  if (opt_.stop_at_eos && token == tokenizer.eos_id()) {
    gen_.finish = FinishReason::kEos;
    done_ = true;
  } else {
    gen_.tokens.push_back(token);
    gen_.text = tokenizer.decode(gen_.tokens);
    size_t cut = std::string::npos;
    for (const std::string& s : opt_.stop) cut = std::min(cut, gen_.text.find(s, stop_checked_));
    stop_checked_ = gen_.text.size() - std::min(gen_.text.size(), longest_stop_ > 0 ? longest_stop_ - 1 : 0);
    if (cut != std::string::npos) {
      gen_.text.resize(cut);
      gen_.finish = FinishReason::kStop;
      done_ = true;
    } else if (json_ && json_->complete()) {  // JSON mode: the object is closed
      gen_.finish = FinishReason::kStop;
      done_ = true;
    } else if (static_cast<int64_t>(gen_.tokens.size()) >= opt_.max_new_tokens) {
      gen_.finish = FinishReason::kLength;
      done_ = true;
    }
  }
  const std::string& text = gen_.text;
  const size_t held = done_ ? 0 : std::max(stop_prefix_tail(text, opt_.stop), incomplete_utf8_tail(text));
  const size_t end = text.size() - std::min(held, text.size());
  const size_t from = std::min(emitted_, end);
  emitted_ = std::max(emitted_, end);
  return std::string_view(text).substr(from, end - from);
}

std::vector<Generation> generate(Decoder& decoder, const Tokenizer& tokenizer,
                                 const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt,
                                 const TextCallback& on_text, GenerateStats* stats, const DoneCallback& on_done) {
  validate(opt);
  HYMBA_CHECK(!prompts.empty(), "generate: no prompts");
  const int64_t model_vocab = decoder.vocab_size();
  HYMBA_CHECK(tokenizer.vocab_size() <= model_vocab, "tokenizer: ", tokenizer.vocab_size(),
              " tokens, more than the model's vocab_size ", model_vocab);

  GenerateStats st;
  st.sequences = static_cast<int64_t>(prompts.size());
  std::vector<SequenceRun> seqs;
  seqs.reserve(prompts.size());
  // Passes on sequence i's final text and, once it is done, the sequence.
  auto report = [&](size_t i, std::string_view text) {
    if (on_text && !text.empty()) on_text(static_cast<int64_t>(i), text);
    if (seqs[i].done() && on_done) on_done(static_cast<int64_t>(i), seqs[i].generation());
  };

  const auto prefill_start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.emplace_back(decoder, prompts[i], opt, i);
    st.prompt_tokens += static_cast<int64_t>(prompts[i].size());
    report(i, seqs[i].prefill(decoder, tokenizer));
  }
  st.prefill_seconds = seconds_since(prefill_start);

  const auto decode_start = Clock::now();
  std::vector<SequenceCache*> batch;
  std::vector<int32_t> feed;
  std::vector<size_t> index;
  std::vector<float> logits;
  for (;;) {
    batch.clear();
    feed.clear();
    index.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (seqs[i].done()) continue;
      batch.push_back(&seqs[i].cache());
      feed.push_back(seqs[i].last_token());
      index.push_back(i);
    }
    if (batch.empty()) break;
    logits.resize(batch.size() * static_cast<size_t>(model_vocab));
    decoder.step(batch, feed, logits.data());
    ++st.decode_steps;
    st.decode_tokens += static_cast<int64_t>(batch.size());
    for (size_t j = 0; j < batch.size(); ++j)
      report(index[j], seqs[index[j]].take(logits.data() + j * model_vocab, tokenizer));
  }
  st.decode_seconds = seconds_since(decode_start);

  std::vector<Generation> out;
  out.reserve(seqs.size());
  for (SequenceRun& r : seqs) {
    st.new_tokens += r.sampled();
    st.kv_cache_bytes += static_cast<int64_t>(r.cache().kv_bytes());
    st.mamba_state_bytes += static_cast<int64_t>(r.cache().mamba_bytes());
    out.push_back(r.release());
  }
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace hymba::infer
