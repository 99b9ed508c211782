// Seed 003 round 3's outputs from a `seed-003-long` run: the table against T
// (val loss, tok/s, training memory, learned mixing share), the seed's
// expectations beside what the rows show, how each row differs from the
// seed, and four plots against T with one line per architecture.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_kit.h"
#include "ablate/results.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

// Measured and skipped rows, grouped by architecture (in order of first
// appearance), ascending T within a group.
TextTable long_seq_table(const std::vector<RowResult>& rows, const std::vector<SkippedRow>& skipped);

// How a group's figures change from its smallest to its largest measured T.
struct LongSeqTrend {
  std::string group;
  int64_t from_t = 0, to_t = 0;
  double activation_ratio = 0.0, rss_ratio = 0.0, tokens_per_s_ratio = 0.0;
  double from_loss = 0.0, to_loss = 0.0;
  std::optional<double> from_mixing, to_mixing;  // learned-beta rows only
};
// One trend per group with at least two measured lengths.
std::vector<LongSeqTrend> long_seq_trends(const std::vector<RowResult>& rows);

// Markdown: the table, the seed's expectations and the trends, the
// differences from the seed (suite-wide and per row).
std::string long_seq_section(const std::vector<RowResult>& rows, const std::vector<SkippedRow>& skipped,
                             const nlohmann::json& settings, const std::string& scale);

// The charts against T as (name, gnuplot commands); writes long_seq.dat into
// `dir`. The mixing chart only when some row has learned mixing.
std::vector<std::pair<std::string, std::string>> long_seq_charts(const std::vector<RowResult>& rows,
                                                                 const std::string& dir);
// Their names, without writing anything.
std::vector<std::string> long_seq_chart_names(const std::vector<RowResult>& rows);

}  // namespace hymba::ablate
