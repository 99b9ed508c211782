// `hymba serve`: completions over HTTP equal LanguageModel::generate for the
// same seed and options, streamed or not, alone or with other requests in
// flight; bad requests get a 400 naming the field; the command starts,
// prints its URL and stops cleanly on SIGTERM.
#include <gtest/gtest.h>

#include <cstring>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "infer/json_prefix.h"
#include "cli_util.h"
#include "model/held_weights.h"
#include "serve/scheduler.h"
#include "serve/server.h"
#include "serve_test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::as_sent;

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_serve_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    LanguageModel::create("hybrid-official", Scale::kTiny, 11).save(ckpt());
    served_ = std::make_unique<LanguageModel>(LanguageModel::load(ckpt()));
    reference_ = std::make_unique<LanguageModel>(LanguageModel::load(ckpt()));
    serve::ServeOptions options;
    options.max_batch = 8;
    options.model_name = "tiny";
    running_ = std::make_unique<test::RunningServer>(*served_, options);
    server_ = &running_->server();
  }
  static void TearDownTestSuite() {
    running_.reset();
    served_.reset();
    reference_.reset();
    fs::remove_all(dir_);
  }
  static std::string ckpt() { return (dir_ / "ck").string(); }

  static httplib::Client client() { return running_->client(); }
  static json post(const json& body, int expected_status = 200) {
    auto res = client().Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res) << "no response";
    if (!res) return json();
    EXPECT_EQ(res->status, expected_status) << res->body;
    return json::parse(res->body);
  }
  // What LanguageModel::generate gives for the request's options.
  static infer::GenerateOptions options_of(const json& body) {
    infer::GenerateOptions o;
    o.max_new_tokens = body.value("max_tokens", 16);
    o.sampling.temperature = body.value("temperature", 1.0);
    o.sampling.top_p = body.value("top_p", 1.0);
    o.sampling.top_k = body.value("top_k", 0);
    o.sampling.seed = body.value("seed", 0);
    if (body.contains("stop")) o.stop = body["stop"].get<std::vector<std::string>>();
    o.sampling.min_p = body.value("min_p", 0.0);
    o.sampling.presence_penalty = body.value("presence_penalty", 0.0);
    o.sampling.frequency_penalty = body.value("frequency_penalty", 0.0);
    o.sampling.repetition_penalty = body.value("repetition_penalty", 1.0);
    if (body.contains("logit_bias"))
      for (const auto& [id, bias] : body["logit_bias"].items())
        o.sampling.logit_bias.emplace_back(std::stoi(id), bias.get<float>());
    return o;
  }
  static infer::Generation solo(const json& body) {
    return reference_->generate(body["prompt"].get<std::string>(), options_of(body));
  }

  static fs::path dir_;
  static std::unique_ptr<LanguageModel> served_, reference_;
  static std::unique_ptr<test::RunningServer> running_;
  static serve::Server* server_;
};

fs::path Serve::dir_;
std::unique_ptr<LanguageModel> Serve::served_, Serve::reference_;
std::unique_ptr<test::RunningServer> Serve::running_;
serve::Server* Serve::server_ = nullptr;

const char* reason(infer::FinishReason r) { return r == infer::FinishReason::kLength ? "length" : "stop"; }

TEST_F(Serve, HealthAndModels) {
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto models = client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const json m = json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
}

TEST_F(Serve, CompletionEqualsGenerate) {
  const json body = {{"model", "tiny"}, {"prompt", "ROMEO:"}, {"max_tokens", 12}, {"temperature", 0.9},
                     {"top_p", 0.9},    {"top_k", 40},        {"seed", 7}};
  const json r = post(body);
  const infer::Generation g = solo(body);
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["text"], as_sent(g.text));
  EXPECT_EQ(r["choices"][0]["finish_reason"], reason(g.finish));
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["model"], "tiny");
  EXPECT_EQ(r["usage"]["prompt_tokens"], g.prompt.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], g.tokens.size());
  EXPECT_EQ(r["usage"]["total_tokens"], g.prompt.size() + g.tokens.size());
  // Another seed gives another text: the seed reaches the sampler.
  json other = body;
  other["seed"] = 8;
  EXPECT_NE(post(other)["choices"][0]["text"], r["choices"][0]["text"]);
}

TEST_F(Serve, StopStringEndsWithFinishReasonStop) {
  // Greedy, so the first generated character is known; stopping at it leaves no text.
  json body = {{"prompt", "abc"}, {"max_tokens", 8}, {"temperature", 0}};
  const infer::Generation free_run = solo(body);
  ASSERT_FALSE(free_run.text.empty());
  body["stop"] = {free_run.text.substr(0, 1)};
  const json r = post(body);
  EXPECT_EQ(r["choices"][0]["text"], "");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST_F(Serve, ArrayPromptsAndNEqualGenerateBatch) {
  const json body = {{"prompt", {"To be", "or not"}}, {"n", 2}, {"max_tokens", 6}, {"seed", 3}};
  const json r = post(body);
  const std::vector<infer::Generation> want =
      reference_->generate_batch({"To be", "To be", "or not", "or not"}, options_of(body));
  ASSERT_EQ(r["choices"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"], as_sent(want[i].text)) << "choice " << i;
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], want[0].prompt.size() + want[2].prompt.size());
}

// Prompts as token ids (one list, or a list of lists) are used as they are:
// the same completion as the text they encode to.
TEST_F(Serve, TokenIdPromptsEqualTheirText) {
  const json text_body = {{"prompt", {"To be", "or not"}}, {"max_tokens", 6}, {"seed", 3}};
  const json by_text = post(text_body);
  const std::vector<int32_t> a = reference_->encode_prompt("To be"), b = reference_->encode_prompt("or not");
  json ids_body = text_body;
  ids_body["prompt"] = {a, b};
  const json by_ids = post(ids_body);
  ASSERT_EQ(by_ids["choices"].size(), 2u) << by_ids;
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(by_ids["choices"][i]["text"], by_text["choices"][i]["text"]) << i;
  EXPECT_EQ(by_ids["usage"], by_text["usage"]);
  json one = text_body;
  one["prompt"] = a;
  one["echo"] = true;
  const json echoed = post(one);
  EXPECT_EQ(echoed["choices"][0]["text"], reference_->decode(a) + by_text["choices"][0]["text"].get<std::string>());
}

// logit_bias and the penalties reach the sampler: banning the greedy first
// token changes it, forcing a token makes every token that one, and the
// request equals the library's generate with the same options.
TEST_F(Serve, LogitBiasAndPenaltiesReachTheSampler) {
  json body = {{"prompt", "abc"}, {"max_tokens", 4}, {"temperature", 0}};
  const infer::Generation free_run = solo(body);
  ASSERT_FALSE(free_run.tokens.empty());
  const std::string banned = std::to_string(free_run.tokens[0]);
  body["logit_bias"] = {{banned, -100}};
  const json r = post(body);
  const infer::Generation want = solo(body);
  ASSERT_FALSE(want.tokens.empty());
  EXPECT_NE(want.tokens[0], free_run.tokens[0]);
  EXPECT_EQ(r["choices"][0]["text"], as_sent(want.text));
  const int32_t forced = reference_->encode("q").front();
  body["logit_bias"] = {{std::to_string(forced), 100}};
  EXPECT_EQ(solo(body).tokens, std::vector<int32_t>(4, forced));
  body.erase("logit_bias");
  body["frequency_penalty"] = 2.0;
  body["presence_penalty"] = 2.0;
  body["repetition_penalty"] = 1.3;
  body["min_p"] = 0.1;
  EXPECT_EQ(post(body)["choices"][0]["text"], as_sent(solo(body).text));
}

// /v1/embeddings: each input's mean-pooled final hidden states, as
// LanguageModel::embedding gives them; token inputs equal their text; base64
// carries the same float32 bytes; bad fields are 400s naming them.
TEST_F(Serve, EmbeddingsEqualTheLibrarysAndDecodeFromBase64) {
  auto embed = [&](const json& body, int status = 200) {
    auto res = client().Post("/v1/embeddings", body.dump(), "application/json");
    EXPECT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    return json::parse(res->body);
  };
  const json r = embed({{"input", {"To be", "or not"}}, {"model", "tiny"}});
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "tiny");
  ASSERT_EQ(r["data"].size(), 2u);
  const std::vector<int32_t> a = reference_->encode("To be"), b = reference_->encode("or not");
  const std::vector<float> want = reference_->embedding(a);
  const auto got = r["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  EXPECT_EQ(r["data"][1]["index"], 1);
  EXPECT_EQ(r["usage"]["prompt_tokens"], a.size() + b.size());
  EXPECT_EQ(embed({{"input", a}})["data"][0]["embedding"], r["data"][0]["embedding"]);
  // base64: the little-endian float32 bytes of the same vector.
  const std::string text = embed({{"input", "To be"}, {"encoding_format", "base64"}})["data"][0]["embedding"];
  std::string bytes;
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i + 3 < text.size() + 3 && i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      v = (v << 6) | (c == '=' ? (++pad, 0u) : static_cast<uint32_t>(alphabet.find(c)));
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += static_cast<char>((v >> (16 - 8 * k)) & 0xff);
  }
  ASSERT_EQ(bytes.size(), got.size() * sizeof(float));
  std::vector<float> decoded(got.size());
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  EXPECT_EQ(decoded, got);
  EXPECT_EQ(embed({{"input", "a"}, {"dimensions", 3}}, 400)["error"]["param"], "dimensions");
  EXPECT_EQ(embed({{"input", "a"}, {"encoding_format", "int8"}}, 400)["error"]["param"], "encoding_format");
  EXPECT_EQ(embed({{"model", "tiny"}}, 400)["error"]["param"], "input");
  EXPECT_EQ(embed({{"input", {99999999}}}, 400)["error"]["param"], "input");
  EXPECT_EQ(embed({{"input", "a"}, {"model", "gpt-4"}}, 404)["error"]["code"], "model_not_found");
}

TEST_F(Serve, StreamedChunksConcatenateToTheCompletion) {
  json body = {{"prompt", {"Once upon", "a time"}}, {"max_tokens", 20}, {"seed", 5}};
  const json whole = post(body);
  body["stream"] = true;
  auto res = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  std::vector<std::string> texts(2), reasons(2);
  std::vector<int> chunks(2, 0);
  bool done = false;
  size_t at = 0;
  const std::string& sse = res->body;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << "an event without its blank line";
    const std::string event = sse.substr(at, end - at);
    at = end + 2;
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    ASSERT_FALSE(done) << "an event after [DONE]";
    if (event == "data: [DONE]") {
      done = true;
      continue;
    }
    const json c = json::parse(event.substr(6));
    const size_t i = c["choices"][0]["index"];
    ASSERT_LT(i, 2u);
    ASSERT_TRUE(reasons[i].empty()) << "text after the finish reason";
    texts[i] += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) reasons[i] = c["choices"][0]["finish_reason"];
    ++chunks[i];
  }
  EXPECT_TRUE(done) << "the stream must end with data: [DONE]";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(texts[i], whole["choices"][i]["text"]) << "choice " << i;
    EXPECT_EQ(reasons[i], whole["choices"][i]["finish_reason"]) << "choice " << i;
    EXPECT_GT(chunks[i], 2) << "text should arrive in pieces";
  }
}

// stream_options.include_usage: every chunk carries "usage": null and a last
// chunk without choices carries the usage the plain request reports.
TEST_F(Serve, StreamedUsageComesLastWhenAskedFor) {
  json body = {{"prompt", {"Once upon", "a time"}}, {"n", 2}, {"max_tokens", 6}, {"seed", 5}};
  const json whole = post(body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto res = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  std::vector<json> chunks;
  for (size_t at = 0; at < res->body.size();) {
    const size_t end = res->body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos);
    const std::string event = res->body.substr(at, end - at);
    at = end + 2;
    if (event != "data: [DONE]") chunks.push_back(json::parse(event.substr(6)));
  }
  ASSERT_GE(chunks.size(), 2u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    EXPECT_TRUE(chunks[i].contains("usage") && chunks[i]["usage"].is_null()) << chunks[i];
  EXPECT_TRUE(chunks.back()["choices"].empty()) << chunks.back();
  EXPECT_EQ(chunks.back()["usage"], whole["usage"]);
  body.erase("stream");
  const json refused = post(body, 400);
  EXPECT_EQ(refused["error"]["param"], "stream_options");
}

TEST_F(Serve, ConcurrentRequestsEachEqualTheirSoloResult) {
  const std::vector<std::string> prompts = {"First", "Second prompt", "3", "A somewhat longer fourth prompt", "Five",
                                            "sixth"};
  std::vector<json> bodies, got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    bodies.push_back({{"prompt", prompts[i]}, {"max_tokens", 10 + 3 * static_cast<int>(i)},
                      {"seed", 100 + static_cast<int>(i)}, {"temperature", 0.8}, {"stream", i % 2 == 1}});
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      auto res = client().Post("/v1/completions", bodies[i].dump(), "application/json");
      if (!res || res->status != 200) return;
      if (!bodies[i]["stream"].get<bool>()) {
        got[i] = json::parse(res->body)["choices"][0]["text"];
        return;
      }
      std::string text;  // the streamed pieces, in order
      for (size_t at = res->body.find("data: {"); at != std::string::npos; at = res->body.find("data: {", at + 1))
        text += json::parse(res->body.substr(at + 6, res->body.find("\n\n", at) - at - 6))["choices"][0]["text"]
                    .get<std::string>();
      got[i] = text;
    });
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], as_sent(solo(bodies[i]).text)) << "request " << i;
}

TEST_F(Serve, SequencesOfARequestShareDecodeSteps) {
  const int64_t steps_before = server_->scheduler().decode_steps();
  post({{"prompt", "shared"}, {"n", 4}, {"max_tokens", 8}, {"seed", 1}});
  EXPECT_GT(server_->scheduler().decode_steps(), steps_before);
  EXPECT_GE(server_->scheduler().widest_step(), 4) << "the four choices should decode together";
}

TEST_F(Serve, ClosingAStreamCancelsItsSequences) {
  // Greedy, and this prompt's greedy continuation shows no EOS (a random
  // model samples EOS now and then): with far more tokens than the test
  // waits for, only a cancel ends it in time.
  json body = {{"prompt", "endless"}, {"max_tokens", 1000}, {"temperature", 0}};
  ASSERT_EQ(solo(body).finish, infer::FinishReason::kLength) << "pick another prompt";
  body["max_tokens"] = 100000;
  body["stream"] = true;
  std::string received;
  httplib::Client c = client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    received.append(data, size);
    return received.find("\n\n") == std::string::npos;  // hang up after the first event
  };
  c.send(req);
  EXPECT_EQ(received.rfind("data: {", 0), 0u) << received;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server_->scheduler().running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->scheduler().running(), 0) << "the sequence kept running after its client left";
  EXPECT_EQ(client().Get("/health")->status, 200);
}

// A client that gives up on a non-streamed request (a timeout; an SDK then
// retries) closes its connection: the server drops the request's sequences.
TEST_F(Serve, ClosingANonStreamedRequestCancelsIt) {
  const json body = {{"prompt", "endless"}, {"max_tokens", 100000}, {"temperature", 0}};
  httplib::Client c = client();
  c.set_read_timeout(1);
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_FALSE(res) << "the request should still be running after 1 s";
  c.stop();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server_->scheduler().running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->scheduler().running(), 0) << "the sequence kept running after its client left";
  EXPECT_EQ(client().Get("/health")->status, 200);
}

TEST_F(Serve, BadRequestsGet400NamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "body"},
      {"[1, 2]", "body"},
      {R"({"max_tokens": 4})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": ["a", 3]})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": [1, 2.5]})", "prompt"},
      {R"({"prompt": [[1, 2], []]})", "prompt"},
      {R"({"prompt": [[1], "a"]})", "prompt"},
      {R"({"prompt": [99999999]})", "prompt"},
      {R"({"prompt": "a", "logit_bias": [1]})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": {"x": 1}})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": {"1": 101}})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": {"99999999": 1}})", "logit_bias"},
      {R"({"prompt": "a", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "a", "frequency_penalty": -3})", "frequency_penalty"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "a", "min_p": 1.5})", "min_p"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -3})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": "8"})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 99999999999})", "max_tokens"},
      {R"({"prompt": "a", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "top_p": 0})", "top_p"},
      {R"({"prompt": "a", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "a", "top_k": -1})", "top_k"},
      {R"({"prompt": "a", "seed": -1})", "seed"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "stop": [""]})", "stop"},
      {R"({"prompt": "a", "stop": 7})", "stop"},
      {R"({"prompt": "a", "model": 1})", "model"},
      {R"({"prompt": "a", "logprobs": 6})", "logprobs"},
      {R"({"prompt": "a", "logprobs": -1})", "logprobs"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"prompt": "a", "logprobs": 2, "stream": true})", "logprobs"},
      {R"({"prompt": "a", "echo": true, "stream": true})", "echo"},
      {R"({"prompt": "a", "echo": "yes"})", "echo"},
      {R"({"prompt": "a", "best_of": 2})", "best_of"},
      {R"({"prompt": "a", "suffix": "z"})", "suffix"},
  };
  for (const auto& [body, field] : cases) {
    auto res = client().Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res) << body;
    EXPECT_EQ(res->status, 400) << body;
    const json e = json::parse(res->body)["error"];
    EXPECT_EQ(e["param"], field) << body;
    const std::string message = e["message"];
    EXPECT_EQ(message.rfind(field + ": ", 0), 0u) << body << " -> " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_EQ(client().Get("/health")->status, 200) << "the server survives bad requests";
}

// The logprobs object holds the library's own token log-probabilities of
// the generated tokens, and the k likeliest alternatives at each step.
TEST_F(Serve, LogprobsEqualTheLibrarysTokenLogprobs) {
  const json body = {{"prompt", "ROMEO:"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3}};
  const json r = post(body);
  const infer::Generation g = solo(body);
  ASSERT_EQ(r["choices"].size(), 1u);
  const json lp = r["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << r;
  std::vector<int32_t> ids = g.prompt;
  ids.insert(ids.end(), g.tokens.begin(), g.tokens.end());
  const std::vector<double> want = reference_->token_logprobs(ids);
  ASSERT_EQ(lp["tokens"].size(), g.tokens.size());
  ASSERT_EQ(lp["token_logprobs"].size(), g.tokens.size());
  ASSERT_EQ(lp["top_logprobs"].size(), g.tokens.size());
  ASSERT_EQ(lp["text_offset"].size(), g.tokens.size());
  size_t prompt_bytes = 0;
  for (int32_t id : g.prompt) prompt_bytes += reference_->tokenizer().decode({id}).size();
  EXPECT_EQ(lp["text_offset"][0], prompt_bytes) << "offsets count from the prompt's start";
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    const double got = lp["token_logprobs"][i];
    EXPECT_NEAR(got, want[g.prompt.size() - 1 + i], 1e-9) << "token " << i;
    EXPECT_LT(got, 0.0);
    const json& top = lp["top_logprobs"][i];
    ASSERT_TRUE(top.is_object());
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);
    double best = -1e300;
    for (const auto& item : top.items()) best = std::max(best, item.value().get<double>());
    EXPECT_NEAR(best, got, 1e-9) << "greedy: the chosen token is the likeliest, token " << i;
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i].get<size_t>(), lp["text_offset"][i - 1].get<size_t>());
    }
  }
}

// As lm-evaluation-harness scores a text: echo with max_tokens 0 returns the
// prompt's tokens and log-probabilities, the first null; their mean is the
// loss `hymba eval` (LanguageModel::score) reports for the same text.
TEST_F(Serve, EchoWithMaxTokensZeroScoresThePromptAsEval) {
  const std::string text = "To be, or not to be, that is the question";
  const json r = post({{"prompt", text}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 1}});
  ASSERT_EQ(r["choices"].size(), 1u) << r;
  EXPECT_EQ(r["choices"][0]["text"], text);
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  const json lp = r["choices"][0]["logprobs"];
  const std::vector<int32_t> prompt = reference_->encode_prompt(text);
  ASSERT_EQ(lp["tokens"].size(), prompt.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);
  const EvalResult eval = reference_->score(text);
  const size_t scored = reference_->tokenizer().encode(text).size() - 1;  // eval's predicted tokens (no bos)
  ASSERT_LT(scored, lp["token_logprobs"].size());
  double sum = 0.0;
  for (size_t i = lp["token_logprobs"].size() - scored; i < lp["token_logprobs"].size(); ++i)
    sum -= lp["token_logprobs"][i].get<double>();
  EXPECT_NEAR(sum / static_cast<double>(scored), eval.loss, 1e-4 * std::max(1.0, eval.loss));

  // Echo with generation: the prompt's tokens, then the completion's.
  const json both = post({{"prompt", text}, {"echo", true}, {"max_tokens", 3}, {"logprobs", 0}, {"seed", 4}});
  const std::string got = both["choices"][0]["text"];
  EXPECT_EQ(got.rfind(text, 0), 0u) << got;
  EXPECT_EQ(both["choices"][0]["logprobs"]["tokens"].size(),
            prompt.size() + both["usage"]["completion_tokens"].get<size_t>());
}

TEST_F(Serve, MaxTokensBeyondTheMemoryCheckIs400) {
  ::setenv("HYMBA_MAX_MEMORY", "64M", 1);
  auto res = client().Post("/v1/completions", R"({"prompt": "a", "max_tokens": 1000000})", "application/json");
  ::unsetenv("HYMBA_MAX_MEMORY");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "max_tokens") << res->body;
}

// response_format json_object on both routes: every choice that stops is a
// JSON object, every choice cut by max_tokens a prefix of one. '"' and '}'
// are favoured so that a random model closes its objects within the limit.
TEST_F(Serve, JsonModeOutputsParseAsObjects) {
  const json favour = {{"34", 4}, {"125", 4}};
  int closed = 0;
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = {{"n", 6}, {"max_tokens", 120}, {"seed", 3}, {"logit_bias", favour},
                 {"response_format", {{"type", "json_object"}}}};
    if (std::string(path) == "/v1/completions")
      body["prompt"] = "Answer in JSON:";
    else
      body["messages"] = json::array({{{"role", "user"}, {"content", "Answer in JSON"}}});
    auto res = client().Post(path, body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json reply = json::parse(res->body);
    for (const json& choice : reply["choices"]) {
      const std::string text = choice.contains("text") ? choice["text"] : choice["message"]["content"];
      infer::JsonPrefix prefix;
      EXPECT_TRUE(prefix.feed(text)) << path << ": " << text;
      if (choice["finish_reason"] == "stop") {
        ++closed;
        ASSERT_TRUE(json::accept(text)) << path << ": " << text;
        EXPECT_TRUE(json::parse(text).is_object()) << text;
      }
    }
  }
  EXPECT_GT(closed, 0) << "no choice closed its object";
  const json schema = {{"prompt", "x"}, {"response_format", {{"type", "json_schema"}}}};
  auto res = client().Post("/v1/completions", schema.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "response_format");
}

TEST_F(Serve, UnknownPathsAre404) {
  for (const char* path : {"/", "/v1/embedding", "/v1/completions/x", "/v1/model"}) {
    auto res = client().Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << path;
    EXPECT_NE(json::parse(res->body)["error"]["message"].get<std::string>().find(path), std::string::npos);
  }
}

// A checkpoint from `hymba quantize` serves in its own blocks (issue 19):
// each completion equals the library's generate on the same checkpoint, with
// two sequences of a request sharing decode steps.
TEST_F(Serve, AQuantizedCheckpointServesWhatTheLibraryGenerates) {
  for (const auto& [name, format] : {std::pair{"q8", BlockFormat::kQ8}, std::pair{"q4", BlockFormat::kQ4},
                                     std::pair{"bf16", BlockFormat::kBF16}}) {
    SCOPED_TRACE(name);
    const std::string dir = (dir_ / name).string();
    const test::CliResult q = test::run_cli("quantize --ckpt " + ckpt() + " --weights " + name + " --out " + dir);
    ASSERT_EQ(q.exit_code, 0) << q.output;
    LanguageModel served = LanguageModel::load(dir);
    LanguageModel reference = LanguageModel::load(dir);
    ASSERT_EQ(served.model().held_format(), format);
    serve::ServeOptions options;
    options.max_batch = 4;
    test::RunningServer running(served, options);
    const json body = {{"prompt", std::vector<std::string>{"ROMEO:", "To be"}}, {"max_tokens", 10},
                       {"temperature", 0.8}, {"seed", 5}};
    auto res = running.client().Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json r = json::parse(res->body);
    ASSERT_EQ(r["choices"].size(), 2u);
    const std::vector<infer::Generation> g = reference.generate_batch({"ROMEO:", "To be"}, options_of(body));
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(r["choices"][i]["text"], as_sent(g[i].text)) << i;
  }
}

TEST_F(Serve, CliRefusesBadFlagsInOneLine) {
  for (const std::string& args : {std::string("serve"), "serve --ckpt " + (dir_ / "nope").string(),
                                  "serve --ckpt " + ckpt() + " --port 70000",
                                  "serve --ckpt " + ckpt() + " --max-batch 0"}) {
    const test::CliResult r = test::run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(test::count_lines(r.output), 1) << args << "\n" << r.output;
  }
  const test::CliResult r = test::run_cli("serve --ckpt " + (dir_ / "nope").string());
  EXPECT_NE(r.output.find("--ckpt"), std::string::npos) << r.output;
}

// The command as a user runs it on `ck`: port 0, the URL on its first line,
// a completion, SIGTERM.
void serve_one_completion(const std::string& ck) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(HYMBA_CLI_PATH, HYMBA_CLI_PATH, "serve", "--ckpt", ck.c_str(), "--port", "0", "--threads", "1",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  FILE* in = ::fdopen(out[0], "r");
  char line[512] = {};
  const bool got_line = std::fgets(line, sizeof(line), in) != nullptr;  // ends when the child exits, at worst
  std::string first = got_line ? line : "";
  const size_t at = first.find("http://127.0.0.1:");
  EXPECT_NE(at, std::string::npos) << first;
  if (at != std::string::npos) {
    const int port = std::atoi(first.c_str() + at + 17);
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    auto res = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 3, "seed": 2})", "application/json");
    EXPECT_TRUE(res);  // (no ASSERT: the server must still be stopped below)
    if (res) {
      EXPECT_EQ(res->status, 200) << res->body;
    }
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fclose(in);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST_F(Serve, CliPrintsItsUrlAndStopsOnSigterm) { serve_one_completion(ckpt()); }

// A GGUF file serves as a directory does (a Qwen2 file: llama.cpp's qwen2 arch).
TEST_F(Serve, CliServesAGgufFile) { serve_one_completion(std::string(HYMBA_FIXTURES_DIR) + "/gguf/gguf_py_qwen2.gguf"); }

}  // namespace
}  // namespace hymba
