// Repeated trainings of a suite's rows (--repeats N): the seed and run
// directory of each repeat, a row's figures over its repeats (mean, spread,
// 95 % interval, the validation curve's band) and the suite's questions
// answered from them (ablate/questions.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/questions.h"
#include "ablate/results.h"
#include "core/stats.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

// Repeat r of a suite whose seed is `base` trains with base + r: repeat 0 is
// the run a suite without repeats makes, so a rerun with a larger N adds
// repeats to rows already measured.
uint64_t repeat_seed(uint64_t base, int64_t repeat);
// The run directory under DIR/runs: the row's id for repeat 0, else
// "<id>.rep<r>".
std::string repeat_run_name(const std::string& id, int64_t repeat);
// The key of one run in the results (row id and repeat).
std::string run_key(const std::string& id, int64_t repeat);

// A metric of a run by name (best_val_loss, best_val_ppl, final_val_loss,
// final_val_ppl, val_accuracy, train_tok_s, decode_tok_s, attention_mixing,
// activation_peak_mb, peak_rss_mb); nullopt when the run lacks it (mixing
// without learned-beta fusion). Unknown names throw.
std::optional<double> run_metric(const RowResult& r, const std::string& metric);
bool metric_lower_is_better(const std::string& metric);

struct CurveBand {
  int64_t step = 0;
  int64_t n = 0;  // repeats evaluated at this step
  double mean = 0.0, min = 0.0, max = 0.0, sd = 0.0;
};

// One row over its repeats.
struct RowSpread {
  std::string id, name;
  std::vector<int64_t> repeats;  // the repeat indices measured, ascending
  std::vector<uint64_t> seeds;   // their seeds, in the same order
  Spread best_val_loss, best_val_ppl, final_val_loss, final_val_ppl, accuracy, train_tokens_per_s,
      decode_tokens_per_s, mixing;
  std::vector<CurveBand> val_loss_band;  // validation loss per evaluated step
  // The attention mixing averaged over the layers, per evaluated step that
  // logged it (learned-beta fusion only; empty otherwise).
  std::vector<CurveBand> mixing_band;
};

// `runs` all hold one row (the same id). The row's record for the tables:
// the first repeat's (config, samples) with every measured figure the mean
// over the runs and the validation curve their mean per step.
RowResult mean_row(std::vector<RowResult> runs);
RowSpread row_spread(const std::vector<RowResult>& runs);

// The runs of row `id`, in repeat order.
std::vector<RowResult> runs_of(const std::vector<RowResult>& all_runs, const std::string& id);

// Each question answered from every run of the suite (paired by repeat).
std::vector<Answer> answer_questions(const std::vector<Question>& questions, const std::vector<RowResult>& runs);

// DIR/intervals.json: each row over its repeats (repeats, seeds, mean, sd
// and 95 % interval of its figures, the validation-loss band) and the
// answered questions. Written atomically.
nlohmann::json spread_to_json(const RowSpread& s);
void write_intervals_json(const std::string& path, const std::vector<RowSpread>& rows,
                          const std::vector<Answer>& answers);

// The table of rows over their repeats: mean ± sd and the 95 % interval of
// the main figures.
std::string spread_markdown(const std::vector<RowSpread>& rows);

}  // namespace hymba::ablate
