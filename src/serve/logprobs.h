// The `logprobs` object of OpenAI completions (tokens, token_logprobs,
// top_logprobs, text_offset), from the library's token log-probabilities.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/hymba.h"

namespace hymba::serve {

constexpr int64_t kMaxLogprobs = 5;  // top alternatives per token, as OpenAI's completions

// Log-probabilities of ids[first..]: ids[i]'s under the model given ids[..i]
// (LanguageModel::token_logprobs, one forward), null for ids[0]; with k > 0
// the k likeliest tokens at each position too. text_offset counts bytes of
// the tokens' decoded texts from ids[0]. Uses the model: call it where
// nothing else does (Scheduler::run_exclusively).
nlohmann::json logprobs_object(LanguageModel& lm, const std::vector<int32_t>& ids, size_t first, int64_t k);

// The chat form of the same figures for the generated tokens of a choice:
// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
// "logprob", "bytes"}, ...]}, ...]}, with k alternatives per token (0..5).
nlohmann::json chat_logprobs_object(LanguageModel& lm, const std::vector<int32_t>& prompt,
                                    const std::vector<int32_t>& tokens, int64_t k);

}  // namespace hymba::serve
