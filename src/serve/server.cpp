#include "serve/server.h"

#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <ctime>

#include "serve/completions.h"
#include "serve/scheduler.h"

namespace hymba::serve {

namespace {

using nlohmann::json;

// Generated text may hold bytes that are not UTF-8 (a byte-level model can
// sample anything): they become U+FFFD rather than failing the response.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

// Streaming requests hold a worker each while they run, and idle keep-alive
// connections one each for a few seconds: enough workers for both.
constexpr size_t kHttpWorkers = 64;
constexpr size_t kMaxBodyBytes = size_t{16} << 20;

}  // namespace

Server::Server(LanguageModel& lm, ServeOptions options)
    : lm_(lm), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  HYMBA_CHECK(options_.port >= 0 && options_.port <= 65535, "--port must be between 0 and 65535, got ",
              options_.port);
  HYMBA_CHECK(options_.max_batch >= 1 && options_.max_batch <= 4096, "--max-batch must be between 1 and 4096, got ",
              options_.max_batch);
  scheduler_ = std::make_unique<Scheduler>(lm_, options_.max_batch);
  http_->new_task_queue = [] { return new httplib::ThreadPool(kHttpWorkers); };
  http_->set_payload_max_length(kMaxBodyBytes);
  add_routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    HYMBA_CHECK(port > 0, "--host ", options_.host, ": cannot listen there (not an address of this machine?)");
    return port;
  }
  HYMBA_CHECK(http_->bind_to_port(options_.host, options_.port), "--port ", options_.port, ": cannot listen on ",
              options_.host, ":", options_.port, " (in use, or --host is not an address of this machine)");
  return options_.port;
}

void Server::listen() { http_->listen_after_bind(); }

void Server::stop() {
  scheduler_->stop();  // first: it ends the streams that workers are waiting on
  http_->stop();
}

void Server::add_routes() {
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "ok"}}); });

  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "hymba"}};
    reply(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });

  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    static std::atomic<int64_t> next_id{0};
    CompletionRequest request;
    std::vector<std::vector<int32_t>> prompts;
    try {
      request = parse_completion_request(req.body);
      for (const std::string& text : request.prompts) {
        std::vector<int32_t> ids;
        try {
          ids = lm_.encode_prompt(text);
        } catch (const Error& e) {
          throw BadRequest("prompt", "a prompt encodes to no tokens");
        }
        for (int64_t c = 0; c < request.n; ++c) prompts.push_back(ids);
      }
      try {
        lm_.require_generation_memory(prompts, request.options.max_new_tokens);
      } catch (const Error& e) {
        throw BadRequest("max_tokens", std::string("too large for the memory available: ") + e.what());
      }
    } catch (const BadRequest& e) {
      reply(res, 400, error_body(e.what(), "invalid_request_error", e.field()));
      return;
    }

    const CompletionMeta meta{"cmpl-" + std::to_string(next_id++), static_cast<int64_t>(std::time(nullptr)),
                              options_.model_name};
    auto job = std::make_shared<Job>(std::move(prompts), request.options);
    scheduler_->submit(job);
    if (!request.stream) {
      job->wait();
      if (const std::string error = job->error(); !error.empty()) {
        reply(res, 500, error_body(error, "server_error"));
        return;
      }
      reply(res, 200, completion_body(meta, job->results(), request.n));
      return;
    }
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, meta](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& data) {
            const std::string event = "data: " + dump(data) + "\n\n";
            return sink.write(event.data(), event.size());
          };
          std::vector<Job::Event> events;
          const bool more = job->next_events(events);
          for (const Job::Event& e : events)
            if (!send(chunk_body(meta, e.sequence, e.text, e.finish ? finish_reason(*e.finish) : nullptr))) {
              job->cancel();  // the client went away
              return false;
            }
          if (!more) {
            if (const std::string error = job->error(); !error.empty()) send(error_body(error, "server_error"));
            static constexpr std::string_view kDone = "data: [DONE]\n\n";
            sink.write(kDone.data(), kDone.size());
            sink.done();
          }
          return true;
        },
        [job](bool) { job->cancel(); });
  });

  // Unknown paths (and known paths with another method) get a JSON 404.
  const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404)
      reply(res, 404, error_body("no such endpoint: " + req.method + " " + req.path, "not_found"));
    else if (res.body.empty())
      reply(res, res.status, error_body("HTTP " + std::to_string(res.status), "invalid_request_error"));
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
      std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
}

}  // namespace hymba::serve
