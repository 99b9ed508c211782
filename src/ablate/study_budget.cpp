#include "ablate/study_budget.h"

#include "core/error.h"

namespace hymba::ablate {

StudyBudget study_budget(const std::string& suite) {
  // Tiny models, 300 steps of 8 x 256 tokens: about 5 min per run on 2 cores,
  // so a suite of 8 rows at 3 repeats fits in about 2 hours. Evaluations on
  // 64 validation windows every 100 steps keep the evaluation under a tenth
  // of the run; the warmup is the seeds' 10 % of the steps.
  const nlohmann::json lm = {{"steps", 300}, {"batch", 8},           {"seq_len", 256},
                             {"warmup", 30}, {"eval_interval", 100}, {"eval_windows", 64}};
  StudyBudget b;
  b.scale = "tiny";
  if (suite == "seed-000" || suite == "seed-ablation" || suite == "seed-003" || suite == "arch-compare" ||
      suite == "hymba-roadmap") {
    b.train = lm;
  } else if (suite == "seed-003-long") {
    b.train = lm;
    b.train.erase("seq_len");  // per row: T, with 4,096 tokens per step
    b.train.erase("batch");
  } else if (suite == "demo") {
    // Its own recipe (300 steps of 8 x 128) is the budget.
  } else {
    fail("--budget study: suite '", suite,
         "' has no study budget (seed-000, seed-ablation, hymba-roadmap, seed-003, "
         "seed-003-long, arch-compare and demo have)");
  }
  return b;
}

}  // namespace hymba::ablate
