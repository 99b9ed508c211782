#include "chat/chat_template.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

namespace hymba {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kDefaultChatTemplate =
    "{% for message in messages %}{{ message['role'] | capitalize }}: {{ message['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}";

namespace {

// bos_token / eos_token: a string, or an AddedToken object {"content": ...}.
std::string special_token(const json& config, const char* key, const std::string& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  fail(path, ": field '", key, "' must be a string or an object with a string 'content'");
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string name, std::string bos_token, std::string eos_token)
    : template_(source, std::move(name)), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {}

ChatTemplate ChatTemplate::plain() {
  ChatTemplate t(kDefaultChatTemplate, "the default chat template", "", "");
  t.is_default_ = true;
  return t;
}

ChatTemplate ChatTemplate::for_checkpoint(const std::string& dir) {
  std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  if (!fs::exists(config_path)) {
    const std::string tokenizer = checkpoint_tokenizer_path(dir);
    if (!tokenizer.empty()) config_path = (fs::path(tokenizer).parent_path() / "tokenizer_config.json").string();
  }
  if (!fs::exists(config_path)) return plain();
  const json config = read_json_file(config_path);
  HYMBA_CHECK(config.is_object(), config_path, ": expected a JSON object");
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return plain();
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {  // named templates: the "default" one serves chat
    for (const json& named : *it)
      if (named.is_object() && named.value("name", json()).is_string() && named["name"] == "default" &&
          named.value("template", json()).is_string())
        source = named["template"].get<std::string>();
    HYMBA_CHECK(!source.empty(), config_path, ": field 'chat_template' lists no template named \"default\"");
  } else {
    fail(config_path, ": field 'chat_template' must be a string or a list of {name, template}");
  }
  return ChatTemplate(source, "chat_template of " + config_path, special_token(config, "bos_token", config_path),
                      special_token(config, "eos_token", config_path));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  nlohmann::ordered_json context = {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}};
  if (!bos_token_.empty()) context["bos_token"] = bos_token_;
  if (!eos_token_.empty()) context["eos_token"] = eos_token_;
  return template_.render(context);
}

std::string ChatTemplate::render_prompt(const nlohmann::ordered_json& messages, bool model_adds_bos) const {
  std::string text = render(messages, true);
  if (model_adds_bos && !bos_token_.empty() && text.rfind(bos_token_, 0) == 0) text.erase(0, bos_token_.size());
  return text;
}

}  // namespace hymba
