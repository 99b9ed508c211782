// Ollama's API on `hymba serve` (docs/serve.md "Ollama's API"): the same
// scheduler, limits and checks as the OpenAI routes, in Ollama's shapes.
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "serve/ollama.h"
#include "serve/request_checks.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace hymba::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// "1.2M", "28M", "1.5B": Ollama's parameter_size.
std::string parameter_size(int64_t n) {
  char buf[32];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof(buf), "%.1fB", static_cast<double>(n) / 1e9);
  else if (n >= 1000000)
    std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(n) / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.1fK", static_cast<double>(n) / 1e3);
  return buf;
}

// hymba (attention and Mamba heads), mamba or transformer.
std::string family(const ModelConfig& c) {
  bool attention = false, mamba = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    attention = attention || c.has_attention(l);
    mamba = mamba || c.has_mamba(l);
  }
  return attention && mamba ? "hymba" : mamba ? "mamba" : "transformer";
}

void fail(httplib::Response& res, int status, const std::string& message) { reply(res, status, ollama_error(message)); }

// A request for another model: 404 as Ollama answers, and true. An empty
// name is the served model.
bool unknown_ollama_model(httplib::Response& res, const std::string& asked, const std::string& served) {
  if (asked.empty() || same_ollama_model(asked, served)) return false;
  fail(res, 404, "model '" + asked + "' not found (this server has '" + ollama_model_name(served) + "')");
  return true;
}

void refuse_busy(httplib::Response& res, const std::string& why) {
  res.set_header("Retry-After", "1");
  fail(res, 429, "the server is busy: " + why + "; retry later");
}

}  // namespace

void Server::add_ollama_routes() {
  const ModelConfig& c = lm_.config();
  const std::string name = ollama_model_name(options_.model_name);
  const json details = {{"parent_model", ""},
                        {"format", "hymba"},
                        {"family", family(c)},
                        {"families", {family(c)}},
                        {"parameter_size", parameter_size(lm_.num_params())},
                        {"quantization_level", infer::to_string(lm_.weight_format())}};
  const json entry = {
      {"name", name}, {"model", name},     {"modified_at", "1970-01-01T00:00:00Z"}, {"size", lm_.num_params() * 4},
      {"digest", ""}, {"details", details}};

  http_->Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"version", HYMBA_VERSION}});
  });
  http_->Get("/api/tags", [entry](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"models", {entry}}});
  });
  http_->Get("/api/ps", [entry](const httplib::Request&, httplib::Response& res) {
    json running = entry;
    running["expires_at"] = "9999-12-31T23:59:59Z";  // loaded while the server runs
    running["size_vram"] = 0;
    reply(res, 200, {{"models", {running}}});
  });
  http_->Post("/api/show", [this, details](const httplib::Request& req, httplib::Response& res) {
    std::string asked;
    try {
      asked = parse_ollama_show(req.body);
    } catch (const BadRequest& e) {
      return fail(res, 400, e.what());
    }
    if (unknown_ollama_model(res, asked, options_.model_name)) return;
    const ModelConfig& cfg = lm_.config();
    const std::string arch = family(cfg);
    reply(res, 200,
          {{"license", ""},
           {"modelfile", "# served by hymba serve from " + lm_.source()},
           {"parameters", ""},
           {"template", chat_template_ ? chat_template_->name() : ""},
           {"details", details},
           {"model_info",
            {{"general.architecture", arch},
             {"general.parameter_count", lm_.num_params()},
             {arch + ".context_length", options_.context},
             {arch + ".embedding_length", cfg.hidden_size},
             {arch + ".block_count", cfg.num_hidden_layers},
             {arch + ".vocab_size", cfg.vocab_size}}},
           {"capabilities", {"completion", "embedding"}},
           {"modified_at", "1970-01-01T00:00:00Z"}});
  });
  add_ollama_generation_routes();
  add_ollama_embedding_routes();
}

// The ids /api/generate feeds: the prompt (after an earlier reply's
// context), through the chat template as a user message unless raw or the
// checkpoint has none (then "system\n\nprompt").
std::vector<int32_t> Server::ollama_prompt_ids(const OllamaRequest& r) const {
  std::vector<int32_t> ids = r.context;
  check_token_prompt(lm_, ids, options_.max_prompt_tokens, "context");
  if (!r.raw && chat_template_ && !chat_template_->is_default()) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!r.system.empty()) messages.push_back({{"role", "system"}, {"content", r.system}});
    messages.push_back({{"role", "user"}, {"content", r.prompt}});
    std::string text;
    try {
      text = chat_template_->render_prompt(messages, lm_.adds_bos());
    } catch (const Error& e) {
      throw BadRequest("prompt", e.what());
    }
    const std::vector<int32_t> more = checked_prompt_ids(lm_, text, options_.max_prompt_tokens, "prompt", "the prompt");
    ids.insert(ids.end(), more.begin(), more.end());
  } else {
    const std::string text = r.system.empty() ? r.prompt : r.system + "\n\n" + r.prompt;
    const std::vector<int32_t> more =
        r.context.empty() ? checked_prompt_ids(lm_, text, options_.max_prompt_tokens, "prompt", "the prompt")
                          : lm_.encode(text);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  if (static_cast<int64_t>(ids.size()) > options_.max_prompt_tokens)
    throw BadRequest("prompt", "context and prompt hold " + std::to_string(ids.size()) +
                                   " tokens, more than this server's --max-prompt-tokens " +
                                   std::to_string(options_.max_prompt_tokens));
  return ids;
}

void Server::add_ollama_generation_routes() {
  const std::string name = ollama_model_name(options_.model_name);
  for (const bool chat : {false, true}) {
    http_->Post(
        chat ? "/api/chat" : "/api/generate", [this, chat, name](const httplib::Request& req, httplib::Response& res) {
          const Clock::time_point started = Clock::now();
          OllamaRequest r;
          std::vector<std::vector<int32_t>> prompts(1);
          try {
            r = chat ? parse_ollama_chat(req.body) : parse_ollama_generate(req.body);
            if (unknown_ollama_model(res, r.model, options_.model_name)) return;
            if (!chat && r.prompt.empty() && r.context.empty())  // Ollama's way to load a model: it is loaded
              return reply(res, 200,
                           {{"model", name},
                            {"created_at", ollama_time_now()},
                            {"response", ""},
                            {"done", true},
                            {"done_reason", "load"}});
            if (chat) {
              if (!chat_template_)
                return fail(res, 500, "this model's chat template cannot be used: " + chat_template_error_);
              std::string text;
              try {
                text = chat_template_->render_prompt(r.messages, lm_.adds_bos());
              } catch (const Error& e) {
                throw BadRequest("messages", e.what());
              }
              prompts[0] = checked_prompt_ids(lm_, text, options_.max_prompt_tokens, "messages", "the chat prompt");
            } else {
              prompts[0] = ollama_prompt_ids(r);
            }
            fit_generation(lm_, prompts, options_.context, r.num_predict_given ? "options.num_predict" : "",
                           chat ? "messages" : "prompt", r.options.max_new_tokens, {"options.num_predict", "requests"});
          } catch (const BadRequest& e) {
            return fail(res, 400, e.what());
          }
          serve_ollama_generation(req, res, std::move(prompts), r, chat, started);
        });
  }
}

void Server::serve_ollama_generation(const httplib::Request& req, httplib::Response& res,
                                     std::vector<std::vector<int32_t>> prompts, const OllamaRequest& r, bool chat,
                                     std::chrono::steady_clock::time_point started) {
  const std::string name = ollama_model_name(options_.model_name);
  const std::shared_ptr<CompletionSlot> slot = try_claim_slot();
  if (!slot)
    return refuse_busy(res, std::to_string(options_.max_concurrent_requests) +
                                " completions are being served (--max-concurrent-requests)");
  const std::vector<int32_t> prompt = prompts[0];
  auto job = std::make_shared<Job>(std::move(prompts), r.options);
  if (const auto admission = scheduler_->try_submit(job, static_cast<size_t>(options_.max_queue));
      admission != Scheduler::Admission::kQueued) {
    if (admission == Scheduler::Admission::kQueueFull)
      return refuse_busy(res, std::to_string(options_.max_queue) + " sequences already wait (--max-queue)");
    return fail(res, 503, "the server is shutting down");
  }
  // A message of the reply: text as "response" (generate) or as the
  // assistant's message (chat).
  const auto message = [name, chat](const std::string& text) {
    json m = {{"model", name}, {"created_at", ollama_time_now()}};
    if (chat)
      m["message"] = {{"role", "assistant"}, {"content", text}};
    else
      m["response"] = text;
    m["done"] = false;  // the last message sets it, with its counts
    return m;
  };
  // The last message: Ollama's counts and durations, and the ids to continue from.
  const auto last = [job, prompt, started, message, chat](const std::string& text) {
    const infer::Generation& g = job->results()[0];
    const Clock::time_point now = Clock::now(), first = job->first_token_time().value_or(now);
    OllamaTimings t;
    t.total_ns = ns_between(started, now);
    t.prompt_eval_ns = ns_between(started, first);
    t.eval_ns = ns_between(first, now);
    t.prompt_tokens = static_cast<int64_t>(prompt.size());
    t.eval_tokens = static_cast<int64_t>(g.tokens.size());
    json m = message(text);
    add_ollama_final_fields(m, ollama_done_reason(g.finish), t);
    if (!chat) {
      std::vector<int32_t> context = prompt;
      context.insert(context.end(), g.tokens.begin(), g.tokens.end());
      m["context"] = context;
    }
    return m;
  };
  if (!r.stream) {
    if (!wait_while_client_stays(req, res, *job, [&res](const std::string& e) { fail(res, 500, e); })) return;
    return reply(res, 200, last(job->results()[0].text));
  }
  res.set_chunked_content_provider(
      "application/x-ndjson",
      [job, message, last, &res](size_t, httplib::DataSink& sink) {
        const auto send = [&](const json& m) {
          const std::string line = dump(m) + "\n";
          if (sink.write(line.data(), line.size())) return true;
          job->cancel();  // the client went away
          res.status = kClientClosedRequest;
          return false;
        };
        std::vector<Job::Event> events;
        const bool more = job->next_events(events);
        for (const Job::Event& e : events)
          if (!e.text.empty() && !send(message(e.text))) return false;
        if (!more) {
          if (const std::string error = job->error(); !error.empty())
            send(ollama_error(error));
          else
            send(last(""));
          sink.done();
        }
        return true;
      },
      [job, slot](bool) {
        job->cancel();
        (void)slot;  // held until the stream ends
      });
}

// /api/embed: L2-normalized pooled hidden states, as Ollama's; the legacy
// /api/embeddings: one raw vector. Inputs longer than --max-prompt-tokens
// are cut there when "truncate" (the default), else refused.
void Server::add_ollama_embedding_routes() {
  const std::string name = ollama_model_name(options_.model_name);
  for (const bool legacy : {false, true}) {
    http_->Post(legacy ? "/api/embeddings" : "/api/embed", [this, legacy, name](const httplib::Request& req,
                                                                                httplib::Response& res) {
      const Clock::time_point started = Clock::now();
      OllamaRequest r;
      std::vector<std::vector<int32_t>> inputs;
      try {
        r = legacy ? parse_ollama_embeddings(req.body) : parse_ollama_embed(req.body);
        if (unknown_ollama_model(res, r.model, options_.model_name)) return;
        for (const std::string& text : r.inputs) {
          std::vector<int32_t> ids = lm_.encode(text);
          if (ids.empty()) throw BadRequest(legacy ? "prompt" : "input", "an input encodes to no tokens");
          if (static_cast<int64_t>(ids.size()) > options_.max_prompt_tokens && r.truncate)
            ids.resize(static_cast<size_t>(options_.max_prompt_tokens));
          check_token_prompt(lm_, ids, options_.max_prompt_tokens, legacy ? "prompt" : "input");
          inputs.push_back(std::move(ids));
        }
        if (static_cast<int64_t>(inputs.size()) > options_.max_sequences_per_request)
          throw BadRequest("input", "more inputs than this server's --max-sequences-per-request " +
                                        std::to_string(options_.max_sequences_per_request));
      } catch (const BadRequest& e) {
        return fail(res, 400, e.what());
      }
      std::vector<std::vector<float>> vectors;
      int64_t tokens = 0;
      const auto pooling = options_.embedding_mean ? LanguageModel::Pooling::kMean : LanguageModel::Pooling::kLast;
      const Scheduler::Admission admission = scheduler_->run_exclusively(
          [&] {
            for (const std::vector<int32_t>& ids : inputs) {
              vectors.push_back(lm_.embedding(ids, pooling));
              tokens += static_cast<int64_t>(ids.size());
            }
          },
          static_cast<size_t>(options_.max_queue));
      if (admission == Scheduler::Admission::kQueueFull)
        return refuse_busy(res, std::to_string(options_.max_queue) + " requests already wait (--max-queue)");
      if (admission == Scheduler::Admission::kStopping) return fail(res, 503, "the server is shutting down");
      if (legacy) return reply(res, 200, {{"embedding", vectors[0]}});
      for (std::vector<float>& v : vectors) {
        double norm = 0.0;
        for (const float x : v) norm += static_cast<double>(x) * x;
        if (norm > 0.0)
          for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
      }
      reply(res, 200,
            {{"model", name},
             {"embeddings", vectors},
             {"total_duration", ns_between(started, Clock::now())},
             {"load_duration", 0},
             {"prompt_eval_count", tokens}});
    });
  }
}

}  // namespace hymba::serve
