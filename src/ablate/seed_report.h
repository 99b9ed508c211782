// The seed notebooks' own outputs, computed from a suite's results: each
// seed's table with its column definitions, seed 001's analysis (means per
// implementation, best model, the conclusions it prints, its four plots),
// and how every row's run differs from the seed's.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_kit.h"
#include "ablate/repeats.h"
#include "ablate/results.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

// Seed 001's section 4 and 7 figures. Rows are found by preset id
// (hybrid-mine, hybrid-nometa, hybrid-nokvshare, hybrid-official,
// official-nometa); a figure whose rows are missing is nullopt.
struct Seed001Analysis {
  std::optional<double> mean_ppl_mine, mean_ppl_official;
  std::string best_model, best_implementation;
  double best_ppl = 0.0;
  std::optional<double> delta_no_meta_mine;      // Hybrid-NoMeta - Hybrid-Mine
  std::optional<double> delta_no_kv_share;       // Hybrid-NoKVShare - Hybrid-Mine
  std::optional<double> delta_no_meta_official;  // Official-NoMeta - Hybrid-Official
  std::optional<double> mine_minus_official;     // Hybrid-Mine - Hybrid-Official
};
Seed001Analysis analyse_seed001(const std::vector<RowResult>& rows);

// The seed's own table (its columns, its definitions) for seed "000" ...
// "003"; empty headers for another seed.
TextTable seed_table(const std::string& seed, const std::vector<RowResult>& rows, const nlohmann::json& settings);

// Markdown: the seed's table, seed 001's analysis and conclusions, and the
// differences from the seed (suite-wide and per row). "" without a seed.
std::string seed_section(const std::string& seed, const std::vector<RowResult>& rows, const nlohmann::json& settings,
                         const std::string& scale);

// The seed's own plots as (name, gnuplot commands), their data files written
// into `dir`: seed 001's four, seed 003's learned mixing against steps (rows
// that log it, banded by `spreads`). Empty for other seeds.
std::vector<std::pair<std::string, std::string>> seed_charts(const std::string& seed, const std::vector<RowResult>& rows,
                                                             const std::vector<RowSpread>& spreads,
                                                             const std::string& dir);
std::vector<std::pair<std::string, std::string>> seed001_charts(const std::vector<RowResult>& rows,
                                                                const std::string& dir);
std::pair<std::string, std::string> seed003_mixing_chart(const std::vector<RowResult>& rows,
                                                         const std::vector<RowSpread>& spreads,
                                                         const std::string& dir);

// The names of seed_charts() without writing anything.
std::vector<std::string> seed_chart_names(const std::string& seed, const std::vector<RowResult>& rows);

}  // namespace hymba::ablate
