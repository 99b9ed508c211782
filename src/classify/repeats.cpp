#include "classify/repeats.h"

#include <algorithm>
#include <sstream>

#include "report/report_kit.h"
#include "core/error.h"
#include "core/stats.h"

namespace hymba::classify {

using nlohmann::json;

namespace {

int64_t repeat_of(const json& r) { return r.value("repeat", int64_t{0}); }

double metric_of(const json& r, const std::string& metric) {
  HYMBA_CHECK(metric == "val_acc" || metric == "macro_f1", "unknown classify metric '", metric,
              "' (known: val_acc, macro_f1)");
  return r.at("engine").at(metric).get<double>();
}

}  // namespace

std::vector<report::Question> classify_questions(const std::string& suite) {
  if (suite != "seed-004") return {};
  auto better = [](std::string id, std::string text, std::string says, std::string a, std::string b) {
    return report::Question{std::move(id), std::move(text), std::move(says), report::Claim::kBetter,
                            std::move(a),  std::move(b),    "val_acc",       0.0};
  };
  return {better("gpt-neo-vs-mamba", "Does the frozen GPT-Neo head beat the frozen Mamba head?",
                 "dev acc 0.85 vs 0.80 (other train sizes)", "gpt-neo", "mamba"),
          better("hybrid-vs-gpt-neo", "Do both backbones beat GPT-Neo alone?", "not reported", "hybrid", "gpt-neo"),
          better("hybrid-vs-mamba", "Do both backbones beat Mamba alone?", "not reported", "hybrid", "mamba")};
}

std::vector<report::Answer> answer_classify_questions(const std::vector<report::Question>& questions,
                                                      const json& runs) {
  std::vector<report::Answer> out;
  for (const report::Question& q : questions) {
    auto values = [&](const std::string& id) {
      report::RepeatValues v;
      for (const json& r : runs)
        if (r.at("id").get<std::string>() == id) v[repeat_of(r)] = metric_of(r, q.metric);
      return v;
    };
    out.push_back(report::answer_question(q, false, values(q.row_a), values(q.row_b)));
  }
  return out;
}

std::string classify_repeats_markdown(const json& runs, const std::vector<report::Answer>& answers) {
  std::vector<std::string> ids;
  bool repeated = false;
  for (const json& r : runs) {
    const std::string id = r.at("id").get<std::string>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    repeated = repeated || repeat_of(r) > 0;
  }
  std::ostringstream md;
  if (repeated) {
    report::TextTable t;
    t.headers = {"Row", "Repeats", "Seeds", "Val acc", "Macro-F1"};
    for (const std::string& id : ids) {
      std::vector<double> acc, f1;
      std::string name, seeds;
      for (const json& r : runs) {
        if (r.at("id").get<std::string>() != id) continue;
        name = r.at("name").get<std::string>();
        acc.push_back(metric_of(r, "val_acc"));
        f1.push_back(metric_of(r, "macro_f1"));
        seeds += (seeds.empty() ? "" : ", ") + std::to_string(r.value("run_seed", uint64_t{0}));
      }
      t.cells.push_back({name, std::to_string(acc.size()), seeds, report::spread_text(spread_of(acc), "%.4f"),
                         report::spread_text(spread_of(f1), "%.4f")});
    }
    md << "## Repeats and intervals\n\nThe tables above hold each row's first repeat; here every row over its "
          "repeats (seeds: --seed + 0, 1, ...: the train/validation split, the head's init and the data order): "
          "mean ± standard deviation [95 % Student t interval of the mean].\n\n"
       << report::markdown_table(t) << "\n";
  }
  if (!answers.empty())
    md << "## Questions\n\nSeed 004's table as paired comparisons over the repeats.\n\n"
       << report::answers_markdown(answers) << "\n";
  return md.str();
}

}  // namespace hymba::classify
