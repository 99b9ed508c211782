// The bodies of POST /v1/completions and of Ollama's /api/generate,
// /api/chat and /api/embed (src/serve): JSON, field types and ranges. A
// refusal is BadRequest (HTTP 400); nothing else may escape.
#include <functional>

#include "fuzz_util.h"
#include "serve/completions.h"
#include "serve/ollama.h"

namespace {
void refused_in_one_line(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const hymba::serve::BadRequest& e) {
    const std::string_view msg = e.what();
    if (msg.find('\n') != std::string_view::npos || msg.size() > 600) {
      std::fprintf(stderr, "fuzz: unclear error message (%zu bytes): %.300s\n", msg.size(), e.what());
      std::abort();
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(hymba::fuzz::as_text(data, size));
  refused_in_one_line([&] {
    const hymba::serve::CompletionRequest r = hymba::serve::parse_completion_request(body);
    (void)hymba::serve::error_body("x", "invalid_request_error", r.prompts.empty() ? "" : r.prompts.front());
  });
  refused_in_one_line([&] { (void)hymba::serve::parse_ollama_generate(body); });
  refused_in_one_line([&] { (void)hymba::serve::parse_ollama_chat(body); });
  refused_in_one_line([&] { (void)hymba::serve::parse_ollama_embed(body); });
  return 0;
}
