// The Jinja subset interpreter (chat/jinja.h) renders chat templates byte
// for byte as @huggingface/jinja does: every template of
// tests/fixtures/chat_templates/templates.json (published models' templates
// and hand-written ones covering the subset) with every message list of
// messages.json, against expected.json, which tools/chat_templates/render.mjs
// wrote with the real library. What fails there fails here, with one line
// naming the template; hostile templates hit bounds instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "chat/jinja.h"

namespace hymba {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json read_fixture(const std::string& name) {
  std::ifstream in(std::string(HYMBA_FIXTURES_DIR) + "/chat_templates/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  return ordered_json::parse(text.str());
}

std::string render(const std::string& source, const ordered_json& context, const std::string& name = "t") {
  return JinjaTemplate(source, name).render(context);
}

TEST(Jinja, RendersEveryFixtureLikeHuggingFaceJinja) {
  const ordered_json templates = read_fixture("templates.json");
  const ordered_json messages = read_fixture("messages.json");
  const ordered_json cases = read_fixture("expected.json");
  ASSERT_GE(cases.size(), 100u);
  int rendered = 0, refused = 0;
  for (const auto& c : cases) {
    const std::string name = c["template"].get<std::string>();
    const ordered_json& t = templates[name];
    const std::string label = name + " x " + c["messages"].get<std::string>() +
                              (c["add_generation_prompt"].get<bool>() ? " +gen" : "");
    ordered_json context = {{"messages", messages[c["messages"].get<std::string>()]},
                            {"add_generation_prompt", c["add_generation_prompt"]}};
    if (!t["bos_token"].is_null()) context["bos_token"] = t["bos_token"];
    if (!t["eos_token"].is_null()) context["eos_token"] = t["eos_token"];
    if (c.contains("output")) {
      try {
        EXPECT_EQ(render(t["template"].get<std::string>(), context, name), c["output"].get<std::string>()) << label;
        ++rendered;
      } catch (const Error& e) {
        ADD_FAILURE() << label << ": " << e.what();
      }
    } else {
      try {
        render(t["template"].get<std::string>(), context, name);
        ADD_FAILURE() << label << ": rendered, but @huggingface/jinja failed: " << c["error"];
      } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind(name + ": ", 0), 0u) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        ++refused;
      }
    }
  }
  EXPECT_GT(rendered, 80);
  EXPECT_GT(refused, 10);
}

TEST(Jinja, PublishedTemplatesAreCovered) {
  const ordered_json templates = read_fixture("templates.json");
  for (const char* name : {"llama3", "gemma3", "deepseek_v3", "qwen3"}) EXPECT_TRUE(templates.contains(name)) << name;
}

TEST(Jinja, RaiseExceptionIsOneLineNamingTheTemplate) {
  try {
    render("{{ raise_exception('roles must\nalternate') }}", ordered_json::object(), "chat_template of ck/tokenizer_config.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat_template of ck/tokenizer_config.json: the template refused the input: roles must alternate");
  }
}

TEST(Jinja, UnsupportedAndBrokenTemplatesAreClearErrors) {
  const ordered_json none = ordered_json::object();
  const std::pair<const char*, const char*> cases[] = {
      {"{% macro m() %}x{% endmacro %}", "'{% macro %}' is not supported"},
      {"{% include 'x' %}", "'{% include %}' is not supported"},
      {"{{ 1 + }}", "cannot parse"},
      {"{% if true %}never closed", "unclosed 'if' block"},
      {"{{ 'abc", "string literal"},
      {"{{ x | no_such_filter }}", "no_such_filter"},
      {"{{ 1 is frobnicated }}", "unknown test: frobnicated"},
      {"{% break %}", "'break' outside a loop"},
      {"{{ 1 // 0 }}", "division or modulo by zero"},
  };
  for (const auto& [source, expected] : cases) {
    try {
      render(source, none, "tpl");
      ADD_FAILURE() << source << ": no error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("tpl: ", 0), 0u) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << source << " -> " << message;
    }
  }
}

TEST(Jinja, HostileTemplatesHitBoundsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const ordered_json none = ordered_json::object();
  const char* hostile[] = {
      "{% for i in range(100000000) %}x{% endfor %}",                                             // range bound
      "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",  // iteration bound
      "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
      "{{ 'x' * 99999999 }}",
  };
  for (const char* source : hostile) EXPECT_THROW(render(source, none), Error) << source;
  // Deep nesting is refused at parse time instead of overflowing the stack.
  EXPECT_THROW(render("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", none), Error);
  EXPECT_THROW(render(std::string(50000, '{') + "{{ x }}", none), Error);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(render(ifs, none), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(Jinja, ValuesPrintAsHuggingFaceJinjaPrintsThem) {
  const ordered_json ctx = {{"n", 2.0}, {"f", 0.1}, {"b", false}, {"o", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(render("{{ n }} {{ f }} {{ b }} {{ o }}|{{ none }}|{{ x if false }}|", ctx), "2 0.1 false {\"z\": 1, \"a\": 2}|||");
  EXPECT_EQ(render("{{ 1/3 }} {{ 10 / 4 }} {{ 2.0 }} {{ -0.0 }} {{ 100000000000000000000.0 }}", ctx),
            "0.3333333333333333 2.5 2.0 -0.0 100000000000000000000.0");
  EXPECT_EQ(render("{{ ' a b '.strip('x') }}|{{ 'a-b'.split('-', 1) }}|{{ 'A' is upper }}", ctx), "a b|[\"a\", \"b\"]|true");
}

}  // namespace
}  // namespace hymba
