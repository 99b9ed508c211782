// A conversation whose cache lives from turn to turn (`hymba chat`). Each
// turn brings the whole conversation as token ids (the chat template
// renders it anew); the session feeds only the ids its cache does not hold
// yet, then generates the reply.
//
// A cache cannot be rolled back (the Mamba state has no past), so the
// session keeps two: the one after the last reply, and a copy taken when
// the last prompt was in. The next turn continues whichever holds a prefix
// of its ids: the reply's state when the template writes the reply back as
// the very tokens generated, else the prompt's (the reply is fed again, not
// the whole conversation), else it starts over.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "infer/decoder.h"
#include "infer/generate.h"

namespace hymba::infer {

class ChatSession {
 public:
  // Room for context_tokens tokens of conversation (prompt and replies).
  ChatSession(Decoder& decoder, int64_t context_tokens);

  // Generates the reply to `conversation` (all turns so far, as ids).
  Generation reply(const Tokenizer& tokenizer, const std::vector<int32_t>& conversation, const GenerateOptions& opt,
                   const TextCallback& on_text = {});

  // Forgets the conversation (the next turn is prefilled from the start).
  void reset();
  // Tokens of the last turn's conversation taken from the cache, not run again.
  int64_t reused_tokens() const { return reused_; }
  int64_t context_tokens() const { return context_; }

 private:
  Decoder& decoder_;
  int64_t context_;
  SequenceCache live_, at_prompt_;
  std::vector<int32_t> live_ids_, prompt_ids_;  // what each cache holds
  int64_t reused_ = 0;
};

}  // namespace hymba::infer
