// One suite row's measured figures, and the files that hold them:
// DIR/results.json (the record that lets a rerun skip finished rows) and
// DIR/results.csv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba::ablate {

struct CurvePoint {
  int64_t step = 0;
  double val_loss = 0.0, val_ppl = 0.0, val_accuracy = 0.0;
};

struct Sample {
  std::string prompt, text;
};

struct RowResult {
  std::string id, name, source;
  nlohmann::json config;  // the row's model config as trained (unresolved JSON)
  int64_t params = 0;
  int64_t attention_params = 0, mamba_params = 0;
  std::string attn_mamba_ratio;  // "1:5.23", "1:0" (no Mamba) or "0:1" (no attention)
  double attention_share = 0.0;  // attention / (attention + Mamba) parameters
  double best_val_loss = 0.0, best_val_ppl = 0.0;
  int64_t best_step = 0;
  double final_val_loss = 0.0, final_val_ppl = 0.0, final_val_accuracy = 0.0;
  int64_t steps = 0, train_tokens = 0;
  double train_tokens_per_s = 0.0, train_seconds = 0.0;
  double decode_tokens_per_s = 0.0;  // batch 1, from the best checkpoint
  int64_t cache_context = 0;         // tokens the cache figures are for
  double kv_cache_mb = 0.0, mamba_state_mb = 0.0;  // fp16, one sequence
  std::optional<double> kv_reduction;  // vs the same model without KV sharing/SWA; none without attention
  std::vector<Sample> samples;
  std::vector<CurvePoint> curve;

  nlohmann::json to_json() const;
  // Throws hymba::Error naming the missing or mistyped field.
  static RowResult from_json(const nlohmann::json& j);
};

// The columns of results.csv and report.md, in order.
const std::vector<std::string>& result_columns();

void write_results_json(const std::string& path, const nlohmann::json& header, const std::vector<RowResult>& rows);
void write_results_csv(const std::string& path, const std::vector<RowResult>& rows);

// Reads a results.json written by an earlier run. Rows that do not parse are
// returned in `corrupt` as messages naming the row and field (never dropped
// silently). Throws when the file itself is not valid JSON.
struct StoredResults {
  nlohmann::json header;
  std::vector<RowResult> rows;
  std::vector<std::string> corrupt;
};
StoredResults read_results_json(const std::string& path);

}  // namespace hymba::ablate
