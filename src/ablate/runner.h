// `hymba ablate`: trains every row of a suite under one recipe (same data,
// tokenizer, budget and seed), measures each, and writes the results and
// the report. A rerun skips rows already measured, resumes a row whose
// training was killed, and re-measures rows whose record is corrupt.
//
// DIR/tokenizer.model     the suite's one tokenizer (trained, or a copy of --tokenizer)
// DIR/runs/<row id>/      each row's training run (checkpoints, metrics);
//                         repeat r > 0 in DIR/runs/<row id>.rep<r>/
// DIR/results.json        settings + one record per measured run
// DIR/results.csv         one line per run
// DIR/intervals.json      each row over its repeats and the suite's questions answered
// DIR/report.md, report.html, plots/
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ablate/repeats.h"
#include "ablate/results.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

struct AblateOptions {
  std::string suite;             // built-in name or suite .json file
  std::string scale;             // "" = the suite file's, else seed
  std::string transformer;       // seed-003 suites: "gpt" (default) or "rope"
  std::vector<int64_t> seq_lens; // seed-003-long: T values (empty: the suite's)
  std::string same_kv_compression;  // hymba-roadmap row 10: "paper" (default) or "gqa-only"
  // Rows whose kv_reuse_group is "auto" (consecutive local pairs) take
  // "all_pairs" (every consecutive pair, global layers included: seed 002's).
  bool kv_reuse_all_pairs = false;
  std::string data = "default";  // corpus SPEC
  std::string tokenizer_file;    // --tokenizer: used instead of training one ("" = train)
  std::string out_dir;
  nlohmann::json train_overrides = nlohmann::json::object();  // recipe keys from flags
  nlohmann::json model_overrides = nlohmann::json::object();  // config fields from flags, merged into every row
  nlohmann::json sampling_overrides = nlohmann::json::object();  // SampleSettings keys from flags
  std::vector<std::string> prompts;  // empty: the suite's
  int64_t cache_context = 4096;      // tokens the KV / Mamba state figures are for
  int64_t sample_tokens = 100;       // tokens generated per prompt (also times decoding)
  std::string gnuplot = "gnuplot";   // program name or path; "" skips the plots
  int threads = 0;
  // Under mpirun: the ranks that train each row data-parallel. The job's N
  // ranks form N / K groups; group g trains rows g, g + N/K, ... and rank 0
  // writes the results and report once every row is in.
  int ranks_per_row = 1;
  // Trainings per row, seeds --seed + 0 .. repeats - 1 (ablate/repeats.h).
  // A rerun with more adds the missing repeats to rows already measured.
  int64_t repeats = 1;
  bool quiet = false;           // no per-row progress bars
  bool plain_progress = false;  // periodic lines instead of bars
};

struct AblateSummary {
  std::vector<RowResult> rows;  // in the suite's report order, each the mean over its repeats
  std::vector<RowResult> runs;  // every measured run, rows in the order of `rows`, each in repeat order
  std::vector<RowSpread> spreads;  // each row over its repeats, in the order of `rows`
  std::vector<Answer> answers;     // the suite's questions (ablate/seed_questions.h)
  std::vector<SkippedRow> skipped_rows;  // rows not run (over the memory available)
  int64_t trained = 0, skipped = 0;
  bool plots_written = false;
  std::string report_md, report_html;
};

AblateSummary run_ablation(const AblateOptions& opt);

}  // namespace hymba::ablate
