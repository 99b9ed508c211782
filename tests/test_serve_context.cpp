// `hymba serve` and a sequence's size: prompt + max_tokens is bounded by the
// server's context (a request over it is a 400 naming the field; a default
// max_tokens shrinks to fit), a request for a million tokens holds memory
// for the tokens it has generated, not for the million, and a request whose
// client goes away is logged as cancelled.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api/hymba.h"
#include "core/system_memory.h"
#include "serve/scheduler.h"
#include "serve/server.h"
#include "serve_test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ServeContext : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_serve_context_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    LanguageModel::create("hybrid-official", Scale::kTiny, 7).save((dir_ / "ck").string());
    served_ = std::make_unique<LanguageModel>(LanguageModel::load((dir_ / "ck").string()));
  }
  static void TearDownTestSuite() {
    served_.reset();
    fs::remove_all(dir_);
  }
  static test::RunningServer serving(int64_t context, bool log = false) {
    serve::ServeOptions o;
    o.model_name = "tiny";
    o.context = context;
    o.log = log;
    return test::RunningServer(*served_, o);
  }
  static fs::path dir_;
  static std::unique_ptr<LanguageModel> served_;
};
fs::path ServeContext::dir_;
std::unique_ptr<LanguageModel> ServeContext::served_;

TEST_F(ServeContext, TheContextIsTheModelsUnlessAskedAndLearnedPositionsBoundIt) {
  ModelConfig rope = served_->config();
  rope.max_position_embeddings = 0;
  EXPECT_EQ(serve::resolve_context(rope, 0), serve::kDefaultContext);
  EXPECT_EQ(serve::resolve_context(rope, 100000), 100000);
  ModelConfig learned = rope;
  learned.position_embedding = PositionEmbedding::kLearned;
  learned.max_position_embeddings = 256;
  learned.num_memory_tokens = 16;
  EXPECT_EQ(serve::resolve_context(learned, 0), 240);
  EXPECT_EQ(serve::resolve_context(learned, 100), 100);
  EXPECT_THROW(serve::resolve_context(learned, 241), Error);
  EXPECT_THROW(serve::resolve_context(rope, -1), Error);
}

TEST_F(ServeContext, PromptPlusMaxTokensBeyondTheContextIs400NamingTheField) {
  test::RunningServer s = serving(24);
  EXPECT_EQ(s.server().options().context, 24);
  auto res = s.client().Post("/v1/completions", R"({"prompt": "hello", "max_tokens": 100})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const json e = json::parse(res->body)["error"];
  EXPECT_EQ(e["param"], "max_tokens");
  EXPECT_NE(e["message"].get<std::string>().find("context is 24 tokens"), std::string::npos) << e;

  res = s.client().Post("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 100})",
                        "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "max_completion_tokens");

  res = s.client().Post("/v1/completions", json{{"prompt", std::string(30, 'a')}, {"max_tokens", 1}}.dump(),
                        "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "prompt") << res->body;
}

// Without max_tokens, completions take 16 and chat 256: what the context
// leaves is used instead, and the choice ends with "length" there.
TEST_F(ServeContext, ADefaultMaxTokensShrinksToTheContext) {
  test::RunningServer s = serving(20);
  const json body = {{"prompt", std::string(12, 'a')}, {"temperature", 0}};
  auto res = s.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json reply = json::parse(res->body);
  const json usage = reply["usage"];
  EXPECT_EQ(usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>(), 20) << reply;
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
}

// The memory refusal names the request's fields, not the command's flags.
TEST_F(ServeContext, AMemoryRefusalNamesTheRequestsFields) {
  test::RunningServer s = serving(int64_t{1} << 20);
  ::setenv("HYMBA_MAX_MEMORY", "64M", 1);
  auto res = s.client().Post("/v1/completions", R"({"prompt": "a", "max_tokens": 1000000})", "application/json");
  ::unsetenv("HYMBA_MAX_MEMORY");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const std::string message = json::parse(res->body)["error"]["message"];
  EXPECT_NE(message.find("lower max_tokens or n"), std::string::npos) << message;
  EXPECT_EQ(message.find("--"), std::string::npos) << message;
}

// A streamed request for a million tokens: while it runs, the process holds
// the pages of the tokens generated (a few MB), not the million's 1.1 GB the
// cache would take whole; hanging up ends it and the log says so.
TEST_F(ServeContext, AMillionTokenRequestGrowsWithItsTextAndIsLoggedCancelled) {
  test::RunningServer s = serving(int64_t{1} << 20, /*log=*/true);
  const int64_t before = resident_bytes();
  std::atomic<bool> hang_up{false};
  int64_t most = 0;
  testing::internal::CaptureStderr();
  std::thread watcher([&] {
    for (int i = 0; i < 100 && s.server().scheduler().running() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (int i = 0; i < 50; ++i) {
      most = std::max(most, resident_bytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    hang_up = true;
  });
  test::stream_until_hang_up(s.client(), hang_up, 1000000);
  watcher.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.server().scheduler().running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.server().scheduler().running(), 0) << "the sequence kept running after its client left";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the log line follows the stream's end
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_LT(most - before, int64_t{200} << 20) << "resident memory grew by " << (most - before) / (1 << 20) << " MiB";
  EXPECT_NE(log.find("POST /v1/completions 499 cancelled"), std::string::npos) << log;
}

TEST_F(ServeContext, AnAbandonedNonStreamedRequestIsLoggedCancelled) {
  test::RunningServer s = serving(int64_t{1} << 20, /*log=*/true);
  testing::internal::CaptureStderr();
  httplib::Client c = s.client();
  c.set_read_timeout(1);
  auto res =
      c.Post("/v1/completions", R"({"prompt": "endless", "max_tokens": 100000, "temperature": 0})", "application/json");
  EXPECT_FALSE(res) << "the request should still be running after 1 s";
  c.stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.server().scheduler().running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("POST /v1/completions 499 cancelled"), std::string::npos) << log;
}

}  // namespace
}  // namespace hymba
