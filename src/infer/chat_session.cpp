#include "infer/chat_session.h"

#include <algorithm>

#include "core/error.h"

namespace hymba::infer {

namespace {

// Whether held (what a cache holds) is a proper prefix of ids: at least
// one new id is needed for the logits the reply starts from.
bool continues(const std::vector<int32_t>& held, const std::vector<int32_t>& ids) {
  return !held.empty() && held.size() < ids.size() && std::equal(held.begin(), held.end(), ids.begin());
}

}  // namespace

ChatSession::ChatSession(Decoder& decoder, int64_t context_tokens)
    : decoder_(decoder),
      context_(context_tokens),
      live_(decoder.new_cache(context_tokens)),
      at_prompt_(decoder.new_cache(context_tokens)) {}

void ChatSession::reset() {
  live_ids_.clear();
  prompt_ids_.clear();
  reused_ = 0;
}

Generation ChatSession::reply(const Tokenizer& tokenizer, const std::vector<int32_t>& conversation,
                              const GenerateOptions& opt, const TextCallback& on_text) {
  validate(opt);
  const auto n = static_cast<int64_t>(conversation.size());
  HYMBA_CHECK(n >= 1, "chat: the conversation encodes to no tokens");
  HYMBA_CHECK(n + opt.max_new_tokens <= context_, "chat: the conversation (", n, " tokens) + --max-new-tokens ",
              opt.max_new_tokens, " exceed the context of ", context_, " tokens (--context); /reset starts over");
  int64_t cached = 0;
  if (continues(live_ids_, conversation)) {
    cached = static_cast<int64_t>(live_ids_.size());
  } else if (continues(prompt_ids_, conversation)) {
    live_ = at_prompt_;
    cached = static_cast<int64_t>(prompt_ids_.size());
  }
  live_ids_.clear();  // until the turn is through, the live cache is in flux
  reused_ = cached;

  try {
    SequenceRun run(decoder_, std::move(live_), cached, conversation, opt, 0);
    std::vector<int32_t> fed(conversation);
    auto emit = [&](std::string_view text) {
      if (on_text && !text.empty()) on_text(0, text);
    };
    emit(run.prefill(decoder_, tokenizer));
    at_prompt_ = run.cache();
    prompt_ids_ = conversation;
    std::vector<float> logits(static_cast<size_t>(decoder_.vocab_size()));
    while (!run.done()) {
      SequenceCache* one[] = {&run.cache()};
      const int32_t token[] = {run.last_token()};
      decoder_.step(one, token, logits.data());
      fed.push_back(token[0]);
      emit(run.take(logits.data(), tokenizer));
    }
    live_ = run.release_cache();
    live_ids_ = std::move(fed);
    return run.release();
  } catch (...) {
    // The turn's cache went with it: the next turn starts from a clean one.
    live_ = decoder_.new_cache(context_);
    throw;
  }
}

}  // namespace hymba::infer
