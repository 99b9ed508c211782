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

struct Running {
  Generation gen;
  SequenceCache cache;
  Sampler sampler;
  size_t emitted = 0;      // bytes of gen.text already passed on
  size_t stop_checked = 0; // text before this offset holds no stop string
  bool done = false;
};

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

std::vector<Generation> generate(Decoder& decoder, const Tokenizer& tokenizer,
                                 const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt,
                                 const TextCallback& on_text, GenerateStats* stats, const DoneCallback& on_done) {
  validate(opt);
  HYMBA_CHECK(!prompts.empty(), "generate: no prompts");
  const int64_t model_vocab = decoder.vocab_size();
  HYMBA_CHECK(tokenizer.vocab_size() <= model_vocab, "tokenizer: ", tokenizer.vocab_size(),
              " tokens, more than the model's vocab_size ", model_vocab);
  const int64_t vocab = tokenizer.vocab_size();
  size_t longest_stop = 0;
  for (const std::string& s : opt.stop) longest_stop = std::max(longest_stop, s.size());

  GenerateStats st;
  st.sequences = static_cast<int64_t>(prompts.size());
  std::vector<Running> seqs;
  seqs.reserve(prompts.size());

  // Takes sequence i's next token: ends it on EOS, a stop string or the
  // limit, and passes on whatever text has become final.
  auto accept = [&](size_t i, int32_t token) {
    Running& r = seqs[i];
    ++st.new_tokens;
    if (opt.stop_at_eos && token == tokenizer.eos_id()) {
      r.gen.finish = FinishReason::kEos;
      r.done = true;
    } else {
      r.gen.tokens.push_back(token);
      r.gen.text = tokenizer.decode(r.gen.tokens);
      size_t cut = std::string::npos;
      for (const std::string& s : opt.stop) cut = std::min(cut, r.gen.text.find(s, r.stop_checked));
      r.stop_checked = r.gen.text.size() - std::min(r.gen.text.size(), longest_stop > 0 ? longest_stop - 1 : 0);
      if (cut != std::string::npos) {
        r.gen.text.resize(cut);
        r.gen.finish = FinishReason::kStop;
        r.done = true;
      } else if (static_cast<int64_t>(r.gen.tokens.size()) >= opt.max_new_tokens) {
        r.gen.finish = FinishReason::kLength;
        r.done = true;
      }
    }
    const std::string& text = r.gen.text;
    const size_t held = r.done ? 0 : std::max(stop_prefix_tail(text, opt.stop), incomplete_utf8_tail(text));
    const size_t end = text.size() - std::min(held, text.size());
    if (on_text && end > r.emitted)
      on_text(static_cast<int64_t>(i), std::string_view(text).substr(r.emitted, end - r.emitted));
    r.emitted = std::max(r.emitted, end);
    if (r.done && on_done) on_done(static_cast<int64_t>(i), r.gen);
  };

  const auto prefill_start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>& prompt = prompts[i];
    HYMBA_CHECK(!prompt.empty(), "generate: prompt ", i, " has no tokens");
    seqs.push_back(Running{Generation{prompt, {}, {}, FinishReason::kLength},
                           decoder.new_cache(static_cast<int64_t>(prompt.size()) + opt.max_new_tokens),
                           Sampler(opt.sampling, i)});
    st.prompt_tokens += static_cast<int64_t>(prompt.size());
    const std::vector<float> logits = decoder.prefill(seqs[i].cache, prompt);
    check_finite_logits(logits.data(), vocab, i);
    accept(i, seqs[i].sampler.sample(logits.data(), vocab));
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
      if (seqs[i].done) continue;
      batch.push_back(&seqs[i].cache);
      feed.push_back(seqs[i].gen.tokens.back());
      index.push_back(i);
    }
    if (batch.empty()) break;
    logits.resize(batch.size() * static_cast<size_t>(model_vocab));
    decoder.step(batch, feed, logits.data());
    ++st.decode_steps;
    st.decode_tokens += static_cast<int64_t>(batch.size());
    for (size_t j = 0; j < batch.size(); ++j) {
      check_finite_logits(logits.data() + j * model_vocab, vocab, index[j]);
      accept(index[j], seqs[index[j]].sampler.sample(logits.data() + j * model_vocab, vocab));
    }
  }
  st.decode_seconds = seconds_since(decode_start);

  std::vector<Generation> out;
  out.reserve(seqs.size());
  for (Running& r : seqs) {
    st.kv_cache_bytes += static_cast<int64_t>(r.cache.kv_bytes());
    st.mamba_state_bytes += static_cast<int64_t>(r.cache.mamba_bytes());
    out.push_back(std::move(r.gen));
  }
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace hymba::infer
