// Integer flags: CLI11 reports "2.5" or "1e12" given to an integer flag as
// "not in range", which sends the user looking at the bounds. A validator put
// in front of each integer flag's checks says what is wrong instead.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/commands.h"

namespace hymba::cli {

namespace {

// "" when `text` is a plain (optionally signed) decimal integer, else why not.
std::string integer_text_problem(const std::string& text) {
  size_t i = text.empty() || (text[0] != '-' && text[0] != '+') ? 0 : 1;
  bool digits = i < text.size();
  for (; i < text.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(text[i]));
  return digits ? std::string() : "'" + text + "' is not an integer";
}

void visit(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    // Integer options carry CLI11's type name INT or UINT (with any range
    // appended); flags without a value have none.
    const std::string type = opt->get_type_name();
    if (opt->get_type_size() == 0 || (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0)) continue;
    // transform() puts the check first, before ranges and conversions.
    opt->transform(CLI::Validator(integer_text_problem, "", "integer"));
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) visit(sub);
}

}  // namespace

std::string bound_text(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void require_integer_text(CLI::App& app) { visit(&app); }

}  // namespace hymba::cli
