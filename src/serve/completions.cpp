#include "serve/completions.h"

#include <cmath>

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

}  // namespace

CompletionRequest parse_completion_request(const std::string& body_text) {
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

  CompletionRequest r;
  if (field(body, "prompt") == nullptr) throw BadRequest("prompt", "is required");
  r.prompts = strings_field(body, "prompt");
  r.n = integer_field(body, "n", 1, 1, kMaxChoices);
  if (const json* stream = field(body, "stream"); stream != nullptr) {
    if (!stream->is_boolean()) throw BadRequest("stream", "must be true or false");
    r.stream = stream->get<bool>();
  }
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
  if (o.max_new_tokens == 0 && !r.echo)
    throw BadRequest("max_tokens", "must be at least 1 (0 only with echo, to score the prompt)");
  infer::SamplingOptions& s = o.sampling;
  s.temperature = number_field(body, "temperature", 1.0);
  if (!(s.temperature >= 0.0 && s.temperature <= 1e6))
    throw BadRequest("temperature", "must be between 0 and 1e6 (0: greedy)");
  s.top_p = number_field(body, "top_p", 1.0);
  if (!(s.top_p > 0.0 && s.top_p <= 1.0)) throw BadRequest("top_p", "must be in (0, 1]");
  s.top_k = integer_field(body, "top_k", 0, 0, int64_t{1} << 30);
  s.seed = static_cast<uint64_t>(integer_field(body, "seed", 0, 0, INT64_MAX));
  o.stop = strings_field(body, "stop");
  if (o.stop.size() > 4) throw BadRequest("stop", "at most 4 stop strings");
  return r;
}

const char* finish_reason(infer::FinishReason r) { return r == infer::FinishReason::kLength ? "length" : "stop"; }

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

json completion_body(const CompletionMeta& meta, const std::vector<infer::Generation>& generations, int64_t n) {
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < generations.size(); ++i) {
    const infer::Generation& g = generations[i];
    choices.push_back({{"text", g.text}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", finish_reason(g.finish)}});
    if (i % static_cast<size_t>(n) == 0) prompt_tokens += static_cast<int64_t>(g.prompt.size());
    completion_tokens += static_cast<int64_t>(g.tokens.size());
  }
  return {{"id", meta.id},
          {"object", "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json chunk_body(const CompletionMeta& meta, size_t index, const std::string& text, const char* reason) {
  json choice = {{"text", text}, {"index", index}, {"logprobs", nullptr},
                 {"finish_reason", reason != nullptr ? json(reason) : json(nullptr)}};
  return {{"id", meta.id}, {"object", "text_completion"}, {"created", meta.created}, {"model", meta.model},
          {"choices", json::array({choice})}};
}

}  // namespace hymba::serve
