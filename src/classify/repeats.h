// Repeated rows of `hymba classify suite` (--repeats N): seed 004's
// questions and the report's section on each row over its repeats, from the
// run records of results.json (ablate/questions.h does the arithmetic).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/questions.h"

namespace hymba::classify {

// Seed 004's conclusions for its IMDB table (metric: validation accuracy).
std::vector<report::Question> classify_questions(const std::string& suite);

// Each question answered from the run records (`id`, `repeat`,
// `engine.val_acc` / `engine.macro_f1`), paired by repeat.
std::vector<report::Answer> answer_classify_questions(const std::vector<report::Question>& questions,
                                                      const nlohmann::json& runs);

// The rows over their repeats (mean ± sd [95 % interval] of validation
// accuracy and macro-F1) when any row has more than one, then the answers.
std::string classify_repeats_markdown(const nlohmann::json& runs, const std::vector<report::Answer>& answers);

}  // namespace hymba::classify
