// The suite report: report.md (the table, best values in bold), gnuplot
// charts in PNG and SVG (validation curves, best-PPL bars, parameters vs
// PPL, decode throughput vs cache size) and report.html with all of it and
// the generated samples. Without gnuplot the report is written without plots.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ablate/repeats.h"
#include "ablate/results.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

struct ReportInfo {
  std::string dir;
  std::string suite, title, scale;
  std::string seed;  // the seed notebook the suite reproduces, or ""
  bool sorted_by_ppl = false;
  nlohmann::json settings;
  std::string gnuplot = "gnuplot";  // "" skips the plots
  std::vector<SkippedRow> skipped;  // rows not run, listed with their reason
  // Each row over its repeats (by id; empty: one run per row, no spread) and
  // the suite's questions answered from the repeats.
  std::vector<RowSpread> spreads;
  std::vector<Answer> answers;
};

struct ReportFiles {
  std::string markdown, html;
  bool plots_written = false;
  std::string plots_note;  // why plots were skipped, when they were
};

// The names of the charts every report has, without extension (each is
// written as .png and .svg); seed suites add their own (seed_report.h).
const std::vector<std::string>& plot_names();

// The markdown table of the rows (also printed by `hymba ablate`).
std::string markdown_table(const std::vector<RowResult>& rows);

ReportFiles write_report(const ReportInfo& info, const std::vector<RowResult>& rows);

// One sentence for the report when the rows' decode tok/s cannot be told
// apart (one timing per row, or the fastest and slowest rows' 95 % intervals
// overlap); "" when they can.
std::string decode_noise_note(const std::vector<RowSpread>& spreads);

}  // namespace hymba::ablate
