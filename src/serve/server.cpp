#include "serve/server.h"

#include <httplib.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "chat/chat_template.h"
#include "serve/client_socket.h"
#include "serve/completions.h"
#include "serve/logprobs.h"
#include "serve/request_checks.h"
#include "serve/scheduler.h"
#include "train/run_state.h"

namespace hymba::serve {

namespace {

using nlohmann::json;

// Completions hold an HTTP worker each while they run (--max-concurrent-
// requests of them at most); the spare workers answer everything else, and
// idle keep-alive connections, which hold one each for a few seconds.
constexpr size_t kSpareHttpWorkers = 16;
constexpr size_t kMaxBodyBytes = size_t{16} << 20;
// cpp-httplib's defaults close a keep-alive connection after 5 requests and
// queue 5 pending connections: clients (every SDK keeps connections alive)
// would reconnect constantly and bursts would be refused by the kernel.
constexpr size_t kKeepAliveMaxRequests = 1000;
constexpr int kListenBacklog = 512;
// Whether host:port is taken by another socket: a bare bind (SO_REUSEADDR
// only, so sockets in TIME_WAIT do not count) that fails with EADDRINUSE.
bool port_in_use(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool in_use = false;
  for (addrinfo* a = found; a != nullptr && !in_use; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    in_use = ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return in_use;
}

// A completion id prefix that differs between server runs, so ids stay
// unique across restarts as well as within one run.
std::string random_id_prefix(const char* kind = "cmpl-") {
  std::random_device rd;
  const uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(r));
  return std::string(kind) + hex + "-";
}

void refuse(httplib::Response& res, int status, const std::string& message, const char* code, int retry_after_s) {
  res.set_header("Retry-After", std::to_string(retry_after_s));
  reply(res, status, error_body(message, status == 429 ? "rate_limit_error" : "server_error", "", code));
}

// 429 or 503 for a request the queue or a stopping scheduler turned away.
void refuse_admission(httplib::Response& res, Scheduler::Admission admission, int64_t max_queue) {
  if (admission == Scheduler::Admission::kQueueFull)
    refuse(res, 429, "the server is busy: " + std::to_string(max_queue) +
                         " sequences already wait (--max-queue); retry later", "rate_limit_exceeded", 1);
  else
    refuse(res, 503, "the server is shutting down", "server_shutting_down", 5);
}

}  // namespace

int64_t resolve_context(const ModelConfig& cfg, int64_t asked) {
  HYMBA_CHECK(asked >= 0, "--context must be >= 0 (0: the model's), got ", asked);
  const int64_t trained = cfg.max_position_embeddings - cfg.num_memory_tokens;
  if (cfg.position_embedding == PositionEmbedding::kLearned)
    HYMBA_CHECK(asked <= trained, "--context ", asked, " is beyond the model's learned positions (",
                cfg.max_position_embeddings, " less ", cfg.num_memory_tokens, " meta tokens)");
  if (asked > 0) return asked;
  return cfg.max_position_embeddings > 0 ? std::max<int64_t>(trained, 2) : kDefaultContext;
}

Server::Server(LanguageModel& lm, ServeOptions options)
    : lm_(lm), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  HYMBA_CHECK(options_.port >= 0 && options_.port <= 65535, "--port must be between 0 and 65535, got ",
              options_.port);
  HYMBA_CHECK(options_.max_batch >= 1 && options_.max_batch <= 4096, "--max-batch must be between 1 and 4096, got ",
              options_.max_batch);
  scheduler_ = std::make_unique<Scheduler>(lm_, options_.max_batch, options_.prefill_chunk);
  HYMBA_CHECK(options_.max_concurrent_requests >= 1 && options_.max_concurrent_requests <= 4096,
              "--max-concurrent-requests must be between 1 and 4096, got ", options_.max_concurrent_requests);
  const size_t workers = static_cast<size_t>(options_.max_concurrent_requests) + kSpareHttpWorkers;
  http_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http_->set_payload_max_length(kMaxBodyBytes);
  HYMBA_CHECK(options_.max_prompt_tokens >= 1, "--max-prompt-tokens must be >= 1, got ", options_.max_prompt_tokens);
  HYMBA_CHECK(options_.max_sequences_per_request >= 1, "--max-sequences-per-request must be >= 1, got ",
              options_.max_sequences_per_request);
  for (const char c : options_.cors_origin)
    HYMBA_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, "--cors-origin must not hold control characters");
  HYMBA_CHECK(options_.max_queue >= 1, "--max-queue must be >= 1, got ", options_.max_queue);
  options_.context = resolve_context(lm_.config(), options_.context);
  // Without TCP_NODELAY every response after the first on a keep-alive
  // connection waits ~40 ms for Nagle's algorithm and delayed ACKs. Linux
  // copies the option from the listening socket to accepted ones.
  http_->set_tcp_nodelay(true);
  // Replaces httplib's default, SO_REUSEPORT, which lets a second server
  // bind the same port and split the traffic: SO_REUSEADDR only.
  http_->set_socket_options([this](int fd) {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    listen_socket_ = fd;
  });
  http_->set_keep_alive_max_count(kKeepAliveMaxRequests);
  // A template that cannot be parsed (an unsupported construct) leaves
  // completions served; chat requests then get the reason (chat_template_error()).
  try {
    chat_template_ = std::make_unique<ChatTemplate>(lm_.source().empty() ? ChatTemplate::plain()
                                                                         : ChatTemplate::for_checkpoint(lm_.source()));
  } catch (const Error& e) {
    chat_template_error_ = e.what();
  }
  add_routes();
}

Server::~Server() { stop(); }

void Server::reply_completion(httplib::Response& res, const CompletionMeta& meta, const CompletionRequest& request,
                              const std::vector<infer::Generation>& generations, bool queues) {
  json body = completion_body(meta, generations, request.n);
  if (request.logprobs < 0 && !request.echo) {
    reply(res, 200, body);
    return;
  }
  const auto n = static_cast<size_t>(request.n);
  Scheduler::Admission admission{};
  try {
    admission = scheduler_->run_exclusively(
        [&] {
      for (size_t i = 0; i < generations.size(); ++i) {
        const infer::Generation& g = generations[i];
        json& choice = body["choices"][i];
        if (request.echo) choice["text"] = request.prompts[i / n] + g.text;
        if (request.logprobs < 0) continue;
        std::vector<int32_t> ids = g.prompt;
        ids.insert(ids.end(), g.tokens.begin(), g.tokens.end());
        choice["logprobs"] = logprobs_object(lm_, ids, request.echo ? 0 : g.prompt.size(), request.logprobs);
      }
        },
        queues ? static_cast<size_t>(options_.max_queue) : SIZE_MAX);
  } catch (const Error& e) {
    reply(res, 400, error_body(std::string("prompt: cannot score it: ") + e.what(), "invalid_request_error", "prompt",
                               "invalid_value"));
    return;
  }
  if (admission != Scheduler::Admission::kQueued) {
    refuse_admission(res, admission, options_.max_queue);
    return;
  }
  reply(res, 200, body);
}

int Server::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    HYMBA_CHECK(port > 0, "--host ", options_.host, ": cannot listen there (not an address of this machine?)");
  } else if (!http_->bind_to_port(options_.host, port)) {
    HYMBA_CHECK(!port_in_use(options_.host, port), "--port: port ", port, " is in use on ", options_.host,
                " (another server listens there)");
    HYMBA_CHECK(false, "--host ", options_.host, ": cannot listen on port ", port,
                " (not an address of this machine?)");
  }
  // httplib listens with a backlog of 5; listening again only resizes it.
  if (listen_socket_ >= 0) ::listen(listen_socket_, kListenBacklog);
  return port;
}

void Server::listen() {
  {
    const std::lock_guard<std::mutex> lock(listen_mutex_);
    if (stopping_) return;
    listening_ = true;
  }
  http_->listen_after_bind();
  listening_ = false;
}

void Server::stop() {
  {
    const std::lock_guard<std::mutex> lock(listen_mutex_);
    stopping_ = true;
  }
  scheduler_->stop();  // first: it ends the streams that workers are waiting on
  // A listen() that has begun but whose loop has not yet started would miss
  // httplib's stop() and serve forever.
  while (listening_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

std::string default_model_name(const std::string& ckpt_dir) {
  std::filesystem::path dir = std::filesystem::absolute(ckpt_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  const std::string name = dir.filename().string();
  if (std::filesystem::is_regular_file(dir.parent_path() / kLatestFile))
    return dir.parent_path().filename().string() + "/" + name;
  return name;
}

bool Server::add_chat_logprobs(httplib::Response& res, json& body, const std::vector<infer::Generation>& generations,
                               int64_t top) {
  try {
    // The admitted request scores its choices next, before other sequences queue up behind it.
    const Scheduler::Admission admission = scheduler_->run_exclusively([&] {
      for (size_t i = 0; i < generations.size(); ++i)
        body["choices"][i]["logprobs"] = chat_logprobs_object(lm_, generations[i].prompt, generations[i].tokens, top);
    });
    if (admission == Scheduler::Admission::kQueued) return true;
    refuse_admission(res, admission, options_.max_queue);
  } catch (const Error& e) {
    reply(res, 400, error_body(std::string("logprobs: cannot score the reply: ") + e.what(), "invalid_request_error",
                               "logprobs", "invalid_value"));
  }
  return false;
}

bool Server::unknown_model(httplib::Response& res, const std::string& name) const {
  if (name.empty() || name == options_.model_name) return false;
  reply(res, 404, error_body("The model '" + name + "' does not exist (this server has '" + options_.model_name + "')",
                             "invalid_request_error", "model", "model_not_found"));
  return true;
}

// POST /v1/embeddings: each input's pooled hidden states, computed on the
// scheduler thread between decode steps (the model's activations are shared).
void Server::add_embeddings_route() {
  http_->Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
    EmbeddingRequest request;
    std::vector<std::vector<int32_t>> inputs;
    try {
      request = parse_embedding_request(req.body);
      if (unknown_model(res, request.model)) return;
      const int64_t width = lm_.config().hidden_size;
      if (request.dimensions != 0 && request.dimensions != width)
        throw BadRequest("dimensions", "this model's embeddings have " + std::to_string(width) + " dimensions");
      if (static_cast<int64_t>(request.texts.size() + request.ids.size()) > options_.max_sequences_per_request)
        throw BadRequest("input", "more inputs than this server's --max-sequences-per-request " +
                                      std::to_string(options_.max_sequences_per_request));
      for (const std::string& text : request.texts) {
        std::vector<int32_t> ids = lm_.encode(text);
        if (ids.empty()) throw BadRequest("input", "an input encodes to no tokens");
        check_token_prompt(lm_, ids, options_.max_prompt_tokens, "input");
        inputs.push_back(std::move(ids));
      }
      for (std::vector<int32_t>& ids : request.ids) {
        check_token_prompt(lm_, ids, options_.max_prompt_tokens, "input");
        inputs.push_back(std::move(ids));
      }
    } catch (const BadRequest& e) {
      reply(res, 400, error_body(e.what(), "invalid_request_error", e.field(), "invalid_value"));
      return;
    }
    std::vector<std::vector<float>> vectors;
    int64_t tokens = 0;
    const auto pooling = options_.embedding_mean ? LanguageModel::Pooling::kMean : LanguageModel::Pooling::kLast;
    Scheduler::Admission admission{};
    try {
      admission = scheduler_->run_exclusively(
          [&] {
            for (const std::vector<int32_t>& ids : inputs) {
              vectors.push_back(lm_.embedding(ids, pooling));
              tokens += static_cast<int64_t>(ids.size());
            }
          },
          static_cast<size_t>(options_.max_queue));
    } catch (const Error& e) {
      reply(res, 400, error_body(std::string("input: ") + e.what(), "invalid_request_error", "input", "invalid_value"));
      return;
    }
    if (admission != Scheduler::Admission::kQueued) {
      refuse_admission(res, admission, options_.max_queue);
      return;
    }
    reply(res, 200, embedding_body(options_.model_name, vectors, tokens, request.base64));
  });
}

std::shared_ptr<CompletionSlot> Server::try_claim_slot() {
  if (active_completions_->fetch_add(1) >= options_.max_concurrent_requests) {
    --*active_completions_;
    return nullptr;
  }
  return std::make_shared<CompletionSlot>(active_completions_);
}

std::shared_ptr<CompletionSlot> Server::claim_slot(httplib::Response& res) {
  std::shared_ptr<CompletionSlot> slot = try_claim_slot();
  if (!slot)
    refuse(res, 429, "the server is busy: " + std::to_string(options_.max_concurrent_requests) +
                         " completions are being served (--max-concurrent-requests); retry later",
           "rate_limit_exceeded", 1);
  return slot;
}

bool Server::submit(httplib::Response& res, const std::shared_ptr<Job>& job) {
  const auto admission = scheduler_->try_submit(job, static_cast<size_t>(options_.max_queue));
  if (admission == Scheduler::Admission::kQueued) return true;
  refuse_admission(res, admission, options_.max_queue);
  return false;
}

namespace {

// A request the checks refused: a 400 naming its field, in OpenAI's shape.
void reply_bad_request(httplib::Response& res, const BadRequest& e) {
  reply(res, 400, error_body(e.what(), "invalid_request_error", e.field(), "invalid_value"));
}

// A non-streamed job's wait; a failed job gets a 500 in OpenAI's shape.
bool wait_for(const httplib::Request& req, httplib::Response& res, Job& job) {
  return wait_while_client_stays(req, res, job, [&res](const std::string& error) {
    reply(res, 500, error_body(error, "server_error"));
  });
}

// The stream's end: the job's error, or the usage chunk when asked, then [DONE].
void end_stream(httplib::DataSink& sink, Job& job, const std::function<bool(const json&)>& send,
                const std::function<json()>& usage_chunk) {
  if (const std::string error = job.error(); !error.empty())
    send(error_body(error, "server_error"));
  else if (usage_chunk)
    send(usage_chunk());
  static constexpr std::string_view kDone = "data: [DONE]\n\n";
  sink.write(kDone.data(), kDone.size());
  sink.done();
}

// /v1/completions as server-sent events: a chunk per piece of text.
void stream_completion(httplib::Response& res, std::shared_ptr<Job> job, const CompletionMeta& meta,
                       bool include_usage, int64_t n, std::shared_ptr<CompletionSlot> slot) {
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, meta, include_usage, n, &res](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& data) {
          const std::string event = "data: " + dump(data) + "\n\n";
          return sink.write(event.data(), event.size());
        };
        std::vector<Job::Event> events;
        const bool more = job->next_events(events);
        for (const Job::Event& e : events)
          if (!send(chunk_body(meta, e.sequence, e.text, e.finish ? finish_reason(*e.finish) : nullptr,
                               include_usage))) {
            job->cancel();  // the client went away
            res.status = kClientClosedRequest;
            return false;
          }
        if (!more)
          end_stream(sink, *job, send,
                     include_usage ? std::function<json()>([&] { return completion_usage_chunk(meta, job->results(), n); })
                                   : nullptr);
        return true;
      },
      [job, slot](bool) {
        job->cancel();
        (void)slot;  // held until the stream ends: its concurrency slot is given back with it
      });
}

// /v1/chat/completions as server-sent events: OpenAI's role chunk, then the content.
void stream_chat(httplib::Response& res, std::shared_ptr<Job> job, const CompletionMeta& meta, size_t choices,
                 bool include_usage, std::shared_ptr<CompletionSlot> slot) {
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, meta, choices, include_usage, &res, started = false](size_t, httplib::DataSink& sink) mutable {
        auto send = [&](const json& data) {
          const std::string event = "data: " + dump(data) + "\n\n";
          if (sink.write(event.data(), event.size())) return true;
          job->cancel();  // the client went away
          res.status = kClientClosedRequest;
          return false;
        };
        if (!started) {  // OpenAI's first chunk of each choice: the role, empty content
          started = true;
          for (size_t i = 0; i < choices; ++i)
            if (!send(chat_chunk_body(meta, i, {{"role", "assistant"}, {"content", ""}}, nullptr, include_usage)))
              return false;
        }
        std::vector<Job::Event> events;
        const bool more = job->next_events(events);
        for (const Job::Event& e : events) {
          if (!e.text.empty() && !send(chat_chunk_body(meta, e.sequence, {{"content", e.text}}, nullptr, include_usage)))
            return false;
          if (e.finish && !send(chat_chunk_body(meta, e.sequence, json::object(), finish_reason(*e.finish), include_usage)))
            return false;
        }
        if (!more)
          end_stream(sink, *job, send,
                     include_usage ? std::function<json()>([&] { return chat_usage_chunk(meta, job->results()); })
                                   : nullptr);
        return true;
      },
      [job, slot](bool) {
        job->cancel();
        (void)slot;  // held until the stream ends
      });
}

}  // namespace

std::vector<std::vector<int32_t>> Server::completion_prompts(CompletionRequest& request) const {
  check_logit_bias(lm_, request.options.sampling);
  const int64_t sequences = static_cast<int64_t>(request.prompts.size() + request.prompt_ids.size()) * request.n;
  if (sequences > options_.max_sequences_per_request)
    throw BadRequest(request.n > 1 ? "n" : "prompt",
                     "prompts x n is " + std::to_string(sequences) + ", more than this server's " +
                         "--max-sequences-per-request " + std::to_string(options_.max_sequences_per_request));
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : request.prompts) {
    const std::vector<int32_t> ids = checked_prompt_ids(lm_, text, options_.max_prompt_tokens, "prompt", "a prompt");
    for (int64_t c = 0; c < request.n; ++c) prompts.push_back(ids);
  }
  for (const std::vector<int32_t>& ids : request.prompt_ids) {
    check_token_prompt(lm_, ids, options_.max_prompt_tokens);
    request.prompts.push_back(lm_.decode(ids));  // the text echo shows
    for (int64_t c = 0; c < request.n; ++c) prompts.push_back(ids);
  }
  if (request.options.max_new_tokens > 0)
    fit_generation(lm_, prompts, options_.context, request.max_tokens_field, "prompt", request.options.max_new_tokens);
  return prompts;
}

void Server::serve_completion(const httplib::Request& req, httplib::Response& res) {
  static std::atomic<int64_t> next_id{0};
  static const std::string id_prefix = random_id_prefix();
  CompletionRequest request;
  std::vector<std::vector<int32_t>> prompts;
  try {
    request = parse_completion_request(req.body);
    if (unknown_model(res, request.model)) return;
    prompts = completion_prompts(request);
  } catch (const BadRequest& e) {
    return reply_bad_request(res, e);
  }
  const auto slot = claim_slot(res);
  if (!slot) return;
  const CompletionMeta meta{id_prefix + std::to_string(next_id++), static_cast<int64_t>(std::time(nullptr)),
                            options_.model_name};
  if (request.options.max_new_tokens == 0) {  // echo with max_tokens 0: score the prompts, generate nothing
    std::vector<infer::Generation> scored(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) scored[i].prompt = std::move(prompts[i]);
    reply_completion(res, meta, request, scored, /*queues=*/true);  // a scoring request waits like a sequence
    return;
  }
  auto job = std::make_shared<Job>(std::move(prompts), request.options);
  if (!submit(res, job)) return;
  if (request.stream) return stream_completion(res, job, meta, request.include_usage, request.n, slot);
  if (!wait_for(req, res, *job)) return;
  reply_completion(res, meta, request, job->results(), /*queues=*/false);  // admitted already
}

std::vector<std::vector<int32_t>> Server::chat_prompts(ChatRequest& request, httplib::Response& res) const {
  check_logit_bias(lm_, request.options.sampling);
  if (request.n > options_.max_sequences_per_request)
    throw BadRequest("n", "is " + std::to_string(request.n) + ", more than this server's " +
                              "--max-sequences-per-request " + std::to_string(options_.max_sequences_per_request));
  if (!chat_template_) {
    reply(res, 500, error_body("this model's chat template cannot be used: " + chat_template_error_, "server_error"));
    return {};
  }
  std::string text;
  try {
    text = chat_template_->render_prompt(request.messages, lm_.adds_bos());
  } catch (const Error& e) {  // the template refused the messages (raise_exception) or failed on them
    throw BadRequest("messages", e.what());
  }
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(request.n),
                                            checked_prompt_ids(lm_, text, options_.max_prompt_tokens, "messages",
                                                               "the chat prompt"));
  fit_generation(lm_, prompts, options_.context, request.max_tokens_field, "messages", request.options.max_new_tokens);
  return prompts;
}

void Server::serve_chat_completion(const httplib::Request& req, httplib::Response& res) {
  static std::atomic<int64_t> next_id{0};
  static const std::string id_prefix = random_id_prefix("chatcmpl-");
  ChatRequest request;
  std::vector<std::vector<int32_t>> prompts;
  try {
    request = parse_chat_request(req.body);
    if (unknown_model(res, request.model)) return;
    prompts = chat_prompts(request, res);
    if (prompts.empty()) return;  // replied already
  } catch (const BadRequest& e) {
    return reply_bad_request(res, e);
  }
  const auto slot = claim_slot(res);
  if (!slot) return;
  const CompletionMeta meta{id_prefix + std::to_string(next_id++), static_cast<int64_t>(std::time(nullptr)),
                            options_.model_name};
  auto job = std::make_shared<Job>(std::move(prompts), request.options);
  if (!submit(res, job)) return;
  if (request.stream)
    return stream_chat(res, job, meta, static_cast<size_t>(request.n), request.include_usage, slot);
  if (!wait_for(req, res, *job)) return;
  json body = chat_completion_body(meta, job->results());
  if (request.top_logprobs >= 0 && !add_chat_logprobs(res, body, job->results(), request.top_logprobs)) return;
  reply(res, 200, body);
}

void Server::add_routes() {
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "ok"}}); });
  const json model = {{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "hymba"}};
  http_->Get("/v1/models", [model](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });
  http_->Get("/v1/models/(.+)", [this, model](const httplib::Request& req, httplib::Response& res) {
    if (!unknown_model(res, req.matches[1])) reply(res, 200, model);
  });
  add_embeddings_route();
  add_ollama_routes();
  http_->Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { serve_completion(req, res); });
  http_->Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { serve_chat_completion(req, res); });
  // Browsers send a preflight OPTIONS before a cross-origin POST with a JSON body.
  if (!options_.cors_origin.empty()) {
    http_->set_default_headers({{"Access-Control-Allow-Origin", options_.cors_origin}, {"Vary", "Origin"}});
    http_->Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization");
      res.set_header("Access-Control-Max-Age", "600");
    });
  }
  add_error_handlers();
}

void Server::add_error_handlers() {
  // Unknown paths get a JSON 404, known paths with another method a 405.
  const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request& req, httplib::Response& res) {
    static const std::vector<std::pair<std::string, std::string>> kRoutes = {
        {"/health", "GET"}, {"/v1/models", "GET"}, {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
        {"/v1/embeddings", "POST"}, {"/api/generate", "POST"}, {"/api/chat", "POST"}, {"/api/embed", "POST"},
        {"/api/embeddings", "POST"}, {"/api/show", "POST"}, {"/api/tags", "GET"}, {"/api/ps", "GET"},
        {"/api/version", "GET"}};
    if (res.status == 404 && res.body.empty()) {  // no route matched (a handler's own 404 has a body)
      for (const auto& route : kRoutes)
        if (req.path == route.first || (route.first == "/v1/models" && req.path.rfind("/v1/models/", 0) == 0)) {
          res.set_header("Allow", route.second);
          reply(res, 405,
                error_body(req.method + " " + req.path + ": method not allowed (use " + route.second + ")",
                           "invalid_request_error", "", "method_not_allowed"));
          return httplib::Server::HandlerResponse::Handled;
        }
      reply(res, 404,
            error_body("no such endpoint: " + req.method + " " + req.path, "invalid_request_error", "", "unknown_url"));
    } else if (res.body.empty()) {
      reply(res, res.status, error_body("HTTP " + std::to_string(res.status), "invalid_request_error"));
    }
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(on_error);
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply(res, 500, error_body(what, "server_error"));
  });
  if (options_.log)
    http_->set_logger([](const httplib::Request& req, const httplib::Response& res) {
      if (res.status == kClientClosedRequest)
        std::fprintf(stderr, "%s %s %d cancelled: the client went away\n", req.method.c_str(), req.path.c_str(),
                     res.status);
      else
        std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
}

}  // namespace hymba::serve
