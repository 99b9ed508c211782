// The questions a seed asks of its suite, answered from repeated runs: each
// is a paired comparison of two rows (or of one row with a threshold) over
// the repeats both have, with the mean difference, its 95 % Student t
// interval and a verdict (docs/results.md). Shared by ablate, synth and
// classify, which supply the per-repeat values of their own metrics.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/stats.h"

namespace hymba::report {

enum class Claim {
  kBetter,   // row a beats row b
  kNoWorse,  // row a is at most `margin` worse than row b ("costs little")
  kSimilar,  // rows a and b lie within `margin` of each other
  kAbove,    // row a's value lies above `margin` (a threshold)
};

enum class Verdict { kHolds, kReversed, kInconclusive };
const char* to_string(Verdict v);

struct Question {
  std::string id;         // short name, unique in the suite
  std::string text;       // the question, as a reader asks it
  std::string seed_says;  // what the seed reported or concluded
  Claim claim = Claim::kBetter;
  std::string row_a, row_b;  // row ids (row_b unused by kAbove)
  std::string metric = "best_val_loss";
  double margin = 0.0;  // kNoWorse / kSimilar: the difference still "little"; kAbove: the threshold
};

// One answered question. `diffs` are per repeat: a's advantage over b in
// the metric's better direction (kBetter, kNoWorse), a - b (kSimilar) or
// a - threshold (kAbove); positive supports the claim except for kSimilar.
struct Answer {
  Question question;
  bool lower_is_better = true;
  std::vector<int64_t> repeats;  // the repeats both rows have, ascending
  std::vector<double> diffs;
  Spread spread;
  Verdict verdict = Verdict::kInconclusive;
  std::string note;  // why inconclusive without an interval ("" otherwise)
  nlohmann::json to_json() const;
};

// A question from a suite file: {"id", "question", "claim": "better" |
// "no_worse" | "similar" | "above", "a", "b" (not for above), "metric",
// "margin" (no_worse, similar: required; above: the threshold), "seed_says"}.
// Errors name `where` and the field; the caller checks rows and metric.
Question question_from_json(const nlohmann::json& j, const std::string& where, const std::string& default_metric);

// Per-repeat values of one row's metric: repeat index -> value.
using RepeatValues = std::map<int64_t, double>;

// Pairs a and b by repeat and judges the claim by the 95 % interval of the
// mean difference: holds when the interval lies on the claim's side,
// reversed when it lies wholly on the other, inconclusive otherwise (and
// with fewer than two paired repeats).
Answer answer_question(const Question& q, bool lower_is_better, const RepeatValues& a, const RepeatValues& b);

// "mean ± sd [low, high]" in `format` ("%.4f"); the mean alone for one
// value, "n/a" for none: a table cell of a figure over repeats.
std::string spread_text(const Spread& s, const char* format);

// The markdown table of answers: question, the seed's word, rows, repeats,
// mean difference with its interval, verdict; and how to read it.
std::string answers_markdown(const std::vector<Answer>& answers);

}  // namespace hymba::report
