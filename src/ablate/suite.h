// Ablation suites: named lists of models trained under one recipe. The
// built-in suites reproduce the seed notebooks' experiments; a JSON file
// defines a user suite (docs/ablation.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/questions.h"
#include "model/presets.h"
#include "train/trainer.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

struct SuiteRow {
  std::string id;      // directory name under DIR/runs, unique in the suite
  std::string name;    // as the paper or seed names it
  std::string source;  // "preset NAME (scale)" or the config file
  nlohmann::json config;  // unresolved model config JSON (scale and overrides applied)
  std::string implementation;  // seed 001's "Mine" / "Official" ("" = not said)
  // Recipe keys of this row alone, over the suite's (seed-003-long: its T,
  // batch and validation windows); flags still win.
  nlohmann::json train = nlohmann::json::object();
  std::string group;    // the line it belongs to in plots against T ("" = none)
  int64_t seq_len = 0;  // T of a suite with a T axis, else 0
};

// How the report's samples are drawn. Every field is explicit: the sampler's
// own default top-p (0.95) never applies silently.
struct SampleSettings {
  int64_t tokens = 0;  // tokens per sample; 0 = --sample-tokens (the decode-timing length)
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 1.0;      // 1 = no top-p
  bool untrained = false;  // also sample the freshly initialised model (seed 001 does)
  nlohmann::json to_json() const;
};

enum class SortOrder { kRows, kBestPpl };

struct Suite {
  std::string name;
  std::string title;
  SortOrder sort = SortOrder::kRows;
  // Training recipe: keys of apply_train_settings(); the same for every row.
  nlohmann::json train = nlohmann::json::object();
  std::vector<std::string> prompts;  // sample prompts
  SampleSettings sampling;
  // The seed notebook the suite reproduces ("000" ... "003"), or "": selects
  // the seed's own table, conclusions and plots in the report.
  std::string seed;
  std::vector<SuiteRow> rows;
  // A T axis (seed-003-long): the lengths, and the tokens per optimizer step
  // the rows' batches keep (batch = tokens_per_step / T).
  std::vector<int64_t> seq_lens;
  int64_t tokens_per_step = 0;
  // Rows whose estimated training memory exceeds what is available are
  // skipped with the reason in the report, instead of stopping the suite.
  bool skip_over_memory = false;
  // The questions a suite file asks (its "questions"); built-in suites ask
  // their seed's (ablate/seed_questions.h).
  std::vector<Question> questions;
};

// Choices a built-in suite takes besides its scale.
struct SuiteChoices {
  std::string scale;              // "" = the suite file's, else seed
  std::string transformer;        // seed-003 suites: "gpt" (default) or "rope"
  std::vector<int64_t> seq_lens;  // seed-003-long: the T values (default 256 ... 4096)
  // hymba-roadmap suites, row 10 "6) + Same KV compression": "paper" (GQA,
  // SWA and KV sharing, the default) or "gqa-only" (seed 002's code: row 6 with GQA).
  std::string same_kv_compression;
};

// Names of the built-in suites with one-line descriptions.
struct SuiteInfo {
  std::string name, description;
};
const std::vector<SuiteInfo>& builtin_suites();

// A built-in suite by name, or a user suite read from a .json file. `scale`
// applies to preset rows; a user file may name its own (used when scale is
// empty). Errors name the suite file and field.
Suite load_suite(const std::string& name_or_file, const std::string& scale);
// The same with the choices; a choice the suite does not have is an error
// naming its flag (--transformer, --seq-lens).
Suite load_suite(const std::string& name_or_file, const SuiteChoices& choices);

// Applies sampling keys (tokens, temperature, top_k, top_p, untrained);
// unknown keys and bad values are errors naming `source` and the key.
void apply_sampling_settings(SampleSettings& s, const nlohmann::json& settings, const std::string& source);

// Applies recipe keys (steps, batch, seq_len, lr, ...) to TrainOptions.
// Unknown keys and wrong types are errors naming `source` and the key.
void apply_train_settings(TrainOptions& opt, const nlohmann::json& settings, const std::string& source);
// The recipe keys and their current values in `opt` (for results.json).
nlohmann::json train_settings_json(const TrainOptions& opt);

}  // namespace hymba::ablate
