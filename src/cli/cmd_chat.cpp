// `hymba chat --ckpt DIR`: an interactive conversation on stdin/stdout.
// Each line read is a user message; the conversation so far is rendered
// through the checkpoint's chat template (chat/chat_template.h) and the
// reply streams out as it is generated. "/exit" (or end of input) ends it,
// "/reset" starts a new conversation, "/help" lists the commands; other
// slash commands are refused, not sent ("//" sends a leading "/").
//
// The conversation's cache lives from turn to turn (infer/chat_session.h):
// a turn feeds only the tokens its cache does not hold yet (the new user
// message, and the reply when the template writes it back differently),
// within a context of --context tokens (docs/serve.md, "hymba chat").
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "chat/chat_template.h"
#include "infer/chat_session.h"
#include "infer/generate.h"

namespace hymba::cli {

namespace {

constexpr const char* kChatHelp =
    "/help    this list\n"
    "/reset   start a new conversation (the system prompt stays)\n"
    "/exit    end the chat (also /quit, or end of input)\n"
    "//text   send a message that starts with /\n";

void write_now(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void register_chat(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, system;
    infer::GenerateOptions gen;
    infer::WeightFormat weights = infer::WeightFormat::kF32;
    int64_t context = 8192;
    bool show_reuse = false;
  };
  auto opts = std::make_shared<Options>();
  opts->gen.max_new_tokens = 256;
  infer::GenerateOptions& g = opts->gen;
  CLI::App* cmd = app.add_subcommand(
      "chat", "Chat with a checkpoint: one user message per line on stdin, /exit or end of input to stop");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint directory (its tokenizer_config.json chat_template formats the turns)")
      ->required();
  cmd->add_option("--system", opts->system, "A system message that starts the conversation");
  cmd->add_option("--context", opts->context,
                  "Tokens the conversation may hold (its cache is allocated once, for this many)")
      ->check(range(int64_t{2}, int64_t{1} << 24))->capture_default_str();
  cmd->add_flag("--show-reuse", opts->show_reuse,
                "After each reply, print to stderr how many conversation tokens came from the cache");
  cmd->add_option("--max-new-tokens", g.max_new_tokens, "Tokens per reply at most")
      ->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--temperature", g.sampling.temperature, "Softmax temperature (0 = greedy)")
      ->check(range(0.0, 1e6))->capture_default_str();
  cmd->add_option("--top-k", g.sampling.top_k, "Sample among the k most likely tokens (0 = all)")
      ->check(range(int64_t{0}, int64_t{1} << 30))->capture_default_str();
  cmd->add_option("--top-p", g.sampling.top_p, "Nucleus: the most likely tokens holding this probability (1 = all)")
      ->check(range(1e-9, 1.0))->capture_default_str();
  add_sampling_extras(cmd, g.sampling);
  cmd->add_option("--seed", g.sampling.seed, "Sampling seed (turn t samples with seed + t)")->capture_default_str();
  cmd->add_option("--stop", g.stop, "End a reply when its text contains STR (repeatable)")->allow_extra_args(false);
  add_weights_option(cmd, opts->weights);
  cmd->callback([opts, &global] {
    apply_global_options(global);
    infer::validate(opts->gen);
    HYMBA_USAGE_CHECK(opts->gen.max_new_tokens < opts->context, "--max-new-tokens (", opts->gen.max_new_tokens,
                      ") must be below --context (", opts->context, ")");
    LanguageModel lm = LanguageModel::load(opts->ckpt, opts->weights);
    check_logit_bias(opts->gen.sampling, lm.config().vocab_size);
    const ChatTemplate chat_template = ChatTemplate::for_checkpoint(lm.source());
    infer::Decoder decoder(lm.model(), lm.weight_format());
    infer::ChatSession session(decoder, opts->context);
    const bool interactive = ::isatty(STDIN_FILENO) != 0;
    if (interactive)
      std::fprintf(stderr, "hymba chat: %s (%s); /exit to stop, /reset to start over, /help for more\n", lm.source().c_str(),
                   chat_template.is_default() ? "no chat_template: the plain default" : chat_template.name().c_str());
    const auto start = [&] {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      if (!opts->system.empty()) messages.push_back({{"role", "system"}, {"content", opts->system}});
      return messages;
    };
    nlohmann::ordered_json messages = start();
    std::string line;
    for (uint64_t turn = 0;; ++turn) {
      if (interactive) write_now("> ");
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "/exit" || line == "/quit") break;
      if (line == "/reset") {
        messages = start();
        session.reset();
        continue;
      }
      if (line == "/help" || line == "/?") {
        std::fprintf(stderr, "%s", kChatHelp);
        continue;
      }
      // A slash command we do not know is not sent to the model; "//" sends a line that starts with "/".
      if (line.size() > 1 && line[0] == '/' && line[1] != '/') {
        std::fprintf(stderr, "hymba chat: unknown command '%s' (/help lists them; start a message with // to send "
                     "a leading /)\n", excerpt(line, 60).c_str());
        continue;
      }
      if (line.rfind("//", 0) == 0) line.erase(0, 1);
      if (line.empty()) continue;
      messages.push_back({{"role", "user"}, {"content", line}});
      infer::GenerateOptions turn_options = opts->gen;
      turn_options.sampling.seed = opts->gen.sampling.seed + turn;
      try {
        const std::string prompt = chat_template.render_prompt(messages, lm.adds_bos());
        const infer::Generation reply = session.reply(lm.tokenizer(), lm.encode_prompt(prompt), turn_options,
                                                      [](int64_t, std::string_view text) { write_now(text); });
        write_now("\n");
        if (opts->show_reuse)
          std::fprintf(stderr, "hymba chat: %lld of %zu conversation tokens came from the cache\n",
                       static_cast<long long>(session.reused_tokens()), reply.prompt.size());
        messages.push_back({{"role", "assistant"}, {"content", reply.text}});
      } catch (const Error& e) {  // the template refused the turn, or it does not fit: say so, keep chatting
        messages.erase(messages.size() - 1);
        std::fprintf(stderr, "hymba chat: error: %s\n", e.what());
      }
    }
  });
}

}  // namespace hymba::cli
