// A Jinja subset interpreter for chat templates (tokenizer_config.json's
// "chat_template"), written to render exactly as @huggingface/jinja does,
// the implementation transformers.js and most JS tooling use: the same
// whitespace handling (trim_blocks and lstrip_blocks always on, a single
// trailing newline dropped), the same value semantics ("true"/"false" for
// booleans, 3.0 printed as "3.0", strip() ignoring its argument) and the
// same filters, tests and methods. docs/serve.md lists what is supported.
//
// Templates come from untrusted files: parse nesting, loop iterations,
// range() and string/array sizes are bounded, and every failure (syntax,
// an unsupported construct, raise_exception, a limit) is a hymba::Error
// whose one-line message starts with the template's name.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hymba {

namespace jinja {
struct Node;
}

class JinjaTemplate {
 public:
  // Parses source; name labels errors ("chat_template of DIR/tokenizer_config.json").
  JinjaTemplate(std::string_view source, std::string name);
  ~JinjaTemplate();
  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

  // Renders with the context's top-level keys as variables (messages,
  // add_generation_prompt, bos_token, ...). Object keys keep their order.
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const jinja::Node> program_;
};

}  // namespace hymba
