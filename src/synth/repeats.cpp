#include "synth/repeats.h"

#include <algorithm>
#include <sstream>

#include "report/report_kit.h"
#include "core/error.h"
#include "core/stats.h"

namespace hymba::synth {

namespace {

struct MetricDef {
  const char* name;
  bool lower_is_better;
  double (*get)(const RowRecord&);
};

double best_acc_of(const RowRecord& r) {
  double best = 0;
  for (const EpochStats& e : r.result.epochs) best = std::max(best, e.eval_acc);
  return best;
}

double solve_epoch_of(const RowRecord& r) {
  for (const EpochStats& e : r.result.epochs)
    if (e.eval_acc >= kSolvedAccuracy) return static_cast<double>(e.epoch);
  return static_cast<double>(r.result.last().epoch + 1);  // not solved: one past the last epoch run
}

const std::vector<MetricDef>& metric_defs() {
  static const std::vector<MetricDef> defs = {
      {"best_acc", false, best_acc_of},
      {"final_acc", false, [](const RowRecord& r) { return r.result.last().eval_acc; }},
      {"final_macro_acc", false, [](const RowRecord& r) { return r.result.last().eval_macro_acc; }},
      {"final_eval_loss", true, [](const RowRecord& r) { return r.result.last().eval_loss; }},
      {"solve_epoch", true, solve_epoch_of},
  };
  return defs;
}

const MetricDef& metric_def(const std::string& metric) {
  for (const MetricDef& d : metric_defs())
    if (metric == d.name) return d;
  fail("unknown synth metric '", metric,
       "' (known: best_acc, final_acc, final_macro_acc, final_eval_loss, solve_epoch)");
}

report::Question better(std::string id, std::string text, std::string says, std::string a, std::string b,
                        std::string metric) {
  return {std::move(id), std::move(text), std::move(says),   report::Claim::kBetter,
          std::move(a),  std::move(b),    std::move(metric), 0.0};
}

}  // namespace

double record_metric(const RowRecord& r, const std::string& metric) { return metric_def(metric).get(r); }

bool synth_metric_lower_is_better(const std::string& metric) { return metric_def(metric).lower_is_better; }

std::vector<report::Question> synth_questions(const SynthSuite& suite) {
  if (!suite.questions.empty()) return suite.questions;
  if (suite.name == "seed004-selective-copying")
    return {better("mamba-vs-transformer", "Does Mamba beat the Transformer (best accuracy)?", "yes: 1.000 vs 0.950",
                   "mamba-2", "transformer-2", "best_acc"),
            better("mamba-first", "Does Mamba solve the task in fewer epochs than the Transformer?",
                   "yes: epoch 3 vs 6", "mamba-2", "transformer-2", "solve_epoch"),
            better("hybrid-vs-transformer", "Does the hybrid (1 block, Null) beat the Transformer?",
                   "yes: 0.989 vs 0.950", "hybrid-1-null", "transformer-2", "best_acc"),
            better("hybrid-first", "Does the hybrid (1 block, Null) solve it in fewer epochs than the Transformer?",
                   "yes: epoch 2 vs 6", "hybrid-1-null", "transformer-2", "solve_epoch"),
            better("gated-vs-res", "Does the gated residual link beat the plain residual one (1 block)?",
                   "yes: 0.998 vs 0.984", "hybrid-1-gated", "hybrid-1-res", "best_acc")};
  if (suite.name == "seed004-in-context-recall")
    return {better("mamba-vs-transformer", "Does Mamba beat the Transformer (best accuracy)?", "yes: 1.000 vs 0.757",
                   "mamba-4", "transformer-2", "best_acc"),
            better("mamba-first", "Does Mamba solve the task in fewer epochs than the Transformer?",
                   "yes: epoch 1; the Transformer not in 20", "mamba-4", "transformer-2", "solve_epoch"),
            better("hybrid-vs-transformer", "Does the hybrid (1 block, Null) beat the Transformer?",
                   "yes: 0.968 (at length 16) vs 0.757", "hybrid-1-null", "transformer-2", "best_acc")};
  return {};
}

std::vector<report::Answer> answer_synth_questions(const std::vector<report::Question>& questions,
                                                   const std::vector<RowRecord>& runs) {
  std::vector<report::Answer> out;
  for (const report::Question& q : questions) {
    auto values = [&](const std::string& id) {
      report::RepeatValues v;
      for (const RowRecord& r : runs)
        if (r.id == id) v[r.repeat] = record_metric(r, q.metric);
      return v;
    };
    out.push_back(report::answer_question(q, synth_metric_lower_is_better(q.metric), values(q.row_a), values(q.row_b)));
  }
  return out;
}

std::string synth_repeats_markdown(const SynthSuite& suite, const std::vector<RowRecord>& runs,
                                   const std::vector<report::Answer>& answers) {
  size_t most = 0;
  for (const SynthRow& row : suite.rows)
    most = std::max<size_t>(
        most, std::count_if(runs.begin(), runs.end(), [&](const RowRecord& r) { return r.id == row.id; }));
  std::ostringstream md;
  if (most > 1) {
    report::TextTable t;
    t.headers = {"Model", "Repeats", "Seeds", "Best acc", "Final acc", "Solve epoch (acc >= 0.99)"};
    for (const SynthRow& row : suite.rows) {
      std::vector<double> best, final_acc, solve;
      std::string seeds;
      for (const RowRecord& r : runs) {
        if (r.id != row.id) continue;
        best.push_back(record_metric(r, "best_acc"));
        final_acc.push_back(record_metric(r, "final_acc"));
        solve.push_back(record_metric(r, "solve_epoch"));
        seeds += (seeds.empty() ? "" : ", ") + std::to_string(r.seed);
      }
      if (best.empty()) continue;
      t.cells.push_back({row.name, std::to_string(best.size()), seeds, report::spread_text(spread_of(best), "%.3f"),
                         report::spread_text(spread_of(final_acc), "%.3f"),
                         report::spread_text(spread_of(solve), "%.1f")});
    }
    md << "## Repeats and intervals\n\nThe table above holds each row's first repeat; here every row over its "
          "repeats (seeds: the suite's seed + 0, 1, ...): mean ± standard deviation [95 % Student t interval of the "
          "mean]. Solve epoch: the first epoch at token accuracy 0.99 or more; a run that never got there counts "
          "as its last epoch + 1.\n\n"
       << report::markdown_table(t) << "\n";
  }
  if (!answers.empty())
    md << "## Questions\n\nThe seed's conclusions as paired comparisons over the repeats.\n\n"
       << report::answers_markdown(answers) << "\n";
  return md.str();
}

}  // namespace hymba::synth
