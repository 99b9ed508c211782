// Chat formatting: a message list to the prompt text a chat model was
// trained on, through the checkpoint's `chat_template` (tokenizer_config.json,
// rendered by the Jinja subset of chat/jinja.h as Hugging Face tools do), or
// a plain documented default for models without one. Used by `hymba serve`
// (/v1/chat/completions), `hymba generate --chat` and `hymba chat`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja.h"

namespace hymba {

// The template used when a checkpoint has none (docs/serve.md):
//   "System: ...\n\nUser: ...\n\nAssistant: ...\n\n" per message (the role
//   capitalized), then "Assistant:" when a reply is asked for.
extern const char* const kDefaultChatTemplate;

class ChatTemplate {
 public:
  // The checkpoint directory's template: "chat_template" of the
  // tokenizer_config.json beside its tokenizer (a string, or a list of
  // {"name", "template"} of which "default" is used), with its bos_token and
  // eos_token; the default template when there is none. Errors name the file.
  static ChatTemplate for_checkpoint(const std::string& dir);
  // The default template (kDefaultChatTemplate), no bos/eos.
  static ChatTemplate plain();
  ChatTemplate(const std::string& source, std::string name, std::string bos_token, std::string eos_token);

  // messages: [{"role": "...", "content": "..."}, ...] (passed through as
  // given). Throws hymba::Error naming the template when it refuses them.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt = true) const;

  // render() as the text to give LanguageModel::encode_prompt: for a model
  // whose prompts start with the bos id anyway (model_adds_bos), a leading
  // bos_token text is dropped so that the bos is not there twice.
  std::string render_prompt(const nlohmann::ordered_json& messages, bool model_adds_bos) const;

  bool is_default() const { return is_default_; }
  // "chat_template of DIR/tokenizer_config.json", or "the default chat template".
  const std::string& name() const { return template_.name(); }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  JinjaTemplate template_;
  std::string bos_token_, eos_token_;
  bool is_default_ = false;
};

}  // namespace hymba
