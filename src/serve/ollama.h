// Ollama's API, the request and response shapes (https://github.com/ollama/
// ollama/blob/main/docs/api.md): requests parsed into the engine's options,
// replies built as Ollama writes them. The routes are in ollama_routes.cpp.
//
// Mapping. "options" gives temperature (Ollama's default 0.8), top_k (40),
// top_p (0.9), min_p, seed (a fresh one when absent, as Ollama), num_predict
// (-1 or absent: until EOS or the server's context), stop,
// repeat_penalty, presence_penalty, frequency_penalty; other keys (num_ctx,
// num_thread, mirostat, ...) are accepted and have no effect. "format":
// "json" is JSON mode; a schema is refused. Errors are {"error": "..."}
// naming the field, with 400 (404 for an unknown model).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infer/generate.h"
#include "serve/completions.h"

namespace hymba::serve {

struct OllamaRequest {
  std::string model;
  bool stream = true;              // Ollama streams unless told not to
  infer::GenerateOptions options;  // from "options" and "format"
  bool num_predict_given = false;  // options.num_predict was set (>= 0)
  // /api/generate
  std::string prompt, system;
  bool raw = false;              // the prompt as it is, no template
  std::vector<int32_t> context;  // ids of an earlier reply's "context", continued
  // /api/chat
  nlohmann::ordered_json messages;
  // /api/embed ("input") and /api/embeddings ("prompt")
  std::vector<std::string> inputs;
  bool truncate = true;
};

// Each throws BadRequest naming the field.
OllamaRequest parse_ollama_generate(const std::string& body);
OllamaRequest parse_ollama_chat(const std::string& body);
OllamaRequest parse_ollama_embed(const std::string& body);       // /api/embed
OllamaRequest parse_ollama_embeddings(const std::string& body);  // /api/embeddings (legacy)
// The model a /api/show request names ("model", or the older "name").
std::string parse_ollama_show(const std::string& body);

// "name" or "name:latest" both name a model served as "name" (Ollama's tags).
bool same_ollama_model(const std::string& asked, const std::string& served);
// How Ollama lists a model: "name:latest" unless the name has a tag.
std::string ollama_model_name(const std::string& served);

// The time now as Ollama writes it (RFC 3339 with nanoseconds, UTC).
std::string ollama_time_now();

// Timings of a finished generation, nanoseconds, for the last message.
struct OllamaTimings {
  int64_t total_ns = 0, prompt_eval_ns = 0, eval_ns = 0;
  int64_t prompt_tokens = 0, eval_tokens = 0;
};
// "stop" or "length", Ollama's done_reason.
const char* ollama_done_reason(infer::FinishReason r);
// The fields every final message carries: done, done_reason, durations, counts.
void add_ollama_final_fields(nlohmann::json& body, const char* done_reason, const OllamaTimings& t);

// {"error": message}.
nlohmann::json ollama_error(const std::string& message);

}  // namespace hymba::serve
