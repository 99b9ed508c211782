// `hymba generate --chat` and `hymba chat`, driven through the built CLI:
// the prompt (or each stdin line) becomes a user message formatted by the
// checkpoint's chat template, and the text printed equals what the library
// generates from that rendered conversation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "cli_util.h"
#include "chat/chat_template.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kTemplate =
    "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no booms here') }}{% endif %}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

class CliChat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_cli_chat_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    LanguageModel::create("hybrid-official", Scale::kTiny, 5).save(ckpt());
    std::ofstream(fs::path(ckpt()) / "tokenizer_config.json") << json({{"chat_template", kTemplate}}).dump();
    lm_ = std::make_unique<LanguageModel>(LanguageModel::load(ckpt()));
  }
  static void TearDownTestSuite() {
    lm_.reset();
    fs::remove_all(dir_);
  }
  static std::string ckpt() { return (dir_ / "ck").string(); }
  // The greedy reply of the library to a conversation.
  static std::string reply(const ordered_json& messages, int64_t max_new_tokens) {
    infer::GenerateOptions o;
    o.max_new_tokens = max_new_tokens;
    o.sampling.temperature = 0;
    return lm_->generate(ChatTemplate::for_checkpoint(ckpt()).render_prompt(messages, lm_->adds_bos()), o).text;
  }
  static std::string stdin_file(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  static fs::path dir_;
  static std::unique_ptr<LanguageModel> lm_;
};

fs::path CliChat::dir_;
std::unique_ptr<LanguageModel> CliChat::lm_;

ordered_json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

TEST_F(CliChat, GenerateChatRendersThePromptAsOneUserMessage) {
  const auto r = test::run_cli("generate --ckpt " + ckpt() +
                               " --chat --system 'Be brief.' --prompt 'Hello' --temperature 0 --max-new-tokens 6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json line = json::parse(r.output.substr(0, r.output.find('\n')));
  EXPECT_EQ(line["chat_prompt"], "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                                 "<|im_start|>assistant\n");
  EXPECT_EQ(line["prompt"], "Hello");
  const ordered_json messages = ordered_json::array({{{"role", "system"}, {"content", "Be brief."}}, user("Hello")});
  const std::string expected = reply(messages, 6);
  EXPECT_EQ(line["text"], json::parse(json(expected).dump(-1, ' ', false, json::error_handler_t::replace)));

  // Streamed to the terminal: the reply alone, no echo of the prompt.
  const auto plain = test::run_cli("generate --ckpt " + ckpt() + " --chat --prompt 'Hello' --temperature 0 --max-new-tokens 6");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.rfind(reply(ordered_json::array({user("Hello")}), 6) + "\n", 0), 0u) << plain.output;

  const auto refused = test::run_cli("generate --ckpt " + ckpt() + " --system x --prompt 'Hello'");
  EXPECT_EQ(refused.exit_code, 2);  // a usage error
  EXPECT_NE(refused.output.find("--system: only with --chat"), std::string::npos) << refused.output;
}

TEST_F(CliChat, ReplKeepsTheConversationUntilExit) {
  const std::string input = stdin_file("turns.txt", "Hi\nHow are you?\n/exit\nnever read\n");
  const auto r = test::run_cli("chat --ckpt " + ckpt() + " --temperature 0 --max-new-tokens 5 < " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string first = reply(ordered_json::array({user("Hi")}), 5);
  const std::string second =
      reply(ordered_json::array({user("Hi"), {{"role", "assistant"}, {"content", first}}, user("How are you?")}), 5);
  EXPECT_EQ(r.output, first + "\n" + second + "\n");
}

// /help lists the commands; an unknown slash command is refused, not sent;
// "//" sends a message that starts with "/".
TEST_F(CliChat, SlashCommandsAreHandledNotSent) {
  const std::string input = stdin_file("slash.txt", "/help\n/bogus\n//Hi\n/exit\n");
  const auto r = test::run_cli("chat --ckpt " + ckpt() + " --temperature 0 --max-new-tokens 5 < " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/reset   start a new conversation"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unknown command '/bogus'"), std::string::npos) << r.output;
  // The only turn the model saw is "/Hi", its first.
  EXPECT_NE(r.output.find(reply(ordered_json::array({user("/Hi")}), 5) + "\n"), std::string::npos) << r.output;
}

// Turns after the first continue the conversation's cache: --show-reuse
// reports how many of each turn's tokens it held.
TEST_F(CliChat, ReplReusesTheCacheBetweenTurns) {
  const std::string input = stdin_file("reuse.txt", "Hi\nHow are you?\nFine.\n");
  const auto r =
      test::run_cli("chat --ckpt " + ckpt() + " --temperature 0 --max-new-tokens 5 --show-reuse < " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<long long> reused, total;
  for (size_t at = r.output.find("hymba chat: "); at != std::string::npos; at = r.output.find("hymba chat: ", at + 1)) {
    long long n = -1, m = -1;
    if (std::sscanf(r.output.c_str() + at, "hymba chat: %lld of %lld conversation tokens", &n, &m) == 2) {
      reused.push_back(n);
      total.push_back(m);
    }
  }
  ASSERT_EQ(reused.size(), 3u) << r.output;
  EXPECT_EQ(reused[0], 0);
  for (size_t t = 1; t < 3; ++t) {
    EXPECT_GT(reused[t], total[t - 1] - 1) << "turn " << t << " re-ran the previous turn's prompt\n" << r.output;
    EXPECT_LT(reused[t], total[t]);
  }
  const auto refused = test::run_cli("chat --ckpt " + ckpt() + " --max-new-tokens 64 --context 64 < " + input);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--max-new-tokens (64) must be below --context (64)"), std::string::npos)
      << refused.output;
}

TEST_F(CliChat, ReplReportsARefusedTurnAndGoesOn) {
  const std::string input = stdin_file("boom.txt", "boom\nHi\n");  // ends without /exit: end of input stops it
  const auto r = test::run_cli("chat --ckpt " + ckpt() + " --temperature 0 --max-new-tokens 4 < " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hymba chat: error: chat_template of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the template refused the input: no booms here\n"), std::string::npos) << r.output;
  // The refused message is not kept: the next turn is the first of the conversation.
  const std::string expected = reply(ordered_json::array({user("Hi")}), 4) + "\n";
  EXPECT_EQ(r.output.substr(r.output.size() - expected.size()), expected) << r.output;
}

}  // namespace
}  // namespace hymba
