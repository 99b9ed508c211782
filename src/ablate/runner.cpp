#include "ablate/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "ablate/long_suite.h"
#include "ablate/report.h"
#include "ablate/repeats.h"
#include "ablate/seed_questions.h"
#include "ablate/seed_metrics.h"
#include "ablate/suite.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "data/corpus.h"
#include "dist/communicator.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_files.h"
#include "infer/generate.h"
#include "formats/checkpoint.h"
#include "model/memory_estimate.h"
#include "model/mixing.h"
#include "model/model.h"
#include "model/summary.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace hymba::ablate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kResultsFormat = "hymba-ablate-results/1";
constexpr int kCacheBytesPerElement = 2;  // fp16, as the paper and seed 002 report caches

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The row's config with the suite tokenizer's vocabulary, as it trains.
ModelConfig row_config(const SuiteRow& row, int64_t vocab) {
  json j = row.config;
  j["vocab_size"] = vocab;
  return ModelConfig::from_json(j, row.source);
}

// Whether a measured run's config is the row's model: equal as written, or
// resolving to the same config (a key given at its default, such as
// --attention-dropout 0, is the key left out).
bool same_model(const json& measured, const SuiteRow& row, int64_t vocab) {
  if (measured == row.config) return true;
  SuiteRow earlier = row;
  earlier.config = measured;
  return row_config(earlier, vocab).to_json() == row_config(row, vocab).to_json();
}

// The same model without cross-layer KV sharing and with every attention
// layer global: the cache the reduction factor is measured against.
ModelConfig no_sharing_baseline(const SuiteRow& row, int64_t vocab) {
  json j = row.config;
  j["vocab_size"] = vocab;
  j["sliding_window"] = 0;
  j["global_attn_idx"] = json::array();
  j["kv_reuse_group"] = json::array();
  return ModelConfig::from_json(j, row.source + " (baseline without KV sharing or SWA)");
}

std::string ratio_label(int64_t attn, int64_t mamba) {
  if (attn == 0) return "0:1";
  if (mamba == 0) return "1:0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "1:%.2f", static_cast<double>(mamba) / static_cast<double>(attn));
  return buf;
}

// Figures that follow from the config alone.
void fill_model_figures(RowResult& r, const SuiteRow& row, int64_t vocab, int64_t context) {
  const ModelConfig cfg = row_config(row, vocab);
  const ModelSummary s = summarize(cfg, context);
  auto part = [&](const char* name) {
    const auto it = s.params_by_part.find(name);
    return it == s.params_by_part.end() ? int64_t{0} : it->second;
  };
  r.params = s.total_params;
  r.attention_params = part("attention");
  r.mamba_params = part("mamba");
  r.attn_mamba_ratio = ratio_label(r.attention_params, r.mamba_params);
  const int64_t mixer = r.attention_params + r.mamba_params;
  r.attention_share = mixer > 0 ? static_cast<double>(r.attention_params) / static_cast<double>(mixer) : 0.0;
  r.cache_context = context;
  r.kv_cache_mb = mib(s.kv_cache_bytes(kCacheBytesPerElement));
  r.mamba_state_mb = mib(s.mamba_state_bytes(kCacheBytesPerElement));
  r.kv_reduction.reset();
  if (s.kv_cache_elements > 0) {
    const ModelSummary base = summarize(no_sharing_baseline(row, vocab), context);
    r.kv_reduction = static_cast<double>(base.kv_cache_elements) / static_cast<double>(s.kv_cache_elements);
  }
  fill_seed_figures(r);
}

infer::GenerateOptions sample_options(const SampleSettings& s, int64_t tokens, uint64_t seed) {
  infer::GenerateOptions g;
  g.max_new_tokens = tokens;
  g.sampling.temperature = s.temperature;
  g.sampling.top_k = s.top_k;
  g.sampling.top_p = s.top_p;  // explicit: never the sampler's default
  g.sampling.seed = seed;
  g.stop_at_eos = false;  // every row decodes the same number of tokens
  return g;
}

std::vector<Sample> take_samples(infer::Decoder& decoder, const Tokenizer& tok, const std::vector<std::string>& prompts,
                                 const infer::GenerateOptions& g, int64_t* decoded, double* seconds);

// Calls `take` with each metrics.jsonl record holding `key`.
void for_each_record(const fs::path& metrics, const char* key, const std::function<void(const JsonFields&)>& take) {
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = parse_json(line, metrics.string());
    if (j.is_object() && j.contains(key)) take(JsonFields(j, metrics.string()));
  }
}

// The training loss as logged (the mean over each log interval), by step.
std::vector<TrainPoint> read_train_curve(const fs::path& metrics) {
  std::vector<TrainPoint> curve;
  for_each_record(metrics, "loss_avg", [&](const JsonFields& f) { curve.push_back({f.i64("step"), f.f64("loss_avg")}); });
  return curve;
}

std::vector<CurvePoint> read_curve(const fs::path& metrics) {
  std::vector<CurvePoint> curve;
  for_each_record(metrics, "val_loss", [&](const JsonFields& f) {
    curve.push_back({f.i64("step"), f.f64("val_loss"), f.f64("val_ppl"), f.has("val_accuracy") ? f.f64("val_accuracy") : 0.0, {}});
    const json& j = f.value();
    if (j.contains("attention_mixing") && j["attention_mixing"].is_array())
      for (const json& v : j["attention_mixing"])
        if (v.is_number()) curve.back().attention_mixing.push_back(v.get<double>());
  });
  return curve;
}

// Byte-level samples can end inside a character or hold stray bytes; the
// report files are UTF-8, so those bytes become U+FFFD.
std::string valid_utf8(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

std::vector<Sample> take_samples(infer::Decoder& decoder, const Tokenizer& tok, const std::vector<std::string>& prompts,
                                 const infer::GenerateOptions& g, int64_t* decoded, double* seconds) {
  std::vector<Sample> out;
  for (const std::string& p : prompts) {
    std::vector<int32_t> ids = tok.encode(p);
    if (ids.empty()) ids.push_back(tok.bos_id());
    infer::GenerateStats stats;
    const auto gen = infer::generate(decoder, tok, {ids}, g, {}, &stats);
    out.push_back({p, valid_utf8(gen.front().text)});
    if (decoded) *decoded += stats.decode_tokens;
    if (seconds) *seconds += stats.decode_seconds;
  }
  return out;
}

// Samples from the fixed prompts with the best checkpoint, one sequence at a
// time (batch 1, as the seeds time generation); returns decode tok/s, timed
// over `time_tokens` tokens per prompt. A suite with its own sample length
// (seed 001: 30) draws the reported samples separately at that length.
double sample_and_time(RowResult& r, const std::string& ckpt, const Tokenizer& tok,
                       const std::vector<std::string>& prompts, const SampleSettings& sampling, int64_t time_tokens,
                       uint64_t seed) {
  auto model = load_model(ckpt, false);
  r.attention_mixing = learned_attention_mixing(*model);
  infer::Decoder decoder(*model);
  const infer::GenerateOptions g = sample_options(sampling, time_tokens, seed);
  {
    // Untimed warm-up: first-touch page faults and thread start-up would
    // otherwise land in the first row's few hundred timed steps.
    infer::GenerateOptions warm = g;
    warm.max_new_tokens = std::min<int64_t>(time_tokens, 16);
    (void)take_samples(decoder, tok, {prompts.front()}, warm, nullptr, nullptr);
  }
  int64_t decoded = 0;
  double seconds = 0.0;
  r.samples = take_samples(decoder, tok, prompts, g, &decoded, &seconds);
  if (sampling.tokens > 0 && sampling.tokens != time_tokens)
    r.samples = take_samples(decoder, tok, prompts, sample_options(sampling, sampling.tokens, seed), nullptr, nullptr);
  return seconds > 0 ? static_cast<double>(decoded) / seconds : 0.0;
}

// Seed 001's samples "from the untrained model": the row's model freshly
// initialised with the run's seed, as training starts from it.
std::vector<Sample> untrained_samples(const ModelConfig& cfg, const Tokenizer& tok,
                                      const std::vector<std::string>& prompts, const SampleSettings& sampling,
                                      int64_t tokens, uint64_t seed) {
  Model model(cfg, false);
  model.init(seed);
  infer::Decoder decoder(model);
  return take_samples(decoder, tok, prompts, sample_options(sampling, tokens, seed), nullptr, nullptr);
}

// The suite's tokenizer in `dir` (tokenizer.model, or tokenizer.json with its
// tokenizer_config.json): on the first run a copy of `given` (--tokenizer),
// else trained; sets t.tokenizer_path.
std::unique_ptr<Tokenizer> suite_tokenizer(const fs::path& dir, TrainOptions& t, std::unique_ptr<Tokenizer> given) {
  if (const std::string path = checkpoint_tokenizer_path(dir.string()); !path.empty()) {
    t.tokenizer_path = path;
    return load_tokenizer(path);
  }
  std::unique_ptr<Tokenizer> tok = std::move(given);
  if (tok) {
    t.tokenizer_path = save_tokenizer_files(*tok, dir.string());
    return tok;
  }
  const TokenizerKind kind = parse_tokenizer_kind(t.tokenizer_type, "tokenizer");
  if (kind == TokenizerKind::kByte) {
    tok = make_byte_tokenizer();
  } else {
    std::fprintf(stderr, "training the suite's %s tokenizer (vocab %d) on %s...\n", to_string(kind),
                 t.tokenizer_vocab, t.data.c_str());
    tok = train_tokenizer(read_documents(t.data), tokenizer_train_options(t));
  }
  t.tokenizer_path = save_tokenizer_files(*tok, dir.string());
  return tok;
}

// Every row's recipe: the suite's, its own keys, then the flags again (they win).
TrainOptions row_train_options(const TrainOptions& base, const SuiteRow& row, const json& flags) {
  TrainOptions t = base;
  apply_train_settings(t, row.train, "row '" + row.id + "'");
  apply_train_settings(t, flags, "flags");
  return t;
}

// A suite with a T axis: the longest T still to train must fit one
// validation window, checked before any row trains (the trainer would stop
// at that row, after the others, advising --seq-len, which such a suite refuses).
void check_validation_holds_longest_t(const std::vector<std::pair<const SuiteRow*, TrainOptions>>& to_train,
                                      const Tokenizer& tok) {
  // One dataset per distinct split (fraction, seed, data keys), with the largest T still to train.
  std::map<std::string, TrainOptions> longest;
  for (const auto& row : to_train) {
    const TrainOptions& o = row.second;
    const std::string key = json{o.val_fraction, o.seed, to_string(o.data_split), o.chunk_last_eos}.dump();
    auto [it, added] = longest.try_emplace(key, o);
    if (!added && o.seq_len > it->second.seq_len) it->second = o;
  }
  for (const auto& split : longest) {
    const TrainOptions& o = split.second;
    const std::string& data = to_train.front().second.data;
    const TokenDataset set = TokenDataset::build(data, tok, dataset_options(o));
    const int64_t have = static_cast<int64_t>(set.val().size()), T = o.seq_len;
    HYMBA_CHECK(num_eval_windows(set.val(), T, set.window_stride()) > 0, "--seq-lens: T ", T,
                " needs a validation window of ", T + 1, " tokens but the validation split of ", data, " has ", have,
                "; give --seq-lens up to ", have - 1, " or a larger --data");
  }
}

// The first setting that differs, for the "run with other settings" error.
std::string first_difference(const json& a, const json& b, const std::string& prefix = "") {
  if (a.is_object() && b.is_object()) {
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) return prefix + it.key() + " (new)";
      const std::string d = first_difference(a[it.key()], it.value(), prefix + it.key() + ".");
      if (!d.empty()) return d;
    }
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key())) return prefix + it.key() + " (removed)";
    return "";
  }
  return a == b ? "" : prefix.substr(0, prefix.size() - 1) + ": " + a.dump() + " then, " + b.dump() + " now";
}

json skipped_row_json(const SkippedRow& s) {
  return {{"id", s.id}, {"name", s.name}, {"group", s.group}, {"seq_len", s.seq_len},
          {"batch", s.batch}, {"est_train_memory_mb", s.est_train_memory_mb}, {"reason", s.reason}};
}

SkippedRow skipped_row_from_json(const json& j) {
  return {j.at("id").get<std::string>(), j.at("name").get<std::string>(), j.at("group").get<std::string>(),
          j.at("seq_len").get<int64_t>(), j.at("batch").get<int64_t>(), j.at("est_train_memory_mb").get<double>(),
          j.at("reason").get<std::string>()};
}

// Under mpirun: every group leader's measured and skipped rows go to rank 0,
// which adds them to `done` and `summary` (in suite order). False on the
// other ranks, which have nothing more to write.
bool gather_rows(const dist::Communicator& world, bool leader, const std::vector<std::string>& runs_here,
                 const Suite& suite, std::map<std::string, RowResult>& done, AblateSummary& summary) {
  json mine = {{"trained", leader ? summary.trained : 0}, {"rows", json::array()}, {"skipped", json::array()}};
  if (leader) {
    for (const std::string& key : runs_here) {
      const auto it = done.find(key);
      if (it != done.end()) mine["rows"].push_back(it->second.to_json());
    }
    for (const SkippedRow& s : summary.skipped_rows) mine["skipped"].push_back(skipped_row_json(s));
  }
  const std::vector<std::string> parts = world.gather(mine.dump());
  if (!world.is_root()) return false;
  summary.trained = 0;
  std::map<std::string, SkippedRow> skipped;
  for (const std::string& text : parts) {
    const json part = json::parse(text);
    summary.trained += part.at("trained").get<int64_t>();
    for (const json& r : part.at("rows")) {
      RowResult row = RowResult::from_json(r);
      done.insert_or_assign(run_key(row.id, row.repeat), std::move(row));
    }
    for (const json& s : part.at("skipped")) {
      SkippedRow row = skipped_row_from_json(s);
      skipped.insert_or_assign(row.id, std::move(row));
    }
  }
  summary.skipped_rows.clear();
  for (const SuiteRow& row : suite.rows)
    if (const auto it = skipped.find(row.id); it != skipped.end()) summary.skipped_rows.push_back(it->second);
  return true;
}

// The trainer's summary figures of a run (DIR/runs/<run>/summary.json).
void read_training_summary(RowResult& r, const json& trained, const std::string& where) {
  const JsonFields f(trained, where);
  r.best_val_loss = f.f64("best_val_loss");
  r.best_val_ppl = f.f64("best_val_ppl");
  r.best_step = f.i64("best_step");
  r.final_val_loss = f.f64("final_val_loss");
  r.final_val_ppl = f.f64("final_val_ppl");
  r.final_val_accuracy = f.f64("final_val_accuracy");
  r.steps = f.i64("steps");
  r.train_tokens = f.i64("tokens");
  r.train_tokens_per_s = f.f64("train_tokens_per_s");
  r.train_seconds = f.f64("wall_s");
  // Written by later trainers; a run resumed after its last step measured none.
  if (f.has("peak_rss_mb")) r.peak_rss_mb = f.f64("peak_rss_mb");
  if (f.has("activation_peak_mb")) r.activation_peak_mb = f.f64("activation_peak_mb");
  r.peak_rss_scope = f.has("peak_rss_scope") ? f.str("peak_rss_scope") : "";
}

// Every measured run: the suite's rows in order, each in repeat order, then
// runs of rows the suite no longer has.
std::vector<RowResult> runs_in_order(const Suite& suite, const std::map<std::string, RowResult>& done,
                                     const std::vector<RowResult>& extra_rows) {
  std::vector<RowResult> out;
  for (const SuiteRow& s : suite.rows) {
    std::vector<const RowResult*> runs;
    for (const auto& entry : done)
      if (entry.second.id == s.id) runs.push_back(&entry.second);
    std::sort(runs.begin(), runs.end(), [](const RowResult* a, const RowResult* b) { return a->repeat < b->repeat; });
    for (const RowResult* r : runs) out.push_back(*r);
  }
  out.insert(out.end(), extra_rows.begin(), extra_rows.end());
  return out;
}

}  // namespace

AblateSummary run_ablation(const AblateOptions& opt) {
  HYMBA_CHECK(!opt.out_dir.empty(), "--out: an output directory is required");
  HYMBA_CHECK(opt.cache_context >= 1, "--cache-context must be >= 1");
  HYMBA_CHECK(opt.sample_tokens >= 1, "--sample-tokens must be >= 1");
  HYMBA_CHECK(opt.repeats >= 1 && opt.repeats <= 1000, "--repeats ", opt.repeats, " must be in [1, 1000]");
  const dist::Communicator& world = dist::world();
  HYMBA_CHECK(opt.ranks_per_row >= 1 && world.size() % opt.ranks_per_row == 0, "--ranks-per-row ", opt.ranks_per_row,
              " must be >= 1 and divide the ", world.size(), " MPI rank(s) of the job");
  // Group g of K ranks trains rows g, g + groups, ...; its rank 0 measures them.
  const int groups = world.size() / opt.ranks_per_row;
  const int group = world.rank() / opt.ranks_per_row;
  const dist::Communicator group_comm = world.split(group);
  const bool root = world.is_root(), leader = group_comm.is_root();
  set_num_threads(opt.threads);
  SuiteChoices choices;
  choices.scale = opt.scale;
  choices.transformer = opt.transformer;
  choices.seq_lens = opt.seq_lens;
  choices.same_kv_compression = opt.same_kv_compression;
  Suite suite = load_suite(opt.suite, choices);
  HYMBA_CHECK(suite.seq_lens.empty() || !opt.train_overrides.contains("seq_len"), "--seq-len: suite '", suite.name,
              "' sets T per row; give --seq-lens");
  for (SuiteRow& row : suite.rows) {
    for (auto it = opt.model_overrides.begin(); it != opt.model_overrides.end(); ++it) row.config[it.key()] = it.value();
    if (opt.kv_reuse_all_pairs && row.config.value("kv_reuse_group", nlohmann::json()) == "auto")
      row.config["kv_reuse_group"] = "all_pairs";
    (void)ModelConfig::from_json(row.config, "flags (row " + row.id + ")");
  }

  apply_sampling_settings(suite.sampling, opt.sampling_overrides, "flags");
  TrainOptions base;
  apply_train_settings(base, suite.train, "suite '" + suite.name + "'");
  apply_train_settings(base, opt.train_overrides, "flags");
  base.data = opt.data;
  base.threads = opt.threads;
  base.quiet = opt.quiet;
  base.plain_progress = opt.plain_progress;
  base.eval_at_start = true;  // the report's curves start at step 0
  const std::vector<std::string> prompts = opt.prompts.empty() ? suite.prompts : opt.prompts;
  HYMBA_CHECK(!prompts.empty(), "--prompt: the suite has no sample prompts; give one");

  const fs::path dir(opt.out_dir);
  std::error_code ec;
  fs::create_directories(dir / "runs", ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create the output directory (", ec.message(), ")");

  json settings = {{"suite", suite.name},
                         {"data", opt.data},
                         {"train", train_settings_json(base)},
                         {"cache_context", opt.cache_context},
                         {"sample_tokens", opt.sample_tokens},
                         {"sampling", suite.sampling.to_json()},
                         {"prompts", prompts}};
  if (suite.tokens_per_step > 0) {
    // The T axis's batch rule (the lengths themselves may grow between runs).
    const bool fixed = opt.train_overrides.contains("batch");
    settings["seq_axis"] = {{"batch", fixed ? "fixed" : "tokens_per_step / T"},
                            {"tokens_per_step", fixed ? json() : json(suite.tokens_per_step)}};
  }
  // --tokenizer: a tokenizer file used instead of training one; the rows'
  // vocab_size becomes its vocabulary (as with a trained one).
  std::unique_ptr<Tokenizer> given_tok;
  if (!opt.tokenizer_file.empty()) {
    for (const char* key : {"tokenizer", "tokenizer_vocab", "tokenizer_min_frequency", "tokenizer_alphabet"})
      HYMBA_CHECK(!opt.train_overrides.contains(key),
                  "--tokenizer: a loaded tokenizer replaces the trained one; drop --tokenizer-type / --tokenizer-vocab");
    HYMBA_CHECK(fs::is_regular_file(opt.tokenizer_file), "--tokenizer: ", opt.tokenizer_file,
                " is not a file (give a tokenizer.json, a sentencepiece .model or a hymba tokenizer.model)");
    given_tok = load_tokenizer(opt.tokenizer_file);
    json& t = settings["train"];
    for (const char* key : {"tokenizer_vocab", "tokenizer_min_frequency", "tokenizer_alphabet"}) t.erase(key);
    t["tokenizer"] = "loaded from " + opt.tokenizer_file + " (" + to_string(given_tok->kind()) + ", vocab " +
                     std::to_string(given_tok->vocab_size()) + ")";
  }
  const std::string results_json = (dir / "results.json").string();
  std::map<std::string, RowResult> done;
  if (fs::exists(results_json)) {
    StoredResults stored = read_results_json(results_json);
    HYMBA_CHECK(stored.header.value("format", "") == kResultsFormat, results_json,
                ": not a hymba ablate results file (format '", stored.header.value("format", ""), "')");
    json stored_settings = stored.header.value("settings", json::object());
    // Runs from before sampling was explicit sampled with these (the sampler's
    // default top-p 0.95): a suite that still does may continue them.
    if (stored_settings.is_object() && !stored_settings.contains("sampling")) {
      SampleSettings legacy;
      legacy.top_p = 0.95;
      stored_settings["sampling"] = legacy.to_json();
    }
    const std::string diff = first_difference(stored_settings, settings);
    HYMBA_CHECK(diff.empty(), opt.out_dir, ": holds a suite run with other settings (", diff,
                "); use another --out or the same flags");
    for (const std::string& msg : stored.corrupt) std::fprintf(stderr, "warning: %s; measuring that row again\n", msg.c_str());
    for (RowResult& r : stored.rows) done.emplace(run_key(r.id, r.repeat), std::move(r));
  }

  // Rank 0 makes the suite's tokenizer first; the others then load it (or,
  // without a shared directory, build the same one).
  std::unique_ptr<Tokenizer> tok;
  if (root) tok = suite_tokenizer(dir, base, std::move(given_tok));
  world.barrier();
  if (!root) tok = suite_tokenizer(dir, base, std::move(given_tok));
  const int64_t vocab = tok->vocab_size();

  // Check every row's config and its changes against earlier results before
  // training anything; the parameter counts also weigh the ETA (every row
  // sees the same tokens, so its time scales with the model).
  std::vector<double> row_params;
  for (const SuiteRow& row : suite.rows) {
    row_params.push_back(static_cast<double>(summarize(row_config(row, vocab), 1).total_params));
    for (const auto& entry : done)
      HYMBA_CHECK(entry.second.id != row.id || same_model(entry.second.config, row, vocab), "row '", row.id,
                  "': its model config changed since ", opt.out_dir, " was run; use another --out");
  }
  // Rows measured earlier for a suite file that has since lost them stay in
  // results.json (after the suite's rows) but not in the report.
  std::vector<RowResult> extra_rows;
  for (const auto& entry : done) {
    const RowResult& r = entry.second;
    const bool in_suite =
        std::any_of(suite.rows.begin(), suite.rows.end(), [&r](const SuiteRow& s) { return s.id == r.id; });
    if (in_suite) continue;
    if (r.repeat == 0)
      std::fprintf(stderr, "note: %s has a row '%s' that is not in this suite; kept there, left out of the report\n",
                   results_json.c_str(), r.id.c_str());
    extra_rows.push_back(r);
  }

  // Rows over the memory available are skipped (with the reason) instead of stopping the suite.
  auto memory_skip = [&](const fs::path& run_dir, const MemoryEstimate& need) -> std::optional<std::string> {
    if (!suite.skip_over_memory || fs::exists(run_dir / kSummaryFile)) return std::nullopt;
    return memory_skip_reason(need, available_memory_bytes());
  };
  // The group's ranks must agree: the leader's view of the memory decides.
  auto group_memory_skip = [&](const fs::path& run_dir, const MemoryEstimate& need) -> std::optional<std::string> {
    const std::optional<std::string> why = memory_skip(run_dir, need);
    if (group_comm.size() == 1) return why;
    std::string agreed = why ? "1" + *why : "0";
    group_comm.broadcast(agreed);
    if (agreed[0] == '0') return std::nullopt;
    return agreed.substr(1);
  };
  auto row_memory = [&](const TrainOptions& t, const SuiteRow& row) {
    return model_run_memory(row_config(row, vocab), t.batch, t.seq_len, true);
  };
  if (!suite.seq_lens.empty()) {
    std::vector<std::pair<const SuiteRow*, TrainOptions>> to_train;
    for (const SuiteRow& row : suite.rows) {
      TrainOptions t = row_train_options(base, row, opt.train_overrides);
      for (int64_t rep = 0; rep < opt.repeats; ++rep) {
        if (done.count(run_key(row.id, rep)) || memory_skip(dir / "runs" / repeat_run_name(row.id, rep), row_memory(t, row)))
          continue;
        t.seed = repeat_seed(t.seed, rep);
        to_train.emplace_back(&row, t);
        break;
      }
    }
    if (!to_train.empty()) check_validation_holds_longest_t(to_train, *tok);
  }

  // ETA: seconds per parameter of the runs trained so far.
  double work_done = 0.0, seconds_done = 0.0;

  json header = {{"format", kResultsFormat},
                 {"suite", suite.name},
                 {"title", suite.title},
                 {"scale", opt.scale.empty() ? "seed" : opt.scale},
                 {"threads", num_threads()},
                 {"settings", settings}};
  AblateSummary summary;
  const auto t_suite = std::chrono::steady_clock::now();
  // Every run: repeat-major, so that each finished pass over the rows adds
  // one paired repeat. Job j belongs to group j % groups.
  struct Job {
    size_t row;
    int64_t repeat;
  };
  std::vector<Job> jobs;
  for (int64_t rep = 0; rep < opt.repeats; ++rep)
    for (size_t i = 0; i < suite.rows.size(); ++i) jobs.push_back({i, rep});
  const size_t n = jobs.size();
  auto job_label = [&](size_t j) {
    const SuiteRow& row = suite.rows[jobs[j].row];
    std::string label = "[" + std::to_string(j + 1) + "/" + std::to_string(n) + "] " + row.name;
    if (opt.repeats > 1) label += " (repeat " + std::to_string(jobs[j].repeat + 1) + "/" + std::to_string(opt.repeats) + ")";
    return label;
  };
  std::vector<std::string> runs_here;  // keys of the runs this group trained
  std::set<std::string> skipped_ids;
  for (size_t j = 0; j < n; ++j) {
    const SuiteRow& row = suite.rows[jobs[j].row];
    const int64_t rep = jobs[j].repeat;
    const std::string key = run_key(row.id, rep), label = job_label(j);
    const bool measured = done.count(key) > 0;
    if (measured) {
      if (root && opt.repeats == 1) std::fprintf(stderr, "%s: measured earlier, skipped\n", label.c_str());
      if (root) ++summary.skipped;
      continue;
    }
    if (static_cast<int>(j % static_cast<size_t>(groups)) != group) continue;  // another group's
    double remaining = 0.0;
    for (size_t k = j; k < n; ++k)
      if (!done.count(run_key(suite.rows[jobs[k].row].id, jobs[k].repeat))) remaining += row_params[jobs[k].row];
    const std::string eta = work_done > 0 ? "suite ETA " + format_duration(remaining * seconds_done / work_done)
                                          : "suite ETA after the first row";
    if (leader) std::fprintf(stderr, "%s (%s): start; %s\n", label.c_str(), row.source.c_str(), eta.c_str());
    const auto t_row = std::chrono::steady_clock::now();

    TrainOptions row_opt = row_train_options(base, row, opt.train_overrides);
    row_opt.seed = repeat_seed(row_opt.seed, rep);
    const MemoryEstimate need = row_memory(row_opt, row);
    const fs::path run_dir = dir / "runs" / repeat_run_name(row.id, rep);
    runs_here.push_back(key);
    if (const auto why = group_memory_skip(run_dir, need)) {
      if (leader) std::fprintf(stderr, "%s: skipped: %s\n", label.c_str(), why->c_str());
      if (skipped_ids.insert(row.id).second)
        summary.skipped_rows.push_back(
            {row.id, row.name, row.group, row_opt.seq_len, row_opt.batch, need.total() / (1024.0 * 1024.0), *why});
      continue;
    }
    RowResult r;
    r.id = row.id;
    r.name = row.name;
    r.source = row.source;
    r.implementation = row.implementation;
    r.config = row.config;
    r.group = row.group;
    r.seq_len = row_opt.seq_len;
    r.batch = row_opt.batch;
    r.repeat = rep;
    r.seed = row_opt.seed;
    r.est_train_memory_mb = mib(static_cast<int64_t>(need.total()));
    const fs::path summary_path = run_dir / kSummaryFile;
    json trained;
    if (fs::exists(summary_path)) {
      trained = read_json_file(summary_path.string());  // trained earlier; only the measurements were lost
    } else {
      TrainOptions t = row_opt;
      t.out_dir = run_dir.string();
      t.resume = fs::exists(run_dir / kLatestFile);
      t.resume_finished = true;
      t.comm = &group_comm;
      trained = train(row_config(row, vocab), t).to_json();
      ++summary.trained;
      work_done += row_params[jobs[j].row];
      seconds_done += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_row).count();
    }
    if (!leader) continue;  // the group's rank 0 measures the row
    read_training_summary(r, trained, summary_path.string());
    fill_model_figures(r, row, vocab, opt.cache_context);
    r.curve = read_curve(run_dir / kMetricsFile);
    r.train_curve = read_train_curve(run_dir / kMetricsFile);
    const fs::path best = run_dir / kBestDir;
    // A mask that reads later tokens (a seed's leak) trains and evaluates but
    // cannot decode: such a row has no samples and no decode rate.
    const std::string why = row_config(row, vocab).decode_refusal();
    const bool decodes = why.empty();
    if (!decodes)
      std::fprintf(stderr, "%s: no samples or decode rate: %s\n", label.c_str(), why.c_str());
    else
      r.decode_tokens_per_s = sample_and_time(r, fs::exists(best) ? best.string() : resolve_checkpoint(run_dir.string()),
                                              *tok, prompts, suite.sampling, opt.sample_tokens, row_opt.seed);
    if (suite.sampling.untrained && decodes)
      r.untrained_samples = untrained_samples(row_config(row, vocab), *tok, prompts, suite.sampling,
                                              suite.sampling.tokens > 0 ? suite.sampling.tokens : opt.sample_tokens,
                                              row_opt.seed);
    done.emplace(key, r);
    // Every finished run is on disk before the next starts.
    if (root) write_results_json(results_json, header, runs_in_order(suite, done, extra_rows));
    std::fprintf(stderr,
                 "%s: done in %s: %.2fM params, best val loss %.4f (ppl %.2f), acc %.3f, %.0f train tok/s, "
                 "%.1f decode tok/s\n",
                 label.c_str(),
                 format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_row).count()).c_str(),
                 r.params / 1e6, r.best_val_loss, r.best_val_ppl, r.final_val_accuracy, r.train_tokens_per_s,
                 r.decode_tokens_per_s);
  }
  if (root && opt.repeats > 1 && summary.skipped > 0)
    std::fprintf(stderr, "%lld run(s) measured earlier, skipped\n", static_cast<long long>(summary.skipped));
  if (world.size() > 1 && !gather_rows(world, leader, runs_here, suite, done, summary)) return summary;  // rank 0 writes
  const std::vector<RowResult> all_runs = runs_in_order(suite, done, extra_rows);
  write_results_json(results_json, header, all_runs);

  // The report's rows: each row's mean over its repeats; the runs and spreads beside.
  std::vector<RowResult> results;
  for (const SuiteRow& s : suite.rows) {
    std::vector<RowResult> runs = runs_of(all_runs, s.id);
    if (runs.empty()) continue;
    for (RowResult& r : runs) r.implementation = s.implementation;
    summary.runs.insert(summary.runs.end(), runs.begin(), runs.end());
    results.push_back(mean_row(runs));
  }
  if (suite.sort == SortOrder::kBestPpl)
    std::stable_sort(results.begin(), results.end(),
                     [](const RowResult& a, const RowResult& b) { return a.best_val_ppl < b.best_val_ppl; });
  // In the report's order from here on (the CSV, the spreads), each row's runs in repeat order.
  std::vector<RowResult> ordered_runs;
  for (const RowResult& r : results) {
    std::vector<RowResult> runs = runs_of(summary.runs, r.id);
    summary.spreads.push_back(row_spread(runs));
    ordered_runs.insert(ordered_runs.end(), runs.begin(), runs.end());
  }
  summary.runs = std::move(ordered_runs);
  summary.answers =
      answer_questions(suite.questions.empty() ? seed_questions(suite) : suite.questions, summary.runs);
  write_results_csv((dir / "results.csv").string(), summary.runs);
  write_intervals_json((dir / "intervals.json").string(), summary.spreads, summary.answers);
  ReportInfo info;
  info.dir = dir.string();
  info.suite = suite.name;
  info.title = suite.title;
  info.sorted_by_ppl = suite.sort == SortOrder::kBestPpl;
  info.seed = suite.seed;
  info.settings = settings;
  info.scale = header["scale"].get<std::string>();
  info.gnuplot = opt.gnuplot;
  info.skipped = summary.skipped_rows;
  info.spreads = summary.spreads;
  info.answers = summary.answers;
  const ReportFiles files = write_report(info, results);
  summary.rows = results;
  summary.plots_written = files.plots_written;
  summary.report_md = files.markdown;
  summary.report_html = files.html;
  std::fprintf(stderr, "suite %s: %lld run(s) trained, %lld measured earlier, %zu row(s) skipped over memory, %s\n",
               suite.name.c_str(), static_cast<long long>(summary.trained), static_cast<long long>(summary.skipped),
               summary.skipped_rows.size(),
               format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_suite).count()).c_str());
  return summary;
}

}  // namespace hymba::ablate
