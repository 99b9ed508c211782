// "Did you mean ...?" for a mistyped subcommand or flag: CLI11 only says
// "The following argument was not expected", which leaves the user guessing.
#include <algorithm>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace hymba::cli {

namespace {

// Edit distance (insertions, deletions, substitutions; '_' and '-' equal).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = a[i - 1] == b[j - 1] || ((a[i - 1] == '_' || a[i - 1] == '-') && (b[j - 1] == '_' || b[j - 1] == '-'));
      const size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

// The deepest subcommand the parse reached (the root when none).
const CLI::App* deepest_subcommand(const CLI::App& app) {
  const CLI::App* at = &app;
  for (std::vector<CLI::App*> subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands()) at = subs.back();
  return at;
}

}  // namespace

std::string closest_name(const std::string& typed, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& n : names) {
    // A prefix ("gen" of "generate") is the likeliest meaning; otherwise a few typos.
    const size_t d = n.size() > typed.size() && n.compare(0, typed.size(), typed) == 0 && typed.size() >= 2
                         ? 1
                         : edit_distance(typed, n);
    const size_t allowed = n.size() <= 3 ? 1 : std::min<size_t>(3, std::max<size_t>(2, n.size() / 3));
    if (d <= allowed && (best.empty() || d < best_distance)) {
      best = n;
      best_distance = d;
    }
  }
  return best;
}

std::string explain_unexpected_arguments(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining(true);
  if (extras.empty()) return "";
  const CLI::App* at = deepest_subcommand(app);
  const std::string& first = extras.front();
  if (first.rfind("-", 0) == 0) {
    const std::string typed = first.substr(0, first.find('='));
    std::vector<std::string> flags;
    for (const CLI::App* scope : {at, &app})
      for (const CLI::Option* opt : scope->get_options()) {
        for (const std::string& l : opt->get_lnames()) flags.push_back("--" + l);
        for (const std::string& s : opt->get_snames()) flags.push_back("-" + s);
      }
    const std::string where = at == &app ? "" : " for '" + at->get_name() + "'";
    const std::string guess = closest_name(typed, flags);
    return "unknown flag '" + typed + "'" + where + (guess.empty() ? "" : "; did you mean " + guess + "?");
  }
  if (at == &app || at->get_subcommands({}).size() > 0) {
    // A word where a subcommand belongs.
    std::vector<std::string> names;
    for (const CLI::App* sub : at->get_subcommands({})) names.push_back(sub->get_name());
    if (!names.empty()) {
      const std::string guess = closest_name(first, names);
      return "unknown subcommand '" + first + "'" + (guess.empty() ? "" : "; did you mean '" + guess + "'?");
    }
  }
  return "unexpected argument '" + first + "'" + (at == &app ? "" : " for '" + at->get_name() + "'");
}

}  // namespace hymba::cli
