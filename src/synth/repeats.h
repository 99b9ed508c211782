// Repeated runs of a synth suite (--repeats N): the metrics questions are
// asked of, seed 004's questions, and the report's section on the rows over
// their repeats (ablate/questions.h does the arithmetic).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/questions.h"
#include "synth/runner.h"
#include "synth/suite.h"

namespace hymba::synth {

// Token accuracy at or above which a task counts as solved.
inline constexpr double kSolvedAccuracy = 0.99;

// A run's metric by name: best_acc, final_acc, final_macro_acc,
// final_eval_loss, solve_epoch (the first epoch at kSolvedAccuracy, or the
// epochs run + 1 when none reached it); unknown names throw.
double record_metric(const RowRecord& r, const std::string& metric);
bool synth_metric_lower_is_better(const std::string& metric);

// Seed 004's conclusions for its two suites, else the suite's own
// (`questions` of a suite file); none for other suites.
std::vector<report::Question> synth_questions(const SynthSuite& suite);

// Each question answered from every run (paired by repeat).
std::vector<report::Answer> answer_synth_questions(const std::vector<report::Question>& questions,
                                                   const std::vector<RowRecord>& runs);

// The rows over their repeats (mean ± sd [95 % interval] of best and final
// accuracy and the solve epoch) and the answered questions; "" with one
// repeat per row and no questions.
std::string synth_repeats_markdown(const SynthSuite& suite, const std::vector<RowRecord>& runs,
                                   const std::vector<report::Answer>& answers);

}  // namespace hymba::synth
