#include "serve/completions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>

#include "core/base64.h"
#include "core/error.h"
#include "core/json_io.h"
#include "serve/logprobs.h"

namespace hymba::serve {

namespace {

using nlohmann::json;

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

int64_t integer_field(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) throw BadRequest(name, "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw BadRequest(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw BadRequest(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                               std::to_string(x));
  return x;
}

double number_field(const json& body, const char* name, double fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw BadRequest(name, "must be a number");
  return v->get<double>();
}

// A string, or an array of strings (at least one; each non-empty).
std::vector<std::string> strings_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (v == nullptr) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array() && !v->empty()) {
    for (const json& s : *v) {
      if (!s.is_string()) throw BadRequest(name, "must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw BadRequest(name, "must be a string or a non-empty array of strings");
  }
  for (const std::string& s : out)
    if (s.empty()) throw BadRequest(name, "an empty string is not allowed");
  return out;
}

json parse_body(const std::string& body_text) {
  json body;
  try {
    // The shared reader: duplicate keys refused, nesting bounded
    // (kMaxJsonDepth), messages that quote at most a few dozen bytes.
    body = parse_json(body_text, "body");
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind("body: ", 0) == 0) msg.erase(0, 6);
    throw BadRequest("body", msg);
  }
  if (!body.is_object()) throw BadRequest("body", "must be a JSON object");
  if (const json* model = field(body, "model"); model != nullptr && !model->is_string())
    throw BadRequest("model", "must be a string");
  return body;
}

// logit_bias: {"token id": bias in [-100, 100]} (ids checked against the
// vocabulary by the server).
void parse_logit_bias(const json& body, infer::SamplingOptions& s) {
  const json* bias = field(body, "logit_bias");
  if (bias == nullptr || bias->is_null()) return;
  if (!bias->is_object()) throw BadRequest("logit_bias", "must be an object of token id -> bias");
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw BadRequest("logit_bias", "keys must be token ids (got '" + key.substr(0, 24) + "')");
    if (!it.value().is_number() || !(std::fabs(it.value().get<double>()) <= 100.0))
      throw BadRequest("logit_bias", "the bias of token " + key + " must be a number in [-100, 100]");
    s.logit_bias.emplace_back(std::stoi(key), it.value().get<float>());
  }
}

// The penalties and min_p, as OpenAI, vLLM and llama.cpp's server take them.
void parse_penalties(const json& body, infer::SamplingOptions& s) {
  s.presence_penalty = number_field(body, "presence_penalty", 0.0);
  if (!(std::fabs(s.presence_penalty) <= 2.0)) throw BadRequest("presence_penalty", "must be in [-2, 2]");
  s.frequency_penalty = number_field(body, "frequency_penalty", 0.0);
  if (!(std::fabs(s.frequency_penalty) <= 2.0)) throw BadRequest("frequency_penalty", "must be in [-2, 2]");
  s.repetition_penalty = number_field(body, "repetition_penalty", 1.0);
  if (!(s.repetition_penalty > 0.0 && s.repetition_penalty <= 100.0))
    throw BadRequest("repetition_penalty", "must be in (0, 100] (1: off)");
  s.min_p = number_field(body, "min_p", 0.0);
  if (!(s.min_p >= 0.0 && s.min_p <= 1.0)) throw BadRequest("min_p", "must be in [0, 1] (0: off)");
}

// temperature, top_p, top_k, min_p, seed, stop, logit_bias and the
// penalties, shared by both protocols.
void parse_sampling(const json& body, infer::GenerateOptions& o) {
  infer::SamplingOptions& s = o.sampling;
  parse_logit_bias(body, s);
  parse_penalties(body, s);
  s.temperature = number_field(body, "temperature", 1.0);
  if (!(s.temperature >= 0.0 && s.temperature <= 1e6))
    throw BadRequest("temperature", "must be between 0 and 1e6 (0: greedy)");
  s.top_p = number_field(body, "top_p", 1.0);
  if (!(s.top_p > 0.0 && s.top_p <= 1.0)) throw BadRequest("top_p", "must be in (0, 1]");
  s.top_k = integer_field(body, "top_k", 0, 0, int64_t{1} << 30);
  s.seed = static_cast<uint64_t>(integer_field(body, "seed", 0, 0, INT64_MAX));
  o.stop = strings_field(body, "stop");
  if (o.stop.size() > 4) throw BadRequest("stop", "at most 4 stop strings");
}

bool bool_field(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw BadRequest(name, "must be true or false");
  return v->get<bool>();
}

// One message's content as text: a string, or an array of {"type": "text",
// "text": ...} parts joined with "\n".
std::string message_content(const json& message, const std::string& where) {
  const json* content = field(message, "content");
  if (content == nullptr) throw BadRequest(where + ".content", "is required");
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array() || content->empty())
    throw BadRequest(where + ".content", "must be a string or a non-empty array of text parts");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    const std::string part_where = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object() || field(part, "type") == nullptr || !part["type"].is_string())
      throw BadRequest(part_where, "must be an object with a \"type\"");
    if (part["type"] != "text")
      throw BadRequest(part_where + ".type", "only \"text\" parts are supported, got " + json_excerpt(part["type"]));
    if (field(part, "text") == nullptr || !part["text"].is_string())
      throw BadRequest(part_where + ".text", "must be a string");
    if (i > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

// stream_options.include_usage (only with stream): a last chunk with the usage.
bool include_usage_field(const json& body, bool stream) {
  const json* options = field(body, "stream_options");
  if (options == nullptr) return false;
  if (!stream) throw BadRequest("stream_options", "is only allowed with \"stream\": true");
  if (!options->is_object()) throw BadRequest("stream_options", "must be an object");
  const json* usage = field(*options, "include_usage");
  if (usage == nullptr) return false;
  if (!usage->is_boolean()) throw BadRequest("stream_options.include_usage", "must be true or false");
  return usage->get<bool>();
}

namespace {
// response_format: {"type": "text"} (the default) or {"type": "json_object"}
// (JSON mode, infer/json_constraint.h); a schema is refused, not ignored.
void parse_response_format(const json& body, infer::GenerateOptions& o) {
  const json* format = field(body, "response_format");
  if (format == nullptr) return;
  const json* type = format->is_object() ? field(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string())
    throw BadRequest("response_format", "must be an object with a \"type\"");
  if (*type == "json_object")
    o.json_object = true;
  else if (*type != "text")
    throw BadRequest("response_format", "type " + type->dump() +
                                            " is not supported (\"text\" and \"json_object\" are)");
}
}  // namespace

ChatRequest parse_chat_request(const std::string& body_text) {
  const json body = parse_body(body_text);
  ChatRequest r;
  r.model = body.value("model", std::string());
  const json* messages = field(body, "messages");
  if (messages == nullptr) throw BadRequest("messages", "is required");
  if (!messages->is_array() || messages->empty()) throw BadRequest("messages", "must be a non-empty array of messages");
  if (messages->size() > kMaxChatMessages)
    throw BadRequest("messages", "at most " + std::to_string(kMaxChatMessages) + " messages");
  r.messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw BadRequest(where, "must be an object with \"role\" and \"content\"");
    const json* role = field(m, "role");
    if (role == nullptr) throw BadRequest(where + ".role", "is required");
    static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (!role->is_string() || std::find(std::begin(kRoles), std::end(kRoles), role->get<std::string>()) == std::end(kRoles))
      throw BadRequest(where + ".role", "must be one of system, developer, user, assistant, tool; got " + json_excerpt(*role));
    if (field(m, "tool_calls") != nullptr) throw BadRequest(where + ".tool_calls", "tool calls are not supported");
    nlohmann::ordered_json out = {{"role", role->get<std::string>()}, {"content", message_content(m, where)}};
    if (const json* name = field(m, "name"); name != nullptr) {
      if (!name->is_string()) throw BadRequest(where + ".name", "must be a string");
      out["name"] = name->get<std::string>();
    }
    r.messages.push_back(std::move(out));
  }
  r.n = integer_field(body, "n", 1, 1, kMaxChoices);
  r.stream = bool_field(body, "stream", false);
  r.include_usage = include_usage_field(body, r.stream);
  // Refused rather than ignored: a client relying on them would get wrong results silently.
  if (bool_field(body, "logprobs", false)) {
    if (r.stream) throw BadRequest("logprobs", "is not supported with stream");
    r.top_logprobs = integer_field(body, "top_logprobs", 0, 0, kMaxLogprobs);
  } else if (field(body, "top_logprobs") != nullptr) {
    throw BadRequest("top_logprobs", "needs \"logprobs\": true");
  }
  for (const char* unsupported : {"tools", "tool_choice", "functions", "function_call", "suffix"})
    if (field(body, unsupported) != nullptr) throw BadRequest(unsupported, "is not supported");
  parse_response_format(body, r.options);
  const json* max_tokens = field(body, "max_tokens");
  const json* max_completion_tokens = field(body, "max_completion_tokens");
  if (max_tokens != nullptr && max_completion_tokens != nullptr)
    throw BadRequest("max_tokens", "give max_tokens or max_completion_tokens, not both");
  const char* limit_field = max_completion_tokens != nullptr ? "max_completion_tokens" : "max_tokens";
  r.options.max_new_tokens = integer_field(body, limit_field, kDefaultChatMaxTokens, 1, kMaxTokensLimit);
  if (field(body, limit_field) != nullptr) r.max_tokens_field = limit_field;
  parse_sampling(body, r.options);
  return r;
}

// A prompt of token ids: a non-empty list of non-negative integers.
std::vector<int32_t> token_list(const json& v, const char* name) {
  if (!v.is_array() || v.empty()) throw BadRequest(name, "a token input must be a non-empty array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      throw BadRequest(name, "token ids must be non-negative integers (got " + t.dump() + ")");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// "prompt" / "input": a string, strings, token ids, or lists of token ids.
void parse_inputs(const json& body, const char* name, std::vector<std::string>& texts,
                  std::vector<std::vector<int32_t>>& ids) {
  const json* v = field(body, name);
  if (v == nullptr) throw BadRequest(name, "is required");
  if (v->is_array() && !v->empty() && (*v)[0].is_number()) {
    ids.push_back(token_list(*v, name));
  } else if (v->is_array() && !v->empty() && (*v)[0].is_array()) {
    for (const json& p : *v) ids.push_back(token_list(p, name));
  } else {
    texts = strings_field(body, name);
  }
}

CompletionRequest parse_completion_request(const std::string& body_text) {
  const json body = parse_body(body_text);
  CompletionRequest r;
  r.model = body.value("model", std::string());
  parse_inputs(body, "prompt", r.prompts, r.prompt_ids);
  r.n = integer_field(body, "n", 1, 1, kMaxChoices);
  if (const json* stream = field(body, "stream"); stream != nullptr) {
    if (!stream->is_boolean()) throw BadRequest("stream", "must be true or false");
    r.stream = stream->get<bool>();
  }
  r.include_usage = include_usage_field(body, r.stream);
  if (const json* echo = field(body, "echo"); echo != nullptr) {
    if (!echo->is_boolean()) throw BadRequest("echo", "must be true or false");
    r.echo = echo->get<bool>();
  }
  if (field(body, "logprobs") != nullptr) {
    if (field(body, "logprobs")->is_boolean())
      throw BadRequest("logprobs", "must be an integer (top alternatives per token) for completions");
    r.logprobs = integer_field(body, "logprobs", 0, 0, kMaxLogprobs);
  }
  // Refused rather than ignored: a client relying on them would get wrong results silently.
  if ((r.logprobs >= 0 || r.echo) && r.stream)
    throw BadRequest(r.logprobs >= 0 ? "logprobs" : "echo", "is not supported with stream");
  if (integer_field(body, "best_of", 1, 1, 1) != 1) throw BadRequest("best_of", "must be 1");
  if (field(body, "suffix") != nullptr) throw BadRequest("suffix", "is not supported");
  infer::GenerateOptions& o = r.options;
  o.max_new_tokens = integer_field(body, "max_tokens", 16, 0, kMaxTokensLimit);
  if (field(body, "max_tokens") != nullptr) r.max_tokens_field = "max_tokens";
  if (o.max_new_tokens == 0 && !r.echo)
    throw BadRequest("max_tokens", "must be at least 1 (0 only with echo, to score the prompt)");
  parse_sampling(body, o);
  parse_response_format(body, o);
  return r;
}

const char* finish_reason(infer::FinishReason r) { return r == infer::FinishReason::kLength ? "length" : "stop"; }

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

EmbeddingRequest parse_embedding_request(const std::string& body_text) {
  const json body = parse_body(body_text);
  EmbeddingRequest r;
  r.model = body.value("model", std::string());
  parse_inputs(body, "input", r.texts, r.ids);
  if (const json* format = field(body, "encoding_format"); format != nullptr) {
    if (!format->is_string() || (*format != "float" && *format != "base64"))
      throw BadRequest("encoding_format", "must be \"float\" or \"base64\"");
    r.base64 = *format == "base64";
  }
  r.dimensions = integer_field(body, "dimensions", 0, 1, int64_t{1} << 20);
  return r;
}

json embedding_body(const std::string& model, const std::vector<std::vector<float>>& vectors, int64_t prompt_tokens,
                    bool base64) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    // float32 little-endian bytes, as OpenAI's clients decode them (x86 and ARM are little-endian)
    const json embedding =
        base64 ? json(base64_encode(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float))) : json(v);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", embedding}});
  }
  return {{"object", "list"},
          {"data", data},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

json completion_usage(const std::vector<infer::Generation>& generations, int64_t n) {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < generations.size(); ++i) {
    if (i % static_cast<size_t>(n) == 0) prompt_tokens += static_cast<int64_t>(generations[i].prompt.size());
    completion_tokens += static_cast<int64_t>(generations[i].tokens.size());
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_body(const CompletionMeta& meta, const std::vector<infer::Generation>& generations, int64_t n) {
  json choices = json::array();
  for (size_t i = 0; i < generations.size(); ++i) {
    const infer::Generation& g = generations[i];
    choices.push_back({{"text", g.text}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", finish_reason(g.finish)}});
  }
  return {{"id", meta.id},       {"object", "text_completion"}, {"created", meta.created},
          {"model", meta.model}, {"choices", choices},          {"usage", completion_usage(generations, n)}};
}

json completion_usage_chunk(const CompletionMeta& meta, const std::vector<infer::Generation>& generations, int64_t n) {
  return {{"id", meta.id},       {"object", "text_completion"}, {"created", meta.created},
          {"model", meta.model}, {"choices", json::array()},     {"usage", completion_usage(generations, n)}};
}

namespace {

// A chat request's choices all continue its one prompt.
json usage_of(const std::vector<infer::Generation>& generations) {
  return completion_usage(generations, std::max<int64_t>(1, static_cast<int64_t>(generations.size())));
}

}  // namespace

json chat_completion_body(const CompletionMeta& meta, const std::vector<infer::Generation>& generations) {
  json choices = json::array();
  for (size_t i = 0; i < generations.size(); ++i)
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", generations[i].text}}},
                       {"logprobs", nullptr},
                       {"finish_reason", finish_reason(generations[i].finish)}});
  return {{"id", meta.id},         {"object", "chat.completion"}, {"created", meta.created},
          {"model", meta.model},   {"choices", choices},          {"usage", usage_of(generations)}};
}

json chat_chunk_body(const CompletionMeta& meta, size_t index, const json& delta, const char* reason,
                     bool include_usage) {
  json choice = {{"index", index}, {"delta", delta}, {"logprobs", nullptr},
                 {"finish_reason", reason != nullptr ? json(reason) : json(nullptr)}};
  json chunk = {{"id", meta.id}, {"object", "chat.completion.chunk"}, {"created", meta.created},
                {"model", meta.model}, {"choices", json::array({choice})}};
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json chat_usage_chunk(const CompletionMeta& meta, const std::vector<infer::Generation>& generations) {
  return {{"id", meta.id},       {"object", "chat.completion.chunk"}, {"created", meta.created},
          {"model", meta.model}, {"choices", json::array()},           {"usage", usage_of(generations)}};
}

json chunk_body(const CompletionMeta& meta, size_t index, const std::string& text, const char* reason,
               bool include_usage) {
  json choice = {{"text", text}, {"index", index}, {"logprobs", nullptr},
                 {"finish_reason", reason != nullptr ? json(reason) : json(nullptr)}};
  json chunk = {{"id", meta.id}, {"object", "text_completion"}, {"created", meta.created}, {"model", meta.model},
                {"choices", json::array({choice})}};
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

}  // namespace hymba::serve
