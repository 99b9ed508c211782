// The OpenAI completions protocols (POST /v1/completions and
// /v1/chat/completions): request checking and response bodies, apart from
// HTTP and scheduling so they test alone.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/generate.h"

namespace hymba::serve {

// A request the server refuses with HTTP 400: message is one line that
// starts with the field at fault.
class BadRequest : public std::runtime_error {
 public:
  BadRequest(std::string field, const std::string& message)
      : std::runtime_error(field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

constexpr int64_t kMaxTokensLimit = int64_t{1} << 24;  // as `hymba generate --max-new-tokens`
constexpr int64_t kMaxChoices = 64;                    // n

struct CompletionRequest {
  std::string model;                 // "" when the request names none
  std::vector<std::string> prompts;  // choice p * n + c continues prompts[p]
  // Prompts given as token ids (a list of ints, or a list of such lists), as
  // OpenAI's API allows: used as they are, without the tokenizer; prompts is
  // then empty until the server fills it with their text (for echo).
  std::vector<std::vector<int32_t>> prompt_ids;
  int64_t n = 1;
  bool stream = false;
  int64_t logprobs = -1;  // top alternatives per token (0..kMaxLogprobs); -1: no logprobs object
  bool echo = false;      // the prompt's tokens come first in text and logprobs; max_tokens 0 scores it alone
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  infer::GenerateOptions options;    // stop_at_eos; OpenAI's defaults where it has them
  std::string max_tokens_field;      // "max_tokens" when the request set it; "" when defaulted
};

// Parses and checks a request body; throws BadRequest naming the field.
CompletionRequest parse_completion_request(const std::string& body);

// "stop" for EOS and stop strings, "length" for max_tokens.
const char* finish_reason(infer::FinishReason r);

// {"error": {"message", "type", "param", "code"}}, the OpenAI error shape
// (param and code null when empty).
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = "",
                          const std::string& code = "");

struct CompletionMeta {
  std::string id;     // "cmpl-..."
  int64_t created = 0;
  std::string model;
};
// generations[p * n + c] is choice c of prompt p; each prompt counts once in usage.
nlohmann::json completion_body(const CompletionMeta& meta, const std::vector<infer::Generation>& generations,
                               int64_t n);
// One server-sent event's data: a text chunk of choice `index`, or its end
// (text "" and a finish reason); "usage": null when the stream will end
// with a usage chunk (completion_usage_chunk: no choices, the usage of the
// request's generations, n choices per prompt).
nlohmann::json chunk_body(const CompletionMeta& meta, size_t index, const std::string& text,
                          const char* finish_reason, bool include_usage = false);
nlohmann::json completion_usage_chunk(const CompletionMeta& meta, const std::vector<infer::Generation>& generations,
                                      int64_t n);

constexpr int64_t kDefaultChatMaxTokens = 256;  // chat's max_tokens when absent
constexpr size_t kMaxChatMessages = 4096;

struct ChatRequest {
  // [{"role", "content"[, "name"]}]: roles system/developer/user/assistant/tool,
  // content a string (text parts of an array joined with "\n").
  nlohmann::ordered_json messages;
  std::string model;  // "" when the request names none
  int64_t top_logprobs = -1;  // logprobs: true: alternatives per token (0..kMaxLogprobs); -1: no logprobs
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  infer::GenerateOptions options;
  std::string max_tokens_field;  // max_tokens or max_completion_tokens as the request set it; "" when defaulted
};

// POST /v1/embeddings: inputs as text or token ids (as completion prompts).
struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;  // token inputs, used as they are
  bool base64 = false;                    // encoding_format "base64": little-endian float32 bytes
  int64_t dimensions = 0;                 // 0: not asked (else it must be the model's width)
};
EmbeddingRequest parse_embedding_request(const std::string& body);
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
nlohmann::json embedding_body(const std::string& model, const std::vector<std::vector<float>>& vectors,
                              int64_t prompt_tokens, bool base64);

// Parses and checks a chat request body; throws BadRequest naming the field
// ("messages[1].content"). logprobs, top_logprobs, tools and penalties are
// refused, not ignored.
ChatRequest parse_chat_request(const std::string& body);

// {"object": "chat.completion", choices with message {role, content}}; the
// prompt counts once in usage (the n choices share it).
nlohmann::json chat_completion_body(const CompletionMeta& meta, const std::vector<infer::Generation>& generations);
// One chat.completion.chunk: choice `index` with `delta` ({"role"},
// {"content"} or {}) and a finish reason or null; "usage": null when the
// stream will end with a usage chunk.
nlohmann::json chat_chunk_body(const CompletionMeta& meta, size_t index, const nlohmann::json& delta,
                               const char* finish_reason, bool include_usage);
// The last chunk of a stream with include_usage: no choices, the usage.
nlohmann::json chat_usage_chunk(const CompletionMeta& meta, const std::vector<infer::Generation>& generations);

}  // namespace hymba::serve
