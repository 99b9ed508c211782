// The body of POST /v1/completions (src/serve): JSON, field types and
// ranges. A refusal is BadRequest (HTTP 400); nothing else may escape.
#include "fuzz_util.h"
#include "serve/completions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const hymba::serve::CompletionRequest r =
        hymba::serve::parse_completion_request(std::string(hymba::fuzz::as_text(data, size)));
    (void)hymba::serve::error_body("x", "invalid_request_error", r.prompts.front());
  } catch (const hymba::serve::BadRequest& e) {
    const std::string_view msg = e.what();
    if (msg.find('\n') != std::string_view::npos || msg.size() > 600) {
      std::fprintf(stderr, "fuzz: unclear error message (%zu bytes): %.300s\n", msg.size(), e.what());
      std::abort();
    }
  }
  return 0;
}
