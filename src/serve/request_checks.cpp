#include "serve/request_checks.h"

#include <algorithm>
#include <chrono>

#include "serve/client_socket.h"

namespace hymba::serve {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

// A prompt's ids (what generate() feeds), refused with a 400 on `field` when
// the text encodes to nothing or is longer than --max-prompt-tokens.
std::vector<int32_t> checked_prompt_ids(const LanguageModel& lm, const std::string& text, int64_t max_prompt_tokens,
                                        const char* field, const std::string& what) {
  std::vector<int32_t> ids;
  try {
    ids = lm.encode_prompt(text);
  } catch (const Error&) {
    throw BadRequest(field, what + " encodes to no tokens");
  }
  if (static_cast<int64_t>(ids.size()) > max_prompt_tokens)
    throw BadRequest(field, what + " of " + std::to_string(ids.size()) +
                                " tokens is longer than this server's --max-prompt-tokens " +
                                std::to_string(max_prompt_tokens));
  return ids;
}

// A prompt (or embedding input, `field`) of token ids: each inside the
// vocabulary, the whole within the cap.
void check_token_prompt(const LanguageModel& lm, const std::vector<int32_t>& ids, int64_t max_prompt_tokens,
                        const char* field) {
  const int64_t vocab = lm.config().vocab_size;
  for (const int32_t id : ids)
    if (id >= vocab)
      throw BadRequest(field, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                  std::to_string(vocab - 1) + ")");
  if (static_cast<int64_t>(ids.size()) > max_prompt_tokens)
    throw BadRequest(field, "an input of " + std::to_string(ids.size()) +
                                " tokens is longer than this server's --max-prompt-tokens " +
                                std::to_string(max_prompt_tokens));
}

// logit_bias names tokens of this model's vocabulary.
void check_logit_bias(const LanguageModel& lm, const infer::SamplingOptions& s) {
  const int64_t vocab = lm.config().vocab_size;
  for (const auto& [id, bias] : s.logit_bias)
    if (id >= vocab)
      throw BadRequest("logit_bias", "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                         std::to_string(vocab - 1) + ")");
}

// Fits a request into the server's context (prompt + max_tokens tokens per
// sequence), then checks the memory of its caches at that length. A default
// max_tokens shrinks to what the context leaves; one the request set is a
// 400, as OpenAI and vLLM answer. `field`: the request's max_tokens field ("" if
// defaulted); `prompt_field` names the prompt.
void fit_generation(const LanguageModel& lm, const std::vector<std::vector<int32_t>>& prompts, int64_t context,
                    const std::string& field, const char* prompt_field, int64_t& max_new_tokens,
                    const GenerationFields& names) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const auto prompt = static_cast<int64_t>(longest);
  if (prompt >= context)
    throw BadRequest(prompt_field, "the prompt has " + std::to_string(prompt) + " tokens, which leaves no room in " +
                                       "this server's context of " + std::to_string(context) + " tokens (--context)");
  if (prompt + max_new_tokens > context) {
    if (!field.empty())
      throw BadRequest(field, "the context is " + std::to_string(context) + " tokens (--context) but " +
                                  std::to_string(prompt + max_new_tokens) + " were asked for (" +
                                  std::to_string(prompt) + " in the prompt, " + std::to_string(max_new_tokens) +
                                  " in the completion); lower " + field + " or the prompt");
    max_new_tokens = context - prompt;
  }
  const std::string limit = field.empty() ? names.max_tokens : field;
  try {
    lm.require_generation_memory(prompts, max_new_tokens, {limit, names.sequences, "the prompt", "this request"});
  } catch (const Error& e) {
    throw BadRequest(limit, std::string("too large for the memory available: ") + e.what());
  }
}

bool wait_while_client_stays(const httplib::Request& req, httplib::Response& res, Job& job,
                             const std::function<void(const std::string&)>& fail) {
  const int client_socket = find_client_socket(req.remote_addr, req.remote_port, req.local_port);
  while (!job.wait_for(std::chrono::milliseconds(100)))
    if (client_socket >= 0 && peer_has_closed(client_socket)) {
      job.cancel();
      res.status = kClientClosedRequest;  // for the log: nothing reaches the client
      return false;
    }
  if (const std::string error = job.error(); !error.empty()) {
    fail(error);
    return false;
  }
  return true;
}

}  // namespace hymba::serve
