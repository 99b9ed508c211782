#include "serve/ollama.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>

namespace hymba::serve {

namespace {

using nlohmann::json;

json parse_object(const std::string& text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error&) {
    throw BadRequest("body", "is not valid JSON");
  }
  if (!body.is_object()) throw BadRequest("body", "must be a JSON object");
  return body;
}

const json* find(const json& o, const char* name) {
  const auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string string_of(const json& o, const char* name, const char* field) {
  const json* v = find(o, name);
  if (v == nullptr) return "";
  if (!v->is_string()) throw BadRequest(field, "must be a string");
  return v->get<std::string>();
}

bool bool_of(const json& o, const char* name, bool fallback) {
  const json* v = find(o, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw BadRequest(name, "must be true or false");
  return v->get<bool>();
}

double number_of(const json& o, const char* name, double fallback, double lo, double hi) {
  const json* v = find(o, name);
  if (v == nullptr) return fallback;
  const std::string field = std::string("options.") + name;
  if (!v->is_number()) throw BadRequest(field, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) throw BadRequest(field, "must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  return x;
}

// Ollama's "options" onto the engine's sampling, its defaults where it has them.
void parse_options(const json& body, OllamaRequest& r) {
  static const json kNone = json::object();
  const json* given = find(body, "options");
  if (given != nullptr && !given->is_object()) throw BadRequest("options", "must be an object");
  const json& o = given != nullptr ? *given : kNone;
  infer::SamplingOptions& s = r.options.sampling;
  s.temperature = number_of(o, "temperature", 0.8, 0.0, 100.0);
  s.top_k = static_cast<int64_t>(number_of(o, "top_k", 40, 0, 1e9));
  s.top_p = number_of(o, "top_p", 0.9, 0.0, 1.0);
  if (s.top_p == 0.0) s.top_p = 1.0;  // Ollama reads 0 as off
  s.min_p = number_of(o, "min_p", 0.0, 0.0, 1.0);
  s.repetition_penalty = number_of(o, "repeat_penalty", 1.0, 0.01, 100.0);
  s.presence_penalty = number_of(o, "presence_penalty", 0.0, -2.0, 2.0);
  s.frequency_penalty = number_of(o, "frequency_penalty", 0.0, -2.0, 2.0);
  if (find(o, "seed") != nullptr) {
    s.seed = static_cast<uint64_t>(static_cast<int64_t>(number_of(o, "seed", 0, -9.2e18, 9.2e18)));
  } else {
    std::random_device rd;
    s.seed = (uint64_t{rd()} << 32) ^ rd();
  }
  const double predict = number_of(o, "num_predict", -1, -2, static_cast<double>(kMaxTokensLimit));
  r.num_predict_given = predict >= 0;
  r.options.max_new_tokens = predict >= 1 ? static_cast<int64_t>(predict) : kMaxTokensLimit;
  if (predict == 0) throw BadRequest("options.num_predict", "must be at least 1 (-1: until EOS or the context)");
  if (const json* stop = find(o, "stop"); stop != nullptr) {
    if (stop->is_string()) {
      r.options.stop = {stop->get<std::string>()};
    } else if (stop->is_array()) {
      for (const json& x : *stop) {
        if (!x.is_string() || x.get<std::string>().empty())
          throw BadRequest("options.stop", "must hold non-empty strings");
        r.options.stop.push_back(x.get<std::string>());
      }
    } else {
      throw BadRequest("options.stop", "must be a string or an array of strings");
    }
  }
}

// "format": "json" is JSON mode; a JSON schema (an object) is refused.
void parse_format(const json& body, OllamaRequest& r) {
  const json* f = find(body, "format");
  if (f == nullptr || (f->is_string() && f->get<std::string>().empty())) return;
  if (f->is_string() && *f == "json") {
    r.options.json_object = true;
    return;
  }
  throw BadRequest("format", "only \"json\" is supported (not a schema)");
}

OllamaRequest common(const json& body) {
  OllamaRequest r;
  r.model = string_of(body, "model", "model");
  r.stream = bool_of(body, "stream", true);
  for (const char* unsupported : {"images", "tools", "think"})
    if (find(body, unsupported) != nullptr) throw BadRequest(unsupported, "is not supported");
  parse_options(body, r);
  parse_format(body, r);
  return r;
}

}  // namespace

OllamaRequest parse_ollama_generate(const std::string& text) {
  const json body = parse_object(text);
  OllamaRequest r = common(body);
  r.prompt = string_of(body, "prompt", "prompt");
  r.system = string_of(body, "system", "system");
  r.raw = bool_of(body, "raw", false);
  if (find(body, "suffix") != nullptr) throw BadRequest("suffix", "is not supported");
  if (find(body, "template") != nullptr) throw BadRequest("template", "is not supported (the checkpoint's is used)");
  if (const json* ctx = find(body, "context"); ctx != nullptr) {
    if (!ctx->is_array()) throw BadRequest("context", "must be an array of token ids");
    for (const json& id : *ctx) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw BadRequest("context", "must hold non-negative token ids");
      r.context.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return r;
}

OllamaRequest parse_ollama_chat(const std::string& text) {
  const json body = parse_object(text);
  OllamaRequest r = common(body);
  const json* messages = find(body, "messages");
  if (messages == nullptr) throw BadRequest("messages", "is required");
  // The OpenAI route's checks of roles and contents, field names included.
  r.messages = parse_chat_request(json{{"messages", *messages}}.dump()).messages;
  return r;
}

OllamaRequest parse_ollama_embed(const std::string& text) {
  const json body = parse_object(text);
  OllamaRequest r;
  r.model = string_of(body, "model", "model");
  r.truncate = bool_of(body, "truncate", true);
  const json* input = find(body, "input");
  if (input == nullptr) throw BadRequest("input", "is required");
  if (input->is_string()) {
    r.inputs.push_back(input->get<std::string>());
  } else if (input->is_array() && !input->empty()) {
    for (const json& x : *input) {
      if (!x.is_string()) throw BadRequest("input", "must be a string or an array of strings");
      r.inputs.push_back(x.get<std::string>());
    }
  } else {
    throw BadRequest("input", "must be a string or a non-empty array of strings");
  }
  return r;
}

OllamaRequest parse_ollama_embeddings(const std::string& text) {
  const json body = parse_object(text);
  OllamaRequest r;
  r.model = string_of(body, "model", "model");
  const json* prompt = find(body, "prompt");
  if (prompt == nullptr || !prompt->is_string()) throw BadRequest("prompt", "is required, a string");
  r.inputs.push_back(prompt->get<std::string>());
  r.truncate = false;
  return r;
}

std::string parse_ollama_show(const std::string& text) {
  const json body = parse_object(text);
  std::string name = string_of(body, "model", "model");
  if (name.empty()) name = string_of(body, "name", "name");
  if (name.empty()) throw BadRequest("model", "is required");
  return name;
}

bool same_ollama_model(const std::string& asked, const std::string& served) {
  if (asked == served) return true;
  static const std::string kLatest = ":latest";
  return asked.size() == served.size() + kLatest.size() && asked.compare(0, served.size(), served) == 0 &&
         asked.compare(served.size(), kLatest.size(), kLatest) == 0;
}

std::string ollama_model_name(const std::string& served) {
  return served.find(':') == std::string::npos ? served + ":latest" : served;
}

std::string ollama_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() % 1000000000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns));
  return buf;
}

const char* ollama_done_reason(infer::FinishReason r) { return r == infer::FinishReason::kLength ? "length" : "stop"; }

void add_ollama_final_fields(json& body, const char* done_reason, const OllamaTimings& t) {
  body["done"] = true;
  body["done_reason"] = done_reason;
  body["total_duration"] = t.total_ns;
  body["load_duration"] = 0;  // the model is loaded when the server starts
  body["prompt_eval_count"] = t.prompt_tokens;
  body["prompt_eval_duration"] = t.prompt_eval_ns;
  body["eval_count"] = t.eval_tokens;
  body["eval_duration"] = t.eval_ns;
}

json ollama_error(const std::string& message) { return {{"error", message}}; }

}  // namespace hymba::serve
