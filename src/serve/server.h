// `hymba serve`: an HTTP server with OpenAI-style completions over one
// model (docs/serve.md). Endpoints: GET /health, GET /v1/models,
// GET /v1/models/{id}, POST /v1/completions and POST /v1/chat/completions
// (JSON, or server-sent events with "stream": true); chat prompts come from
// the checkpoint's chat_template (chat/chat_template.h).
// Requests run through one Scheduler, which batches the sequences of
// concurrent requests into shared decode steps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/hymba.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace hymba {
class ChatTemplate;
}

namespace hymba::serve {

// The model id a server announces for the directory `hymba serve --ckpt`
// names: its name (for a training run the run's, not its latest
// checkpoint's), and "run/best" or "run/ckpt-300" for a checkpoint inside a
// run. Requests naming another model get 404.
std::string default_model_name(const std::string& ckpt_dir);

// The context a server gives each sequence: `asked`, or when 0 the model's
// trained context (max_position_embeddings less its meta tokens) or
// kDefaultContext where the config names none. Learned positions end there:
// asking beyond them is an error.
constexpr int64_t kDefaultContext = 16384;
int64_t resolve_context(const ModelConfig& cfg, int64_t asked);

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port
  int64_t max_batch = 8;   // sequences decoded together at most
  // Prompt tokens prefilled between two decode steps (scheduler.h): bounds
  // how long one long prompt holds up everyone else's next token.
  int64_t prefill_chunk = 256;
  std::string model_name;  // reported by /v1/models and in responses
  bool log = false;        // one stderr line per request: method, path, status ("cancelled" when the client left)
  // Tokens one sequence may hold, prompt and completion together; a request
  // asking for more is a 400. 0: the model's own (resolve_context).
  int64_t context = 0;
  // Caps on one request and on the queue (docs/serve.md "Limits").
  int64_t max_prompt_tokens = 8192;            // tokens in one prompt
  int64_t max_sequences_per_request = 256;     // prompts x n
  int64_t max_queue = 256;                     // sequences waiting for a decode slot; past it: 429
  // Completions (streamed or not) served at once; past it: 429. Each holds an
  // HTTP worker while it runs; the server keeps kSpareHttpWorkers more, so
  // /health, /v1/models and refusals are answered however busy it is.
  int64_t max_concurrent_requests = 48;
  bool embedding_mean = true;  // /v1/embeddings pools the token positions' hidden states (false: the last one)
  std::string cors_origin;  // non-empty: Access-Control-Allow-Origin on every response, and OPTIONS preflight
};

class Scheduler;
class CompletionSlot;
struct OllamaRequest;
struct CompletionMeta;
struct CompletionRequest;
struct ChatRequest;
class Job;

class Server {
 public:
  // lm must outlive the server and not be used elsewhere while it runs.
  Server(LanguageModel& lm, ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (throws naming --host/--port when it cannot) and
  // returns the port bound.
  int bind();
  // Serves until stop(); call after bind().
  void listen();
  // Fails the requests in flight, stops listening; safe from any thread.
  void stop();

  const Scheduler& scheduler() const { return *scheduler_; }
  const ServeOptions& options() const { return options_; }  // as resolved (context)
  // Why /v1/chat/completions cannot be served ("" when it can): the
  // checkpoint's chat template does not parse.
  const std::string& chat_template_error() const { return chat_template_error_; }
  // The template chat prompts are rendered with (null when it failed).
  const ChatTemplate* chat_template() const { return chat_template_.get(); }

 private:
  void add_routes();
  // A request naming a model other than this server's: replies 404 in
  // OpenAI's shape and returns true. An empty name is this server's model.
  bool unknown_model(httplib::Response& res, const std::string& name) const;
  void add_embeddings_route();
  // Ollama's API beside OpenAI's (ollama_routes.cpp): /api/generate,
  // /api/chat, /api/embed, /api/embeddings, /api/tags, /api/show, /api/ps,
  // /api/version.
  void add_ollama_routes();
  void add_ollama_generation_routes();
  void add_ollama_embedding_routes();
  std::vector<int32_t> ollama_prompt_ids(const OllamaRequest& r) const;
  // Runs one prompt for /api/generate or /api/chat: a reply, or NDJSON lines.
  void serve_ollama_generation(const httplib::Request& req, httplib::Response& res,
                               std::vector<std::vector<int32_t>> prompts, const OllamaRequest& r, bool chat,
                               std::chrono::steady_clock::time_point started);
  // One of --max-concurrent-requests completion slots, or null when all are taken.
  std::shared_ptr<CompletionSlot> try_claim_slot();
  // try_claim_slot(), or null with the 429 written.
  std::shared_ptr<CompletionSlot> claim_slot(httplib::Response& res);
  // Queues the job, or writes the scheduler's refusal and returns false.
  bool submit(httplib::Response& res, const std::shared_ptr<Job>& job);
  // /v1/completions and /v1/chat/completions. The prompts' ids of a request,
  // checked against the server's limits (BadRequest naming the field); the
  // chat's are empty when it replied 500 (an unusable template).
  std::vector<std::vector<int32_t>> completion_prompts(CompletionRequest& request) const;
  std::vector<std::vector<int32_t>> chat_prompts(ChatRequest& request, httplib::Response& res) const;
  void serve_completion(const httplib::Request& req, httplib::Response& res);
  void serve_chat_completion(const httplib::Request& req, httplib::Response& res);
  // The JSON 404/405, other errors' bodies, exceptions as 500s, the request log.
  void add_error_handlers();
  // Puts each choice's chat logprobs (top alternatives per token) into body;
  // false when it replied with an error instead.
  bool add_chat_logprobs(httplib::Response& res, nlohmann::json& body,
                         const std::vector<infer::Generation>& generations, int64_t top);
  // 200 with the choices, plus echo and logprobs when asked (scored on the
  // scheduler's thread; queues: the scoring counts against --max-queue).
  void reply_completion(httplib::Response& res, const CompletionMeta& meta, const CompletionRequest& request,
                        const std::vector<infer::Generation>& generations, bool queues);

  LanguageModel& lm_;
  ServeOptions options_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string chat_template_error_;
  int listen_socket_ = -1;  // seen by the socket-options hook, to set the backlog
  std::shared_ptr<std::atomic<int64_t>> active_completions_ = std::make_shared<std::atomic<int64_t>>(0);
  // httplib's stop() is a no-op until its listen loop has started, so a
  // stop() that races a just-started listen() must wait for the loop.
  std::mutex listen_mutex_;
  bool stopping_ = false;                // under listen_mutex_
  std::atomic<bool> listening_{false};  // listen() entered and not returned
};

}  // namespace hymba::serve
