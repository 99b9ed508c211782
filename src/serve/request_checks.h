// Pieces every route of `hymba serve` shares: JSON replies, the
// concurrency slot, the checks a prompt and its limits pass (each a
// BadRequest naming the request's field), and the wait on a job whose
// client may leave. The OpenAI routes (server.cpp) and Ollama's
// (ollama_routes.cpp) both use them.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/hymba.h"
#include "serve/completions.h"
#include "serve/scheduler.h"

namespace hymba::serve {

// Generated text may hold bytes that are not UTF-8 (a byte-level model can
// sample anything): they become U+FFFD rather than failing the response.
std::string dump(const nlohmann::json& j);
void reply(httplib::Response& res, int status, const nlohmann::json& body);

// The status a request ends with when its client went away before the
// answer (nginx's 499): the log says it was cancelled, not served.
constexpr int kClientClosedRequest = 499;

// One of --max-concurrent-requests slots, given back when the last owner
// (the handler, or a stream's content provider) lets go.
class CompletionSlot {
 public:
  explicit CompletionSlot(std::shared_ptr<std::atomic<int64_t>> active) : active_(std::move(active)) {}
  ~CompletionSlot() { --*active_; }
  CompletionSlot(const CompletionSlot&) = delete;
  CompletionSlot& operator=(const CompletionSlot&) = delete;

 private:
  std::shared_ptr<std::atomic<int64_t>> active_;
};

// A prompt's ids (what generate() feeds), refused with a 400 on `field` when
// the text encodes to nothing or is longer than --max-prompt-tokens.
std::vector<int32_t> checked_prompt_ids(const LanguageModel& lm, const std::string& text, int64_t max_prompt_tokens,
                                        const char* field, const std::string& what);
// A prompt (or embedding input, `field`) of token ids: each inside the
// vocabulary, the whole within the cap.
void check_token_prompt(const LanguageModel& lm, const std::vector<int32_t>& ids, int64_t max_prompt_tokens,
                        const char* field = "prompt");
// logit_bias names tokens of this model's vocabulary.
void check_logit_bias(const LanguageModel& lm, const infer::SamplingOptions& s);

// The request's names of a generation's limits, for the messages.
struct GenerationFields {
  std::string max_tokens = "max_tokens";  // the field of a defaulted limit
  std::string sequences = "n";
};
// Fits a request into the server's context (prompt + max_tokens tokens per
// sequence), then checks the memory of its caches at that length. A default
// max_tokens shrinks to what the context leaves; one the request set is a
// 400, as OpenAI and vLLM answer. `field`: the request's max_tokens field ("" if
// defaulted); `prompt_field` names the prompt.
void fit_generation(const LanguageModel& lm, const std::vector<std::vector<int32_t>>& prompts, int64_t context,
                    const std::string& field, const char* prompt_field, int64_t& max_new_tokens,
                    const GenerationFields& names = {});

// Waits for a non-streamed job; false when the client went away (the job is
// cancelled and the status set to kClientClosedRequest: an SDK's retry would
// start a copy) or the job failed (`fail` then writes the error reply).
bool wait_while_client_stays(const httplib::Request& req, httplib::Response& res, Job& job,
                             const std::function<void(const std::string&)>& fail);

}  // namespace hymba::serve
