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
  std::vector<double> attention_mixing;  // per layer at this step (learned-beta fusion), else empty
};

// The training loss at a logged step: its mean over the log interval.
struct TrainPoint {
  int64_t step = 0;
  double loss = 0.0;
};

struct Sample {
  std::string prompt, text;
};

// A row a suite did not run, and why (seed-003-long: over the memory
// available). Not stored in results.json: a rerun decides again.
struct SkippedRow {
  std::string id, name, group;
  int64_t seq_len = 0, batch = 0;
  double est_train_memory_mb = 0.0;
  std::string reason;
};

// The attention mixing averaged over the layers (learned-beta fusion's
// per-layer shares); nullopt when there are none.
std::optional<double> layer_mean(const std::vector<double>& mixing);

struct RowResult {
  std::string id, name, source;
  // Which training of the row this is (0 = the first; --repeats N trains
  // repeats 0 .. N-1) and the seed it trained with (ablate/repeats.h).
  int64_t repeat = 0;
  uint64_t seed = 0;
  std::string group;  // its line in plots against T ("" = none)
  std::string implementation;  // seed 001's "Mine" / "Official"; "" when the suite does not say
  nlohmann::json config;  // the row's model config as trained (unresolved JSON)
  int64_t params = 0;
  int64_t layers = 0;
  int64_t attention_params = 0, mamba_params = 0;
  std::string attn_mamba_ratio;  // measured parameters: "1:5.23", "1:0" (no Mamba) or "0:1" (no attention)
  double attention_share = 0.0;  // attention / (attention + Mamba) parameters
  // Seed 002's ParamRatio / AttnShare: from the configured branch widths.
  std::string dims_ratio;
  double dims_attention_share = 0.0;
  double best_val_loss = 0.0, best_val_ppl = 0.0;
  int64_t best_step = 0;
  double final_val_loss = 0.0, final_val_ppl = 0.0, final_val_accuracy = 0.0;
  int64_t steps = 0, train_tokens = 0;
  double train_tokens_per_s = 0.0, train_seconds = 0.0;
  double decode_tokens_per_s = 0.0;  // batch 1, from the best checkpoint
  int64_t seq_len = 0, batch = 0;    // the row's training T and sequences per step
  // Training memory: peak RSS of the training run (process-wide where the
  // kernel cannot reset the mark: peak_rss_scope "process"), the activation
  // arena's high-water mark, and the estimate the skip rule uses (parameters,
  // gradients, AdamW moments and arena). MiB; 0 = not measured.
  double peak_rss_mb = 0.0, activation_peak_mb = 0.0, est_train_memory_mb = 0.0;
  std::string peak_rss_scope;
  int64_t cache_context = 0;         // tokens the cache figures are for
  double kv_cache_mb = 0.0, mamba_state_mb = 0.0;  // fp16, one sequence
  std::optional<double> kv_reduction;  // vs the same model without KV sharing/SWA; none without attention
  double kv_reduction_seed000 = 1.0;   // seed 000: attention layers / K/V owners (ablate/seed_metrics.h)
  double seed002_cache_mb = 0.0;       // seed 002's Cache(MB) at seed002_cache_context
  double engine_cache_mb_seed002 = 0.0;  // the engine's KV cache (fp16 MiB) at the same context
  int64_t seed002_cache_context = 0;
  // Learned-beta fusion after training: per layer mean|beta_attn| /
  // (mean|beta_attn| + mean|beta_mamba|) (seed 003's mixing share); empty
  // for other fusions.
  std::vector<double> attention_mixing;
  std::vector<Sample> samples;
  std::vector<Sample> untrained_samples;  // the same prompts from the freshly initialised model
  std::vector<CurvePoint> curve;
  std::vector<TrainPoint> train_curve;  // empty in results from before it was kept

  // Training steps per second of training time (seed 003's steps/s).
  double steps_per_s() const;
  // Seed 003's average mixing share; nullopt without learned-beta fusion.
  std::optional<double> mean_attention_mixing() const;

  nlohmann::json to_json() const;
  // Throws hymba::Error naming the missing or mistyped field.
  // Figures added after the first results format (seed definitions, layers)
  // are recomputed from `config` when a stored record lacks them; a record
  // from before repeats is repeat 0 with `default_seed` (the suite's seed).
  static RowResult from_json(const nlohmann::json& j, uint64_t default_seed = 0);
};

// Fills the config-derived seed figures (layers, dims ratio and share, seed
// 000's KV reduction, seed 002's cache) from `config`.
void fill_seed_figures(RowResult& r);

// The columns of results.csv and report.md, in order.
const std::vector<std::string>& result_columns();
// A row's value for each of result_columns(), unrounded, null where the CSV
// leaves the cell empty (the Python package's DataFrame rows).
nlohmann::json result_record(const RowResult& r);

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
