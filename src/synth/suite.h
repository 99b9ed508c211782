// `hymba synth` suites: one task, one training recipe and several models,
// compared in one report. The built-in suites are seed 004's two experiments
// (with the seed's figures to set beside ours); a .json file defines others
// (docs/synth.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/questions.h"
#include "synth/tasks.h"
#include "synth/trainer.h"

namespace hymba::synth {

// Figures a source reported for a row (seed 004's table), shown beside ours.
struct ReferenceFigures {
  int64_t epoch = 0;
  double train_loss = 0, eval_loss = 0, eval_acc = 0;
};

struct SynthRow {
  std::string id;    // unique in the suite; results.json key
  std::string name;  // as the report shows it
  ArchSpec arch;
  nlohmann::json task = nlohmann::json::object();  // task settings of this row only (e.g. seq_len)
  std::optional<ReferenceFigures> reference;
};

struct SynthSuite {
  std::string name, title;
  TaskSpec task;
  TrainSettings train;
  std::string reference_source;  // who reported the reference figures ("" = none)
  std::vector<SynthRow> rows;
  // A suite file's questions (synth/repeats.h; metric default best_acc).
  std::vector<report::Question> questions;
};

struct SynthSuiteInfo {
  std::string name, description;
};
const std::vector<SynthSuiteInfo>& builtin_synth_suites();

// A built-in suite by name or a suite .json file; errors name the file and key.
SynthSuite load_synth_suite(const std::string& name_or_file);

// The row's task: the suite's with the row's settings applied.
TaskSpec row_task(const SynthSuite& suite, const SynthRow& row);

}  // namespace hymba::synth
