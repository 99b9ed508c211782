// Runs a `hymba synth` suite: trains every row (--repeats times), and writes
// DIR/results.json (settings and per-epoch figures of every run; a rerun
// skips runs measured under the same settings), results.csv (a line per
// run), report.md, report.html and the accuracy and loss charts in
// DIR/plots (PNG and SVG, through gnuplot).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/questions.h"
#include "synth/suite.h"

namespace hymba::synth {

struct SuiteRunOptions {
  std::string out_dir;
  std::string gnuplot = "gnuplot";  // "" skips the plots
  bool quiet = false;               // no per-epoch lines
  // Under mpirun: ranks that train each row data-parallel (must divide the
  // ranks); 1: every rank trains rows of its own.
  int ranks_per_row = 1;
  // Runs per row with seeds seed + 0 .. repeats - 1 (the report adds means,
  // 95 % intervals and the suite's questions); a rerun with more adds the
  // missing repeats.
  int64_t repeats = 1;
  std::FILE* log = stdout;
};

struct RowRecord {
  std::string id, name;
  int64_t repeat = 0;  // which run of the row (0 = the first)
  uint64_t seed = 0;   // its training seed (train.seed)
  nlohmann::json task, arch, train;  // the settings it ran under
  std::optional<ReferenceFigures> reference;
  RunResult result;
  nlohmann::json to_json() const;
  static RowRecord from_json(const nlohmann::json& j);  // errors name the field
};

struct SuiteRunSummary {
  std::vector<RowRecord> rows;  // repeat 0 of each row, in the suite's order
  std::vector<RowRecord> runs;  // every run, repeat-major
  std::vector<report::Answer> answers;
  int64_t trained = 0, skipped = 0;
  bool plots_written = false;
  std::string report_md, report_html;
};

SuiteRunSummary run_synth_suite(const SynthSuite& suite, const SuiteRunOptions& opt);

// The report table as markdown (also printed by `hymba synth`).
std::string synth_markdown_table(const std::vector<RowRecord>& rows);

}  // namespace hymba::synth
