// The study budget (`hymba ablate --budget study`): per built-in suite the
// model scale, recipe keys and repeats docs/results.md measures the seeds'
// questions at, chosen from the seed-to-seed spread measured on a 2-core
// machine (docs/results.md, "Choosing the budget").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace hymba::ablate {

struct StudyBudget {
  std::string scale;                                // preset scale of the rows
  nlohmann::json train = nlohmann::json::object();  // recipe keys over the suite's
  int64_t repeats = 3;
};

// The budget of a built-in suite; an error naming --budget for one without.
StudyBudget study_budget(const std::string& suite);

}  // namespace hymba::ablate
