// POST /v1/chat/completions: messages go through the checkpoint's
// chat_template (tokenizer_config.json) and then the same scheduler as
// /v1/completions, so a chat reply equals the completion of the rendered
// prompt; streamed chunks (role first, then content, then finish_reason,
// then an optional usage chunk, then [DONE]) add up to the non-streamed
// reply; bad messages get a 400 naming the field.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "chat/chat_template.h"
#include "serve/server.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ChatML, refusing "tool" messages the way published templates refuse what
// they cannot format.
constexpr const char* kTemplate =
    "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('tool messages are not supported') }}"
    "{% endif %}{{ '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

class ServeChat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_serve_chat_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    LanguageModel::create("hybrid-official", Scale::kTiny, 11).save(ckpt());
    std::ofstream(fs::path(ckpt()) / "tokenizer_config.json") << json({{"chat_template", kTemplate}}).dump();
    served_ = std::make_unique<LanguageModel>(LanguageModel::load(ckpt()));
    serve::ServeOptions options;
    options.port = 0;
    options.model_name = "tiny";
    server_ = std::make_unique<serve::Server>(*served_, options);
    port_ = server_->bind();
    listener_ = std::thread([] { server_->listen(); });
  }
  static void TearDownTestSuite() {
    server_->stop();
    listener_.join();
    server_.reset();
    served_.reset();
    fs::remove_all(dir_);
  }
  static std::string ckpt() { return (dir_ / "ck").string(); }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(10);
    c.set_read_timeout(60);
    return c;
  }
  static json post(const std::string& path, const json& body, int expected_status = 200) {
    auto res = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << "no response";
    if (!res) return json();
    EXPECT_EQ(res->status, expected_status) << res->body;
    return json::parse(res->body);
  }
  // The data of each server-sent event, up to [DONE] (which must end it).
  static std::vector<json> stream(const json& body) {
    auto res = client().Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    std::vector<json> events;
    bool done = false;
    size_t at = 0;
    while (at < res->body.size()) {
      const size_t end = res->body.find("\n\n", at);
      EXPECT_NE(end, std::string::npos);
      if (end == std::string::npos) break;
      const std::string event = res->body.substr(at, end - at);
      at = end + 2;
      EXPECT_FALSE(done) << "an event after [DONE]: " << event;
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      if (event == "data: [DONE]") {
        done = true;
        continue;
      }
      events.push_back(json::parse(event.substr(6)));
    }
    EXPECT_TRUE(done) << "the stream must end with data: [DONE]";
    return events;
  }

  static fs::path dir_;
  static std::unique_ptr<LanguageModel> served_;
  static std::unique_ptr<serve::Server> server_;
  static std::thread listener_;
  static int port_;
};

fs::path ServeChat::dir_;
std::unique_ptr<LanguageModel> ServeChat::served_;
std::unique_ptr<serve::Server> ServeChat::server_;
std::thread ServeChat::listener_;
int ServeChat::port_ = 0;

const json kMessages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                    {{"role", "user"}, {"content", " Hello there \n"}}});

TEST_F(ServeChat, ReplyEqualsTheCompletionOfTheRenderedPrompt) {
  const std::string rendered =
      ChatTemplate::for_checkpoint(ckpt()).render_prompt(nlohmann::ordered_json::parse(kMessages.dump()), false);
  EXPECT_EQ(rendered,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n"
            "<|im_start|>assistant\n");
  const json chat = post("/v1/chat/completions",
                         {{"model", "tiny"}, {"messages", kMessages}, {"max_tokens", 10}, {"temperature", 0}});
  const json completion = post("/v1/completions", {{"prompt", rendered}, {"max_tokens", 10}, {"temperature", 0}});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  ASSERT_EQ(chat["choices"].size(), 1u);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], completion["choices"][0]["text"]);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], completion["choices"][0]["finish_reason"]);
  EXPECT_EQ(chat["usage"], completion["usage"]);
  EXPECT_GT(chat["usage"]["prompt_tokens"].get<int>(), 40);  // the template's text was encoded, not the bare messages
}

// logprobs: true gives each generated token its log-probability, bytes and
// top alternatives (OpenAI's chat shape); the tokens spell the reply.
TEST_F(ServeChat, LogprobsCoverEveryGeneratedToken) {
  const json r = post("/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 5}, {"temperature", 0},
                                               {"logprobs", true}, {"top_logprobs", 2}});
  const json& choice = r["choices"][0];
  const json& content = choice["logprobs"]["content"];
  ASSERT_TRUE(content.is_array()) << r;
  ASSERT_EQ(content.size(), r["usage"]["completion_tokens"].get<size_t>()) << r;
  std::string spelled;
  for (const json& t : content) {
    spelled += t["token"].get<std::string>();
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
    ASSERT_EQ(t["top_logprobs"].size(), 2u) << t;
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    // Greedy: the chosen token is the likeliest.
    EXPECT_NEAR(t["logprob"].get<double>(), t["top_logprobs"][0]["logprob"].get<double>(), 1e-9) << t;
  }
  EXPECT_EQ(spelled, choice["message"]["content"]);
  const json plain = post("/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 5}, {"temperature", 0}});
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(plain["choices"][0]["message"], choice["message"]);
}

TEST_F(ServeChat, StreamedChunksAddUpToTheReplyAndEndWithUsage) {
  json body = {{"messages", kMessages}, {"max_tokens", 12}, {"temperature", 0.8}, {"seed", 5}, {"n", 2}};
  const json whole = post("/v1/chat/completions", body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const std::vector<json> events = stream(body);
  ASSERT_GE(events.size(), 5u);
  std::vector<std::string> text(2);
  std::vector<int> roles(2, 0), finishes(2, 0);
  for (size_t e = 0; e + 1 < events.size(); ++e) {
    const json& chunk = events[e];
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], events[0]["id"]);
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null()) << chunk;
    ASSERT_EQ(chunk["choices"].size(), 1u);
    const json& choice = chunk["choices"][0];
    const size_t i = choice["index"].get<size_t>();
    ASSERT_LT(i, 2u);
    EXPECT_EQ(finishes[i], 0) << "a chunk after the finish of choice " << i;
    if (choice["delta"].contains("role")) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
      EXPECT_TRUE(text[i].empty()) << "the role comes first";
      ++roles[i];
    }
    if (choice["delta"].contains("content")) text[i] += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      EXPECT_EQ(choice["finish_reason"], whole["choices"][i]["finish_reason"]);
      ++finishes[i];
    }
  }
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(roles[i], 1);
    EXPECT_EQ(finishes[i], 1);
    EXPECT_EQ(text[i], whole["choices"][i]["message"]["content"]) << "choice " << i;
  }
  const json& last = events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"], whole["usage"]);
}

TEST_F(ServeChat, StreamWithoutUsageHasNoUsageField) {
  const std::vector<json> events =
      stream({{"messages", kMessages}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}});
  ASSERT_FALSE(events.empty());
  for (const json& e : events) EXPECT_FALSE(e.contains("usage")) << e;
  EXPECT_FALSE(events.back()["choices"][0]["finish_reason"].is_null());
}

TEST_F(ServeChat, MaxCompletionTokensAndStop) {
  const json capped = post("/v1/chat/completions",
                           {{"messages", kMessages}, {"max_completion_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(capped["usage"]["completion_tokens"], 3);
  EXPECT_EQ(capped["choices"][0]["finish_reason"], "length");
  const json longer = post("/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 16}, {"temperature", 0}});
  const std::string text = longer["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_GE(text.size(), 4u);
  // A stop string taken from the greedy reply cuts it there.
  const std::string stop = text.substr(2, 2);
  const json stopped = post("/v1/chat/completions",
                            {{"messages", kMessages}, {"max_tokens", 16}, {"temperature", 0}, {"stop", stop}});
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stopped["choices"][0]["message"]["content"], text.substr(0, text.find(stop)));
}

TEST_F(ServeChat, BadRequestsAre400NamingTheField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const std::vector<std::pair<json, std::string>> cases = {
      {json::object(), "messages"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {json::array()}}}, "messages[0]"},
      {{{"messages", {{{"content", "hi"}}}}}, "messages[0].role"},
      {{{"messages", {user, {{"role", "robot"}, {"content", "x"}}}}}, "messages[1].role"},
      {{{"messages", {user, {{"role", "user"}, {"content", 5}}}}}, "messages[1].content"},
      {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}},
       "messages[0].content[0].type"},
      {{{"messages", {{{"role", "assistant"}, {"content", "x"}, {"tool_calls", json::array()}}}}},
       "messages[0].tool_calls"},
      {{{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, "messages"},  // the template refuses it
      {{{"messages", {user}}, {"logprobs", true}, {"stream", true}}, "logprobs"},
      {{{"messages", {user}}, {"top_logprobs", 2}}, "top_logprobs"},
      {{{"messages", {user}}, {"logprobs", true}, {"top_logprobs", 9}}, "top_logprobs"},
      {{{"messages", {user}}, {"tools", json::array()}}, "tools"},
      {{{"messages", {user}}, {"max_tokens", 2}, {"max_completion_tokens", 2}}, "max_tokens"},
      {{{"messages", {user}}, {"max_completion_tokens", 0}}, "max_completion_tokens"},
      {{{"messages", {user}}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"messages", {user}}, {"stream", true}, {"stream_options", {{"include_usage", 1}}}}, "stream_options.include_usage"},
      {{{"messages", {user}}, {"n", 0}}, "n"},
      {{{"messages", {user}}, {"temperature", -1}}, "temperature"},
      {{{"messages", {user}}, {"presence_penalty", 2.5}}, "presence_penalty"},
      {{{"messages", {user}}, {"logit_bias", {{"x", 1}}}}, "logit_bias"},
  };
  for (const auto& [body, field] : cases) {
    const json r = post("/v1/chat/completions", body, 400);
    ASSERT_TRUE(r.contains("error")) << body;
    EXPECT_EQ(r["error"]["type"], "invalid_request_error");
    EXPECT_EQ(r["error"]["param"], field) << body;
    const std::string message = r["error"]["message"].get<std::string>();
    EXPECT_EQ(message.rfind(field + ": ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  const json refused = post("/v1/chat/completions", {{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, 400);
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("tool messages are not supported"), std::string::npos);
  auto wrong_method = client().Get("/v1/chat/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
}

TEST_F(ServeChat, TextPartsAreJoinedIntoTheContent) {
  const json parts = {{{"role", "system"}, {"content", "You are terse."}},
                      {{"role", "user"},
                       {"content", {{{"type", "text"}, {"text", " Hello"}}, {{"type", "text"}, {"text", "there \n"}}}}}};
  const json a = post("/v1/chat/completions", {{"messages", parts}, {"max_tokens", 4}, {"temperature", 0}});
  const json joined = {kMessages[0], {{"role", "user"}, {"content", " Hello\nthere \n"}}};
  const json b = post("/v1/chat/completions", {{"messages", joined}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(a["choices"], b["choices"]);
  EXPECT_EQ(a["usage"], b["usage"]);
}

// A template using an unsupported construct does not stop the server:
// completions are served, chat requests get a 500 naming the template.
TEST(ServeChatBrokenTemplate, CompletionsStillServedChatAnswers500) {
  set_threads(2);
  const fs::path dir = fs::temp_directory_path() / ("hymba_chat_broken_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  LanguageModel::create("hybrid-official", Scale::kTiny, 3).save(dir.string());
  std::ofstream(dir / "tokenizer_config.json")
      << json({{"chat_template", "{% macro turn(m) %}{{ m.content }}{% endmacro %}{{ turn(messages[0]) }}"}}).dump();
  LanguageModel lm = LanguageModel::load(dir.string());
  serve::ServeOptions options;
  options.port = 0;
  serve::Server server(lm, options);
  EXPECT_NE(server.chat_template_error().find("'{% macro %}' is not supported"), std::string::npos)
      << server.chat_template_error();
  const int port = server.bind();
  std::thread listener([&] { server.listen(); });
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  auto chat = c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 500);
  EXPECT_NE(chat->body.find("tokenizer_config.json: cannot parse the template"), std::string::npos) << chat->body;
  auto completion = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200) << completion->body;
  server.stop();
  listener.join();
  fs::remove_all(dir);
}

TEST(ChatTemplate, CheckpointWithoutTemplateUsesThePlainDefault) {
  const fs::path dir = fs::temp_directory_path() / ("hymba_chat_default_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ChatTemplate t = ChatTemplate::for_checkpoint(dir.string());
  EXPECT_TRUE(t.is_default());
  const auto messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  EXPECT_EQ(t.render(messages), "System: Be brief.\n\nUser: Hi\n\nAssistant:");
  // A broken template is an error naming the file, not a crash.
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{% for m in messages %}"})";
  try {
    ChatTemplate::for_checkpoint(dir.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: cannot parse the template"), std::string::npos) << e.what();
  }
  // bos_token as an AddedToken object; a leading bos is dropped for a model that adds its own.
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}", "bos_token": {"content": "<s>"}})";
  const ChatTemplate with_bos = ChatTemplate::for_checkpoint(dir.string());
  EXPECT_EQ(with_bos.render(messages), "<s>Be brief.");
  EXPECT_EQ(with_bos.render_prompt(messages, true), "Be brief.");
  EXPECT_EQ(with_bos.render_prompt(messages, false), "<s>Be brief.");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hymba
