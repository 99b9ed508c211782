// Pieces the server tests share: a Server listening on a free loopback port
// in a thread of its own, and a stream that runs until the test hangs up.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "serve/server.h"

namespace hymba::test {

// Serves lm on 127.0.0.1 (port 0: any free port) until destroyed, then stops
// and joins the listener, so no test leaves a server behind.
class RunningServer {
 public:
  RunningServer(LanguageModel& lm, serve::ServeOptions options) : server_(lm, at_any_port(std::move(options))) {
    port_ = server_.bind();
    listener_ = std::thread([this] { server_.listen(); });
  }
  ~RunningServer() {
    server_.stop();
    listener_.join();
  }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  serve::Server& server() { return server_; }
  int port() const { return port_; }
  // Bounded timeouts: a hung server fails the test instead of hanging it.
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(10);
    c.set_read_timeout(60);
    return c;
  }

 private:
  // A context of 1M tokens unless the test sets one: the endless streams
  // below ask for 100,000.
  static serve::ServeOptions at_any_port(serve::ServeOptions o) {
    o.port = 0;
    if (o.context == 0) o.context = int64_t{1} << 20;
    return o;
  }
  serve::Server server_;
  int port_ = 0;
  std::thread listener_;
};

// A streamed completion that would run for max_tokens tokens: it holds its
// decode slot (and its HTTP worker) until hang_up is set.
inline void stream_until_hang_up(httplib::Client client, const std::atomic<bool>& hang_up,
                                 int64_t max_tokens = 100000) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt": "endless", "temperature": 0, "stream": true, "max_tokens": )" + std::to_string(max_tokens) +
             "}";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&hang_up](const char*, size_t, uint64_t, uint64_t) { return !hang_up.load(); };
  client.send(req);
}

// The server writes bytes that are not UTF-8 as U+FFFD (a random byte-level
// model samples any byte): a generated text the way it travels.
inline std::string as_sent(const std::string& text) {
  const nlohmann::json j = text;
  return nlohmann::json::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)).get<std::string>();
}

}  // namespace hymba::test
