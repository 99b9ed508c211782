#include "ablate/results.h"

#include "report/report_kit.h"
#include "ablate/seed_metrics.h"

#include <cstdio>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "model/summary.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

using nlohmann::json;

namespace {

json samples_to_json(const std::vector<Sample>& samples) {
  json out = json::array();
  for (const Sample& s : samples) out.push_back({{"prompt", s.prompt}, {"text", s.text}});
  return out;
}

}  // namespace

double RowResult::steps_per_s() const {
  // train_tokens_per_s is tokens over the time spent in training steps.
  return train_tokens > 0 ? train_tokens_per_s * static_cast<double>(steps) / static_cast<double>(train_tokens) : 0.0;
}

std::optional<double> layer_mean(const std::vector<double>& mixing) {
  if (mixing.empty()) return std::nullopt;
  double s = 0.0;
  for (double v : mixing) s += v;
  return s / static_cast<double>(mixing.size());
}

std::optional<double> RowResult::mean_attention_mixing() const { return layer_mean(attention_mixing); }

void fill_seed_figures(RowResult& r) {
  const ModelConfig cfg = ModelConfig::from_json(r.config, "row '" + r.id + "' config");
  r.layers = cfg.num_hidden_layers;
  const ConfiguredDims d = configured_dims(cfg);
  r.dims_ratio = d.ratio;
  r.dims_attention_share = d.attention_share;
  r.kv_reduction_seed000 = seed000_kv_reduction(cfg);
  r.seed002_cache_context = kSeed002CacheContext;
  r.seed002_cache_mb = seed002_cache_mb(cfg, kSeed002CacheContext);
  r.engine_cache_mb_seed002 =
      static_cast<double>(summarize(cfg, kSeed002CacheContext).kv_cache_bytes(2)) / (1024.0 * 1024.0);
}

json RowResult::to_json() const {
  const json samples_json = samples_to_json(samples);
  json curve_json = json::array();
  for (const CurvePoint& p : curve) {
    json point = {{"step", p.step}, {"val_loss", p.val_loss}, {"val_ppl", p.val_ppl}, {"val_accuracy", p.val_accuracy}};
    if (!p.attention_mixing.empty()) point["attention_mixing"] = p.attention_mixing;
    curve_json.push_back(point);
  }
  json train_curve_json = json::array();
  for (const TrainPoint& p : train_curve) train_curve_json.push_back({p.step, p.loss});
  return {{"id", id},
          {"name", name},
          {"source", source},
          {"repeat", repeat},
          {"seed", seed},
          {"implementation", implementation},
          {"config", config},
          {"params", params},
          {"layers", layers},
          {"dims_ratio", dims_ratio},
          {"dims_attention_share", dims_attention_share},
          {"attention_params", attention_params},
          {"mamba_params", mamba_params},
          {"attn_mamba_ratio", attn_mamba_ratio},
          {"attention_share", attention_share},
          {"best_val_loss", best_val_loss},
          {"best_val_ppl", best_val_ppl},
          {"best_step", best_step},
          {"final_val_loss", final_val_loss},
          {"final_val_ppl", final_val_ppl},
          {"final_val_accuracy", final_val_accuracy},
          {"steps", steps},
          {"train_tokens", train_tokens},
          {"train_tokens_per_s", train_tokens_per_s},
          {"train_seconds", train_seconds},
          {"decode_tokens_per_s", decode_tokens_per_s},
          {"group", group},
          {"seq_len", seq_len},
          {"batch", batch},
          {"peak_rss_mb", peak_rss_mb},
          {"activation_peak_mb", activation_peak_mb},
          {"est_train_memory_mb", est_train_memory_mb},
          {"peak_rss_scope", peak_rss_scope},
          {"cache_context", cache_context},
          {"kv_cache_mb", kv_cache_mb},
          {"mamba_state_mb", mamba_state_mb},
          {"kv_reduction", kv_reduction ? json(*kv_reduction) : json()},
          {"kv_reduction_seed000", kv_reduction_seed000},
          {"seed002_cache_mb", seed002_cache_mb},
          {"engine_cache_mb_seed002", engine_cache_mb_seed002},
          {"seed002_cache_context", seed002_cache_context},
          {"attention_mixing", attention_mixing},
          {"samples", samples_json},
          {"untrained_samples", samples_to_json(untrained_samples)},
          {"curve", curve_json},
          {"train_curve", train_curve_json}};
}

namespace {

template <class T>
T get(const json& j, const char* key) {
  HYMBA_CHECK(j.contains(key), "field '", key, "' is missing");
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    HYMBA_CHECK(v.is_string(), "field '", key, "' is not a string");
  } else if constexpr (std::is_integral_v<T>) {
    HYMBA_CHECK(v.is_number_integer(), "field '", key, "' is not an integer");
  } else {
    HYMBA_CHECK(v.is_number(), "field '", key, "' is not a number");
  }
  return v.get<T>();
}

}  // namespace

RowResult RowResult::from_json(const json& j, uint64_t default_seed) {
  HYMBA_CHECK(j.is_object(), "not a JSON object");
  RowResult r;
  r.id = get<std::string>(j, "id");
  r.repeat = j.contains("repeat") ? get<int64_t>(j, "repeat") : 0;
  HYMBA_CHECK(r.repeat >= 0, "field 'repeat' is negative");
  HYMBA_CHECK(!j.contains("seed") || j["seed"].is_number_unsigned(), "field 'seed' is not a non-negative integer");
  r.seed = j.contains("seed") ? j["seed"].get<uint64_t>() : default_seed;
  r.name = get<std::string>(j, "name");
  r.source = get<std::string>(j, "source");
  HYMBA_CHECK(j.contains("config") && j["config"].is_object(), "field 'config' is missing or not an object");
  r.config = j["config"];
  r.params = get<int64_t>(j, "params");
  r.attention_params = get<int64_t>(j, "attention_params");
  r.mamba_params = get<int64_t>(j, "mamba_params");
  r.attn_mamba_ratio = get<std::string>(j, "attn_mamba_ratio");
  r.attention_share = get<double>(j, "attention_share");
  r.best_val_loss = get<double>(j, "best_val_loss");
  r.best_val_ppl = get<double>(j, "best_val_ppl");
  r.best_step = get<int64_t>(j, "best_step");
  r.final_val_loss = get<double>(j, "final_val_loss");
  r.final_val_ppl = get<double>(j, "final_val_ppl");
  r.final_val_accuracy = get<double>(j, "final_val_accuracy");
  r.steps = get<int64_t>(j, "steps");
  r.train_tokens = get<int64_t>(j, "train_tokens");
  r.train_tokens_per_s = get<double>(j, "train_tokens_per_s");
  r.train_seconds = get<double>(j, "train_seconds");
  r.decode_tokens_per_s = get<double>(j, "decode_tokens_per_s");
  r.cache_context = get<int64_t>(j, "cache_context");
  r.kv_cache_mb = get<double>(j, "kv_cache_mb");
  r.mamba_state_mb = get<double>(j, "mamba_state_mb");
  HYMBA_CHECK(j.contains("kv_reduction") && (j["kv_reduction"].is_null() || j["kv_reduction"].is_number()),
              "field 'kv_reduction' is missing or not a number/null");
  if (j["kv_reduction"].is_number()) r.kv_reduction = j["kv_reduction"].get<double>();
  auto read_samples = [&](const char* key, std::vector<Sample>& out) {
    HYMBA_CHECK(j[key].is_array(), "field '", key, "' is not an array");
    for (const json& s : j[key]) {
      HYMBA_CHECK(s.is_object(), "field '", key, "' holds a non-object");
      out.push_back({get<std::string>(s, "prompt"), get<std::string>(s, "text")});
    }
  };
  HYMBA_CHECK(j.contains("samples"), "field 'samples' is missing");
  read_samples("samples", r.samples);
  // Fields of later versions: optional, config-derived ones recomputed.
  if (j.contains("untrained_samples")) read_samples("untrained_samples", r.untrained_samples);
  if (j.contains("implementation")) r.implementation = get<std::string>(j, "implementation");
  if (j.contains("seq_len")) {  // the T axis and memory figures came later
    r.group = get<std::string>(j, "group");
    r.seq_len = get<int64_t>(j, "seq_len");
    r.batch = get<int64_t>(j, "batch");
    r.peak_rss_mb = get<double>(j, "peak_rss_mb");
    r.activation_peak_mb = get<double>(j, "activation_peak_mb");
    r.est_train_memory_mb = get<double>(j, "est_train_memory_mb");
    r.peak_rss_scope = get<std::string>(j, "peak_rss_scope");
  }
  if (j.contains("attention_mixing")) {
    HYMBA_CHECK(j["attention_mixing"].is_array(), "field 'attention_mixing' is not an array");
    for (const json& v : j["attention_mixing"]) {
      HYMBA_CHECK(v.is_number(), "field 'attention_mixing' holds a non-number");
      r.attention_mixing.push_back(v.get<double>());
    }
  }
  if (j.contains("kv_reduction_seed000")) {
    r.layers = get<int64_t>(j, "layers");
    r.dims_ratio = get<std::string>(j, "dims_ratio");
    r.dims_attention_share = get<double>(j, "dims_attention_share");
    r.kv_reduction_seed000 = get<double>(j, "kv_reduction_seed000");
    r.seed002_cache_mb = get<double>(j, "seed002_cache_mb");
    r.engine_cache_mb_seed002 = get<double>(j, "engine_cache_mb_seed002");
    r.seed002_cache_context = get<int64_t>(j, "seed002_cache_context");
  } else {
    fill_seed_figures(r);  // a record from before the seed definitions
  }
  HYMBA_CHECK(j.contains("curve") && j["curve"].is_array(), "field 'curve' is missing or not an array");
  for (const json& p : j["curve"]) {
    HYMBA_CHECK(p.is_object(), "field 'curve' holds a non-object");
    r.curve.push_back({get<int64_t>(p, "step"), get<double>(p, "val_loss"), get<double>(p, "val_ppl"),
                       get<double>(p, "val_accuracy"), {}});
    if (p.contains("attention_mixing")) {
      HYMBA_CHECK(p["attention_mixing"].is_array(), "field 'curve.attention_mixing' is not an array");
      for (const json& v : p["attention_mixing"]) {
        HYMBA_CHECK(v.is_number(), "field 'curve.attention_mixing' holds a non-number");
        r.curve.back().attention_mixing.push_back(v.get<double>());
      }
    }
  }
  if (j.contains("train_curve")) {
    HYMBA_CHECK(j["train_curve"].is_array(), "field 'train_curve' is not an array");
    for (const json& p : j["train_curve"]) {
      HYMBA_CHECK(p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number(),
                  "field 'train_curve' holds something other than [step, loss]");
      r.train_curve.push_back({p[0].get<int64_t>(), p[1].get<double>()});
    }
  }
  HYMBA_CHECK(r.params > 0 && r.best_val_ppl > 0 && r.steps > 0, "figures out of range (params, best_val_ppl, steps)");
  return r;
}

const std::vector<std::string>& result_columns() {
  static const std::vector<std::string> cols = {
      "id",           "model",         "implementation",  "params_m",        "layers",
      "attn_mamba_ratio", "attention_share", "dims_attn_mamba_ratio", "dims_attention_share",
      "best_val_loss", "best_val_ppl", "final_val_loss",  "final_val_ppl",    "val_accuracy",
      "train_tok_s",  "train_time_s",  "decode_tok_s",    "kv_cache_mb",      "mamba_state_mb",
      "cache_context", "kv_reduction", "kv_reduction_seed000", "seed002_cache_mb", "seed002_cache_context",
      "s_per_100_tokens", "steps_per_s", "attention_mixing", "steps", "group", "seq_len", "batch",
      "peak_rss_mb", "activation_peak_mb", "est_train_memory_mb", "repeat", "seed"};
  return cols;
}

void write_results_json(const std::string& path, const json& header, const std::vector<RowResult>& rows) {
  json j = header;
  j["rows"] = json::array();
  for (const RowResult& r : rows) j["rows"].push_back(r.to_json());
  write_text_atomic(path, j.dump(2) + "\n");
}

namespace {

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

json result_record(const RowResult& r) {
  const std::optional<double> mixing = r.mean_attention_mixing();
  return {{"id", r.id},
          {"model", r.name},
          {"implementation", r.implementation},
          {"params_m", r.params / 1e6},
          {"layers", r.layers},
          {"attn_mamba_ratio", r.attn_mamba_ratio},
          {"attention_share", r.attention_share},
          {"dims_attn_mamba_ratio", r.dims_ratio},
          {"dims_attention_share", r.dims_attention_share},
          {"best_val_loss", r.best_val_loss},
          {"best_val_ppl", r.best_val_ppl},
          {"final_val_loss", r.final_val_loss},
          {"final_val_ppl", r.final_val_ppl},
          {"val_accuracy", r.final_val_accuracy},
          {"train_tok_s", r.train_tokens_per_s},
          {"train_time_s", r.train_seconds},
          {"decode_tok_s", r.decode_tokens_per_s},
          {"kv_cache_mb", r.kv_cache_mb},
          {"mamba_state_mb", r.mamba_state_mb},
          {"cache_context", r.cache_context},
          {"kv_reduction", r.kv_reduction ? json(*r.kv_reduction) : json()},
          {"kv_reduction_seed000", r.kv_reduction_seed000},
          {"seed002_cache_mb", r.seed002_cache_mb},
          {"seed002_cache_context", r.seed002_cache_context},
          {"s_per_100_tokens", seconds_per_100_tokens(r.decode_tokens_per_s)},
          {"steps_per_s", r.steps_per_s()},
          {"attention_mixing", mixing ? json(*mixing) : json()},
          {"steps", r.steps},
          {"group", r.group},
          {"seq_len", r.seq_len},
          {"batch", r.batch},
          {"peak_rss_mb", r.peak_rss_mb},
          {"activation_peak_mb", r.activation_peak_mb},
          {"est_train_memory_mb", r.est_train_memory_mb},
          {"repeat", r.repeat},
          {"seed", r.seed}};
}

void write_results_csv(const std::string& path, const std::vector<RowResult>& rows) {
  std::ostringstream out;
  const auto& cols = result_columns();
  for (size_t i = 0; i < cols.size(); ++i) out << (i ? "," : "") << cols[i];
  out << "\n";
  for (const RowResult& r : rows) {
    const std::vector<std::string> f = {csv_field(r.id),
                                        csv_field(r.name),
                                        csv_field(r.implementation),
                                        num(r.params / 1e6, 4),
                                        std::to_string(r.layers),
                                        r.attn_mamba_ratio,
                                        num(r.attention_share, 4),
                                        r.dims_ratio,
                                        num(r.dims_attention_share, 4),
                                        num(r.best_val_loss, 4),
                                        num(r.best_val_ppl, 3),
                                        num(r.final_val_loss, 4),
                                        num(r.final_val_ppl, 3),
                                        num(r.final_val_accuracy, 4),
                                        num(r.train_tokens_per_s, 0),
                                        num(r.train_seconds, 1),
                                        num(r.decode_tokens_per_s, 1),
                                        num(r.kv_cache_mb, 3),
                                        num(r.mamba_state_mb, 3),
                                        std::to_string(r.cache_context),
                                        r.kv_reduction ? num(*r.kv_reduction, 2) : "",
                                        num(r.kv_reduction_seed000, 4),
                                        num(r.seed002_cache_mb, 3),
                                        std::to_string(r.seed002_cache_context),
                                        num(seconds_per_100_tokens(r.decode_tokens_per_s), 3),
                                        num(r.steps_per_s(), 3),
                                        r.mean_attention_mixing() ? num(*r.mean_attention_mixing(), 4) : "",
                                        std::to_string(r.steps),
                                        csv_field(r.group),
                                        std::to_string(r.seq_len),
                                        std::to_string(r.batch),
                                        num(r.peak_rss_mb, 1),
                                        num(r.activation_peak_mb, 2),
                                        num(r.est_train_memory_mb, 1),
                                        std::to_string(r.repeat),
                                        std::to_string(r.seed)};
    for (size_t i = 0; i < f.size(); ++i) out << (i ? "," : "") << f[i];
    out << "\n";
  }
  write_text_atomic(path, out.str());
}

namespace {

const json* find_path(const json& j, std::initializer_list<const char*> keys) {
  const json* at = &j;
  for (const char* k : keys) {
    if (!at->is_object() || !at->contains(k)) return nullptr;
    at = &(*at)[k];
  }
  return at;
}

}  // namespace

StoredResults read_results_json(const std::string& path) {
  json j;
  try {
    j = read_json_file(path);
  } catch (const Error& e) {
    fail(e.what(), "; fix it or delete it to re-measure every row");
  }
  HYMBA_CHECK(j.is_object() && j.contains("rows") && j["rows"].is_array(), path,
              ": not a results file (no 'rows' array); fix it or delete it");
  StoredResults out;
  out.header = j;
  out.header.erase("rows");
  // Records from before repeats trained with the suite's one seed.
  uint64_t suite_seed = 0;
  if (const json* seed = find_path(j, {"settings", "train", "seed"}); seed && seed->is_number_unsigned())
    suite_seed = seed->get<uint64_t>();
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const json& row = j["rows"][i];
    try {
      out.rows.push_back(RowResult::from_json(row, suite_seed));
    } catch (const Error& e) {
      std::string label = "rows[" + std::to_string(i) + "]";
      if (row.is_object() && row.contains("id") && row["id"].is_string()) label += " ('" + row["id"].get<std::string>() + "')";
      out.corrupt.push_back(path + ": " + label + " is corrupt: " + e.what());
    }
  }
  return out;
}

}  // namespace hymba::ablate
