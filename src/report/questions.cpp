#include "report/questions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "report/report_kit.h"
#include "core/error.h"

namespace hymba::report {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kHolds:
      return "holds";
    case Verdict::kReversed:
      return "reversed";
    case Verdict::kInconclusive:
      return "inconclusive at this budget";
  }
  return "?";
}

namespace {

const char* claim_name(Claim c) {
  switch (c) {
    case Claim::kBetter:
      return "better";
    case Claim::kNoWorse:
      return "no_worse";
    case Claim::kSimilar:
      return "similar";
    case Claim::kAbove:
      return "above";
  }
  return "?";
}

// The verdict from the interval [low, high] of the mean difference.
Verdict judge(Claim claim, double low, double high, double margin) {
  switch (claim) {
    case Claim::kBetter:
    case Claim::kAbove:
      if (low > 0) return Verdict::kHolds;
      if (high < 0) return Verdict::kReversed;
      break;
    case Claim::kNoWorse:  // diffs are a's advantage: a cost beyond the margin is below -margin
      if (low > -margin) return Verdict::kHolds;
      if (high < -margin) return Verdict::kReversed;
      break;
    case Claim::kSimilar:
      if (low > -margin && high < margin) return Verdict::kHolds;
      if (low > margin || high < -margin) return Verdict::kReversed;
      break;
  }
  return Verdict::kInconclusive;
}

std::string rows_label(const Question& q) {
  switch (q.claim) {
    case Claim::kBetter:
      return q.row_a + " vs " + q.row_b;
    case Claim::kNoWorse:
      return q.row_a + " vs " + q.row_b + fmt(" (margin %g)", q.margin);
    case Claim::kSimilar:
      return q.row_a + " ~ " + q.row_b + fmt(" (margin %g)", q.margin);
    case Claim::kAbove:
      return q.row_a + fmt(" vs %g", q.margin);
  }
  return "";
}

}  // namespace

Question question_from_json(const nlohmann::json& j, const std::string& where, const std::string& default_metric) {
  HYMBA_CHECK(j.is_object(), where, ": a question is an object with 'question', 'claim' and 'a'");
  static const char* const kKnown[] = {"id", "question", "claim", "a", "b", "metric", "margin", "seed_says"};
  for (auto it = j.begin(); it != j.end(); ++it)
    HYMBA_CHECK(std::find(std::begin(kKnown), std::end(kKnown), it.key()) != std::end(kKnown), where,
                ": unknown field '", it.key(), "' (known: id, question, claim, a, b, metric, margin, seed_says)");
  auto text = [&](const char* key, bool required) {
    HYMBA_CHECK(!required || j.contains(key), where, ": field '", key, "' is missing");
    if (!j.contains(key)) return std::string();
    HYMBA_CHECK(j[key].is_string() && !j[key].get<std::string>().empty(), where, ": field '", key,
                "' must be a non-empty string");
    return j[key].get<std::string>();
  };
  Question q;
  q.text = text("question", true);
  const std::string claim = text("claim", true);
  const Claim claims[] = {Claim::kBetter, Claim::kNoWorse, Claim::kSimilar, Claim::kAbove};
  bool found = false;
  for (Claim c : claims)
    if (claim == claim_name(c)) q.claim = c, found = true;
  HYMBA_CHECK(found, where, ": field 'claim' is \"", claim, "\", not one of better, no_worse, similar, above");
  q.row_a = text("a", true);
  q.row_b = text("b", q.claim != Claim::kAbove);
  HYMBA_CHECK(q.claim != Claim::kAbove || q.row_b.empty(), where, ": field 'b' has no use with claim \"above\"");
  q.metric = j.contains("metric") ? text("metric", true) : default_metric;
  q.seed_says = text("seed_says", false);
  q.id = j.contains("id") ? text("id", true) : q.row_a + "-" + claim + (q.row_b.empty() ? "" : "-" + q.row_b);
  if (q.claim != Claim::kBetter) {
    HYMBA_CHECK(j.contains("margin") && j["margin"].is_number(), where,
                ": field 'margin' (a number) is required with claim \"", claim, "\"");
    q.margin = j["margin"].get<double>();
    HYMBA_CHECK(std::isfinite(q.margin) && (q.claim == Claim::kAbove || q.margin >= 0), where,
                ": field 'margin' must be a finite number (>= 0 for no_worse and similar)");
  } else {
    HYMBA_CHECK(!j.contains("margin"), where, ": field 'margin' has no use with claim \"better\"");
  }
  return q;
}

Answer answer_question(const Question& q, bool lower_is_better, const RepeatValues& a, const RepeatValues& b) {
  Answer ans;
  ans.question = q;
  ans.lower_is_better = lower_is_better;
  for (const auto& [repeat, va] : a) {
    double d = 0.0;
    if (q.claim == Claim::kAbove) {
      d = va - q.margin;
    } else {
      const auto it = b.find(repeat);
      if (it == b.end()) continue;
      const double vb = it->second;
      d = q.claim == Claim::kSimilar ? va - vb : (lower_is_better ? vb - va : va - vb);
    }
    if (!std::isfinite(d)) continue;
    ans.repeats.push_back(repeat);
    ans.diffs.push_back(d);
  }
  ans.spread = spread_of(ans.diffs);
  if (ans.diffs.empty()) {
    ans.note = "no repeat measured for both rows";
  } else if (!ans.spread.has_interval()) {
    ans.note = "one repeat: no interval";
  } else {
    ans.verdict = judge(q.claim, ans.spread.low(), ans.spread.high(), q.margin);
  }
  return ans;
}

nlohmann::json Answer::to_json() const {
  nlohmann::json j = {{"id", question.id},
                      {"question", question.text},
                      {"seed_says", question.seed_says},
                      {"claim", claim_name(question.claim)},
                      {"row_a", question.row_a},
                      {"row_b", question.row_b},
                      {"metric", question.metric},
                      {"margin", question.margin},
                      {"lower_is_better", lower_is_better},
                      {"repeats", repeats},
                      {"diffs", diffs},
                      {"n", spread.n},
                      {"mean", spread.mean},
                      {"sd", spread.sd},
                      {"verdict", to_string(verdict)},
                      {"note", note}};
  if (spread.has_interval()) j["ci95"] = {spread.low(), spread.high()};
  return j;
}

std::string spread_text(const Spread& s, const char* format) {
  if (s.n == 0) return "n/a";
  std::string out = fmt(format, s.mean);
  if (!s.has_interval()) return out;
  return out + " ± " + fmt(format, s.sd) + " [" + fmt(format, s.low()) + ", " + fmt(format, s.high()) + "]";
}

std::string answers_markdown(const std::vector<Answer>& answers) {
  TextTable t;
  t.headers = {"Question", "Seed says", "Rows (metric)", "Repeats", "Mean difference [95 % CI]", "Verdict"};
  for (const Answer& a : answers) {
    const Spread& s = a.spread;
    std::string diff = s.n == 0 ? std::string("—") : fmt("%+.4f", s.mean);
    if (s.has_interval()) diff += fmt(" [%+.4f", s.low()) + fmt(", %+.4f]", s.high());
    const std::string verdict =
        a.note.empty() ? to_string(a.verdict) : std::string(to_string(a.verdict)) + " (" + a.note + ")";
    t.cells.push_back({a.question.text, a.question.seed_says, rows_label(a.question) + " (" + a.question.metric + ")",
                       std::to_string(s.n), diff, verdict});
  }
  std::ostringstream md;
  md << markdown_table(t)
     << "\nDifference per repeat (paired by seed): the first row's advantage in the metric's better direction; "
        "for `~` the first minus the second; against a number, the value minus it. The verdict holds when the 95 % "
        "Student t interval of the mean lies on the claim's side, is reversed when it lies wholly on the other, and "
        "is inconclusive otherwise.\n";
  return md.str();
}

}  // namespace hymba::report
