// Ollama's API on `hymba serve`: /api/generate and /api/chat equal the
// library's generation for the same options, streamed as NDJSON or not;
// /api/embed gives normalized pooled states; tags, show, ps and version
// answer in Ollama's shapes; errors are {"error": ...} with 400 or 404.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api/hymba.h"
#include "infer/json_prefix.h"
#include "serve/ollama.h"
#include "serve/server.h"
#include "serve_test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::as_sent;

class ServeOllama : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_serve_ollama_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    LanguageModel::create("hybrid-official", Scale::kTiny, 13).save((dir_ / "ck").string());
    served_ = std::make_unique<LanguageModel>(LanguageModel::load((dir_ / "ck").string()));
    reference_ = std::make_unique<LanguageModel>(LanguageModel::load((dir_ / "ck").string()));
    serve::ServeOptions o;
    o.model_name = "tiny";
    running_ = std::make_unique<test::RunningServer>(*served_, o);
  }
  static void TearDownTestSuite() {
    running_.reset();
    served_.reset();
    reference_.reset();
    fs::remove_all(dir_);
  }
  static httplib::Result post(const std::string& path, const json& body) {
    return running_->client().Post(path, body.dump(), "application/json");
  }
  // The NDJSON lines of a streamed reply.
  static std::vector<json> lines(const std::string& body) {
    std::vector<json> out;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(json::parse(line));
    return out;
  }
  static infer::GenerateOptions greedy(int64_t n) {
    infer::GenerateOptions o;
    o.max_new_tokens = n;
    o.sampling.temperature = 0;
    o.sampling.top_k = 40;
    o.sampling.top_p = 0.9;
    o.sampling.seed = 1;
    return o;
  }
  static fs::path dir_;
  static std::unique_ptr<LanguageModel> served_, reference_;
  static std::unique_ptr<test::RunningServer> running_;
};
fs::path ServeOllama::dir_;
std::unique_ptr<LanguageModel> ServeOllama::served_, ServeOllama::reference_;
std::unique_ptr<test::RunningServer> ServeOllama::running_;

TEST_F(ServeOllama, GenerateEqualsTheLibraryStreamedOrNot) {
  const json options = {{"temperature", 0}, {"num_predict", 24}, {"seed", 1}};
  const infer::Generation solo = reference_->generate("ROMEO:", greedy(24));
  auto res =
      post("/api/generate", {{"model", "tiny:latest"}, {"prompt", "ROMEO:"}, {"stream", false}, {"options", options}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json whole = json::parse(res->body);
  EXPECT_EQ(whole["response"], as_sent(solo.text));
  EXPECT_EQ(whole["done"], true);
  EXPECT_EQ(whole["model"], "tiny:latest");
  EXPECT_EQ(whole["eval_count"], static_cast<int64_t>(solo.tokens.size()));
  EXPECT_EQ(whole["prompt_eval_count"], static_cast<int64_t>(solo.prompt.size()));
  EXPECT_EQ(whole["done_reason"], solo.finish == infer::FinishReason::kLength ? "length" : "stop");
  EXPECT_GT(whole["total_duration"].get<int64_t>(), 0);
  std::vector<int32_t> context = solo.prompt;
  context.insert(context.end(), solo.tokens.begin(), solo.tokens.end());
  EXPECT_EQ(whole["context"].get<std::vector<int32_t>>(), context);

  res = post("/api/generate", {{"model", "tiny"}, {"prompt", "ROMEO:"}, {"options", options}});  // streams by default
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/x-ndjson");
  const std::vector<json> parts = lines(res->body);
  ASSERT_GE(parts.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    EXPECT_EQ(parts[i]["done"], false);
    text += parts[i]["response"].get<std::string>();
  }
  EXPECT_EQ(text, as_sent(solo.text));
  EXPECT_EQ(parts.back()["done"], true);
  EXPECT_EQ(parts.back()["context"], whole["context"]);
}

TEST_F(ServeOllama, ChatEqualsTheOpenAiRoute) {
  const json messages = json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto openai = post("/v1/chat/completions",
                     {{"messages", messages}, {"max_tokens", 16}, {"temperature", 0}, {"top_k", 40}, {"top_p", 0.9}});
  ASSERT_TRUE(openai);
  ASSERT_EQ(openai->status, 200) << openai->body;
  const std::string expected = json::parse(openai->body)["choices"][0]["message"]["content"];
  auto res = post("/api/chat",
                  {{"messages", messages}, {"stream", false}, {"options", {{"temperature", 0}, {"num_predict", 16}}}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json whole = json::parse(res->body);
  EXPECT_EQ(whole["message"]["role"], "assistant");
  EXPECT_EQ(whole["message"]["content"], expected);
  res = post("/api/chat", {{"messages", messages}, {"options", {{"temperature", 0}, {"num_predict", 16}}}});
  ASSERT_TRUE(res);
  std::string text;
  const std::vector<json> parts = lines(res->body);
  for (const json& p : parts) text += p["message"]["content"].get<std::string>();
  EXPECT_EQ(text, expected);
  EXPECT_EQ(parts.back()["done"], true);
}

TEST_F(ServeOllama, FormatJsonIsJsonMode) {
  auto res =
      post("/api/generate",
           {{"prompt", "{"}, {"format", "json"}, {"stream", false}, {"options", {{"num_predict", 100}, {"seed", 2}}}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json whole = json::parse(res->body);
  infer::JsonPrefix prefix;
  EXPECT_TRUE(prefix.feed(whole["response"].get<std::string>())) << whole["response"];
  if (whole["done_reason"] == "stop") {
    EXPECT_TRUE(json::accept(whole["response"].get<std::string>()));
  }
  res = post("/api/generate", {{"prompt", "x"}, {"format", {{"type", "object"}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

TEST_F(ServeOllama, EmbedIsNormalizedAndLegacyEmbeddingsRaw) {
  auto res = post("/api/embed", {{"model", "tiny"}, {"input", {"ROMEO:", "JULIET:"}}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  ASSERT_EQ(body["embeddings"].size(), 2u);
  std::vector<float> raw = reference_->embedding(reference_->encode("ROMEO:"));
  double norm = 0;
  for (float x : raw) norm += static_cast<double>(x) * x;
  const std::vector<float> got = body["embeddings"][0].get<std::vector<float>>();
  ASSERT_EQ(got.size(), raw.size());
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(got[i], raw[i] / std::sqrt(norm), 1e-6);
  EXPECT_EQ(body["prompt_eval_count"],
            static_cast<int64_t>(reference_->encode("ROMEO:").size() + reference_->encode("JULIET:").size()));
  res = post("/api/embeddings", {{"model", "tiny"}, {"prompt", "ROMEO:"}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["embedding"].get<std::vector<float>>(), raw);
}

TEST_F(ServeOllama, TagsShowPsAndVersion) {
  auto tags = running_->client().Get("/api/tags");
  ASSERT_TRUE(tags);
  const json models = json::parse(tags->body)["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["name"], "tiny:latest");
  EXPECT_EQ(models[0]["details"]["family"], "hymba");
  auto show = post("/api/show", {{"model", "tiny"}});
  ASSERT_TRUE(show);
  ASSERT_EQ(show->status, 200) << show->body;
  const json info = json::parse(show->body)["model_info"];
  EXPECT_EQ(info["general.parameter_count"], served_->num_params());
  EXPECT_EQ(info["hymba.embedding_length"], served_->config().hidden_size);
  EXPECT_EQ(post("/api/show", {{"name", "other"}})->status, 404);
  EXPECT_EQ(json::parse(running_->client().Get("/api/ps")->body)["models"][0]["name"], "tiny:latest");
  EXPECT_EQ(json::parse(running_->client().Get("/api/version")->body)["version"], HYMBA_VERSION);
}

TEST_F(ServeOllama, ErrorsAreOllamaShapedNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", "x"}, {"options", {{"temperature", -1}}}}, "options.temperature"},
      {{{"prompt", "x"}, {"options", {{"num_predict", 0}}}}, "options.num_predict"},
      {{{"prompt", "x"}, {"options", {{"stop", {1}}}}}, "options.stop"},
      {{{"prompt", "x"}, {"context", {-1}}}, "context"},
      {{{"prompt", "x"}, {"images", {"aGk="}}}, "images"},
      {{{"prompt", "x"}, {"options", {{"num_predict", 1 << 22}}}}, "options.num_predict"},
  };
  for (const auto& [body, field] : cases) {
    auto res = post("/api/generate", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body;
    const std::string message = json::parse(res->body)["error"];
    EXPECT_EQ(message.rfind(field, 0), 0u) << message;
  }
  auto res = post("/api/chat", {{"model", "llama3"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body).contains("error"));
  res = post("/api/chat", {{"messages", {{{"role", "user"}}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  res = post("/api/generate", {{"model", "tiny"}});  // an empty prompt loads the model
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["done_reason"], "load");
  EXPECT_EQ(running_->client().Get("/api/generate")->status, 405);
}

TEST_F(ServeOllama, AContextContinuesTheEarlierReply) {
  const json options = {{"temperature", 0}, {"num_predict", 8}};
  auto first = post("/api/generate", {{"prompt", "ROMEO:"}, {"stream", false}, {"options", options}});
  ASSERT_TRUE(first);
  const json one = json::parse(first->body);
  auto second =
      post("/api/generate", {{"prompt", " and"}, {"context", one["context"]}, {"stream", false}, {"options", options}});
  ASSERT_TRUE(second);
  ASSERT_EQ(second->status, 200) << second->body;
  std::vector<int32_t> ids = one["context"].get<std::vector<int32_t>>();
  const std::vector<int32_t> more = reference_->encode(" and");
  ids.insert(ids.end(), more.begin(), more.end());
  EXPECT_EQ(json::parse(second->body)["prompt_eval_count"], static_cast<int64_t>(ids.size()));
}

}  // namespace
}  // namespace hymba
