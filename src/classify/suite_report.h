// The records and report of `hymba classify suite` (classify/suite.h): one
// record per row (the seed's figures, ours, and every way the row differs
// from the seed's), results.csv and report.md / report.html.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/questions.h"
#include "report/report_kit.h"
#include "classify/suite.h"

namespace hymba::classify {

// A row's results.json record from its `classify train` summary; backbones
// maps each role to prepare_backbone's record (dir, origin, preset, ...).
nlohmann::json suite_row_record(const SeedClassifyRow& row, const nlohmann::json& trained,
                                const nlohmann::json& backbones, const ClassifySuiteOptions& opt);

// The seed's table beside ours: one line per row record.
report::TextTable suite_table(const nlohmann::json& rows);

struct SuiteReportFiles {
  std::string markdown, html, csv;
  std::vector<report::Answer> answers;  // the suite's questions over the repeats (classify/repeats.h)
};
// Writes results.csv (a line per run), report.md and report.html into dir
// (atomically) from results.json's contents; the tables hold each row's
// first repeat, a further section every row over its repeats.
SuiteReportFiles write_suite_report(const std::string& dir, const nlohmann::json& results);

}  // namespace hymba::classify
