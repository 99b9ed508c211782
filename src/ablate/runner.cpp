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
#include "data/dataset.h"
#include "data/batch_sampler.h"
#include "dist/communicator.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
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

// One job of the suite: a row's repeat. Jobs run repeat-major, so that
// each finished pass over the rows adds one paired repeat.
struct Job {
  size_t row;
  int64_t repeat;
};

void check_ablate_options(const AblateOptions& opt, const dist::Communicator& world) {
  HYMBA_CHECK(!opt.out_dir.empty(), "--out: an output directory is required");
  HYMBA_CHECK(opt.cache_context >= 1, "--cache-context must be >= 1");
  HYMBA_CHECK(opt.sample_tokens >= 1, "--sample-tokens must be >= 1");
  HYMBA_CHECK(opt.repeats >= 1 && opt.repeats <= 1000, "--repeats ", opt.repeats, " must be in [1, 1000]");
  HYMBA_CHECK(opt.ranks_per_row >= 1 && world.size() % opt.ranks_per_row == 0, "--ranks-per-row ", opt.ranks_per_row,
              " must be >= 1 and divide the ", world.size(), " MPI rank(s) of the job");
}

// The suite with the flags' changes to every row, each row's config checked.
Suite suite_with_overrides(const AblateOptions& opt) {
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
  return suite;
}

// The training options every row starts from: the suite's, then the flags'.
TrainOptions suite_train_base(const Suite& suite, const AblateOptions& opt) {
  TrainOptions base;
  apply_train_settings(base, suite.train, "suite '" + suite.name + "'");
  apply_train_settings(base, opt.train_overrides, "flags");
  base.data = opt.data;
  base.threads = opt.threads;
  base.quiet = opt.quiet;
  base.plain_progress = opt.plain_progress;
  base.eval_at_start = true;  // the report's curves start at step 0
  return base;
}

json suite_settings(const Suite& suite, const AblateOptions& opt, const TrainOptions& base,
                    const std::vector<std::string>& prompts) {
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
  return settings;
}

// --tokenizer: a tokenizer file used instead of training one; the rows'
// vocab_size becomes its vocabulary (as with a trained one). The settings
// name it in place of the trainer's keys.
std::unique_ptr<Tokenizer> given_tokenizer(const AblateOptions& opt, json& settings) {
  if (opt.tokenizer_file.empty()) return nullptr;
  for (const char* key : {"tokenizer", "tokenizer_vocab", "tokenizer_min_frequency", "tokenizer_alphabet"})
    HYMBA_CHECK(!opt.train_overrides.contains(key),
                "--tokenizer: a loaded tokenizer replaces the trained one; drop --tokenizer-type / --tokenizer-vocab");
  HYMBA_CHECK(fs::is_regular_file(opt.tokenizer_file), "--tokenizer: ", opt.tokenizer_file,
              " is not a file (give a tokenizer.json, a sentencepiece .model or a hymba tokenizer.model)");
  std::unique_ptr<Tokenizer> tok = load_tokenizer(opt.tokenizer_file);
  json& t = settings["train"];
  for (const char* key : {"tokenizer_vocab", "tokenizer_min_frequency", "tokenizer_alphabet"}) t.erase(key);
  t["tokenizer"] = "loaded from " + opt.tokenizer_file + " (" + to_string(tok->kind()) + ", vocab " +
                   std::to_string(tok->vocab_size()) + ")";
  return tok;
}

// The runs an earlier invocation measured into results_json, refused when it
// ran with other settings.
std::map<std::string, RowResult> read_measured_runs(const std::string& results_json, const json& settings,
                                                    const std::string& out_dir) {
  std::map<std::string, RowResult> done;
  if (!fs::exists(results_json)) return done;
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
  HYMBA_CHECK(diff.empty(), out_dir, ": holds a suite run with other settings (", diff,
              "); use another --out or the same flags");
  for (const std::string& msg : stored.corrupt) std::fprintf(stderr, "warning: %s; measuring that row again\n", msg.c_str());
  for (RowResult& r : stored.rows) done.emplace(run_key(r.id, r.repeat), std::move(r));
  return done;
}

// Rows measured earlier for a suite file that has since lost them stay in
// results.json (after the suite's rows) but not in the report.
std::vector<RowResult> runs_not_in_suite(const Suite& suite, const std::map<std::string, RowResult>& done,
                                         const std::string& results_json) {
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
  return extra_rows;
}

// A suite's whole invocation: the rows' runs this rank's group trains and
// measures, then (on rank 0) results.json/csv, intervals and the report.
class SuiteRun {
 public:
  explicit SuiteRun(const AblateOptions& opt)
      : opt_(opt), world_(dist::world()), groups_(world_.size() / opt.ranks_per_row),
        group_(world_.rank() / opt.ranks_per_row), group_comm_(world_.split(group_)), root_(world_.is_root()),
        leader_(group_comm_.is_root()), dir_(opt.out_dir), results_json_((dir_ / "results.json").string()) {}

  AblateSummary run() {
    set_num_threads(opt_.threads);
    suite_ = suite_with_overrides(opt_);
    base_ = suite_train_base(suite_, opt_);
    prompts_ = opt_.prompts.empty() ? suite_.prompts : opt_.prompts;
    HYMBA_CHECK(!prompts_.empty(), "--prompt: the suite has no sample prompts; give one");
    std::error_code ec;
    fs::create_directories(dir_ / "runs", ec);
    HYMBA_CHECK(!ec, opt_.out_dir, ": cannot create the output directory (", ec.message(), ")");
    settings_ = suite_settings(suite_, opt_, base_, prompts_);
    std::unique_ptr<Tokenizer> given_tok = given_tokenizer(opt_, settings_);
    done_ = read_measured_runs(results_json_, settings_, opt_.out_dir);
    // Rank 0 makes the suite's tokenizer first; the others then load it (or,
    // without a shared directory, build the same one).
    if (root_) tok_ = suite_tokenizer(dir_, base_, std::move(given_tok));
    world_.barrier();
    if (!root_) tok_ = suite_tokenizer(dir_, base_, std::move(given_tok));
    vocab_ = tok_->vocab_size();
    check_rows_against_measured();
    extra_rows_ = runs_not_in_suite(suite_, done_, results_json_);
    if (!suite_.seq_lens.empty()) check_seq_axis();
    header_ = {{"format", kResultsFormat},
               {"suite", suite_.name},
               {"title", suite_.title},
               {"scale", opt_.scale.empty() ? "seed" : opt_.scale},
               {"threads", num_threads()},
               {"settings", settings_}};
    const auto t_suite = std::chrono::steady_clock::now();
    train_jobs();
    if (root_ && opt_.repeats > 1 && summary_.skipped > 0)
      std::fprintf(stderr, "%lld run(s) measured earlier, skipped\n", static_cast<long long>(summary_.skipped));
    if (world_.size() > 1 && !gather_rows(world_, leader_, runs_here_, suite_, done_, summary_))
      return summary_;  // rank 0 writes
    report();
    std::fprintf(stderr, "suite %s: %lld run(s) trained, %lld measured earlier, %zu row(s) skipped over memory, %s\n",
                 suite_.name.c_str(), static_cast<long long>(summary_.trained),
                 static_cast<long long>(summary_.skipped), summary_.skipped_rows.size(),
                 format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_suite).count())
                     .c_str());
    return summary_;
  }

 private:
  // Every row's config and its changes against earlier results, before
  // training anything; the parameter counts also weigh the ETA (every row
  // sees the same tokens, so its time scales with the model).
  void check_rows_against_measured() {
    for (const SuiteRow& row : suite_.rows) {
      row_params_.push_back(static_cast<double>(summarize(row_config(row, vocab_), 1).total_params));
      for (const auto& entry : done_)
        HYMBA_CHECK(entry.second.id != row.id || same_model(entry.second.config, row, vocab_), "row '", row.id,
                    "': its model config changed since ", opt_.out_dir, " was run; use another --out");
    }
  }

  // A T axis: the validation split must hold a window of the longest T to train.
  void check_seq_axis() {
    std::vector<std::pair<const SuiteRow*, TrainOptions>> to_train;
    for (const SuiteRow& row : suite_.rows) {
      TrainOptions t = row_train_options(base_, row, opt_.train_overrides);
      for (int64_t rep = 0; rep < opt_.repeats; ++rep) {
        if (done_.count(run_key(row.id, rep)) ||
            memory_skip(dir_ / "runs" / repeat_run_name(row.id, rep), row_memory(t, row)))
          continue;
        t.seed = repeat_seed(t.seed, rep);
        to_train.emplace_back(&row, t);
        break;
      }
    }
    if (!to_train.empty()) check_validation_holds_longest_t(to_train, *tok_);
  }

  MemoryEstimate row_memory(const TrainOptions& t, const SuiteRow& row) const {
    return model_run_memory(row_config(row, vocab_), t.batch, t.seq_len, true);
  }

  // Rows over the memory available are skipped (with the reason) instead of stopping the suite.
  std::optional<std::string> memory_skip(const fs::path& run_dir, const MemoryEstimate& need) const {
    if (!suite_.skip_over_memory || fs::exists(run_dir / kSummaryFile)) return std::nullopt;
    return memory_skip_reason(need, available_memory_bytes());
  }

  // The group's ranks must agree: the leader's view of the memory decides.
  std::optional<std::string> group_memory_skip(const fs::path& run_dir, const MemoryEstimate& need) const {
    const std::optional<std::string> why = memory_skip(run_dir, need);
    if (group_comm_.size() == 1) return why;
    std::string agreed = why ? "1" + *why : "0";
    group_comm_.broadcast(agreed);
    if (agreed[0] == '0') return std::nullopt;
    return agreed.substr(1);
  }

  std::string job_label(size_t j) const {
    const SuiteRow& row = suite_.rows[jobs_[j].row];
    std::string label = "[" + std::to_string(j + 1) + "/" + std::to_string(jobs_.size()) + "] " + row.name;
    if (opt_.repeats > 1)
      label += " (repeat " + std::to_string(jobs_[j].repeat + 1) + "/" + std::to_string(opt_.repeats) + ")";
    return label;
  }

  // ETA: seconds per parameter of the runs trained so far, over the parameters left.
  std::string eta_from(size_t j) const {
    if (work_done_ <= 0) return "suite ETA after the first row";
    double remaining = 0.0;
    for (size_t k = j; k < jobs_.size(); ++k)
      if (!done_.count(run_key(suite_.rows[jobs_[k].row].id, jobs_[k].repeat))) remaining += row_params_[jobs_[k].row];
    return "suite ETA " + format_duration(remaining * seconds_done_ / work_done_);
  }

  // Job j belongs to group j % groups.
  void train_jobs() {
    for (int64_t rep = 0; rep < opt_.repeats; ++rep)
      for (size_t i = 0; i < suite_.rows.size(); ++i) jobs_.push_back({i, rep});
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const SuiteRow& row = suite_.rows[jobs_[j].row];
      if (done_.count(run_key(row.id, jobs_[j].repeat)) > 0) {
        if (root_ && opt_.repeats == 1) std::fprintf(stderr, "%s: measured earlier, skipped\n", job_label(j).c_str());
        if (root_) ++summary_.skipped;
        continue;
      }
      if (static_cast<int>(j % static_cast<size_t>(groups_)) == group_) train_job(j);
    }
  }

  void train_job(size_t j) {
    const SuiteRow& row = suite_.rows[jobs_[j].row];
    const int64_t rep = jobs_[j].repeat;
    const std::string key = run_key(row.id, rep), label = job_label(j);
    if (leader_) std::fprintf(stderr, "%s (%s): start; %s\n", label.c_str(), row.source.c_str(), eta_from(j).c_str());
    const auto t_row = std::chrono::steady_clock::now();
    TrainOptions row_opt = row_train_options(base_, row, opt_.train_overrides);
    row_opt.seed = repeat_seed(row_opt.seed, rep);
    const MemoryEstimate need = row_memory(row_opt, row);
    const fs::path run_dir = dir_ / "runs" / repeat_run_name(row.id, rep);
    runs_here_.push_back(key);
    if (const auto why = group_memory_skip(run_dir, need)) {
      if (leader_) std::fprintf(stderr, "%s: skipped: %s\n", label.c_str(), why->c_str());
      if (skipped_ids_.insert(row.id).second)
        summary_.skipped_rows.push_back(
            {row.id, row.name, row.group, row_opt.seq_len, row_opt.batch, need.total() / (1024.0 * 1024.0), *why});
      return;
    }
    const fs::path summary_path = run_dir / kSummaryFile;
    json trained;
    if (fs::exists(summary_path)) {
      trained = read_json_file(summary_path.string());  // trained earlier; only the measurements were lost
    } else {
      TrainOptions t = row_opt;
      t.out_dir = run_dir.string();
      t.resume = fs::exists(run_dir / kLatestFile);
      t.resume_finished = true;
      t.comm = &group_comm_;
      trained = train(row_config(row, vocab_), t).to_json();
      ++summary_.trained;
      work_done_ += row_params_[jobs_[j].row];
      seconds_done_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_row).count();
    }
    if (!leader_) return;  // the group's rank 0 measures the row
    const RowResult r = measure_run(row, rep, row_opt, need, run_dir, trained, label);
    done_.emplace(key, r);
    // Every finished run is on disk before the next starts.
    if (root_) write_results_json(results_json_, header_, runs_in_order(suite_, done_, extra_rows_));
    std::fprintf(stderr,
                 "%s: done in %s: %.2fM params, best val loss %.4f (ppl %.2f), acc %.3f, %.0f train tok/s, "
                 "%.1f decode tok/s\n",
                 label.c_str(),
                 format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_row).count()).c_str(),
                 r.params / 1e6, r.best_val_loss, r.best_val_ppl, r.final_val_accuracy, r.train_tokens_per_s,
                 r.decode_tokens_per_s);
  }

  // A trained run's figures: its summary and curves, the model's sizes, and
  // samples with a decode rate from its best checkpoint.
  RowResult measure_run(const SuiteRow& row, int64_t rep, const TrainOptions& row_opt, const MemoryEstimate& need,
                        const fs::path& run_dir, const json& trained, const std::string& label) {
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
    read_training_summary(r, trained, (run_dir / kSummaryFile).string());
    fill_model_figures(r, row, vocab_, opt_.cache_context);
    r.curve = read_curve(run_dir / kMetricsFile);
    r.train_curve = read_train_curve(run_dir / kMetricsFile);
    const fs::path best = run_dir / kBestDir;
    // A mask that reads later tokens (a seed's leak) trains and evaluates but
    // cannot decode: such a row has no samples and no decode rate.
    const std::string why = row_config(row, vocab_).decode_refusal();
    const bool decodes = why.empty();
    if (!decodes)
      std::fprintf(stderr, "%s: no samples or decode rate: %s\n", label.c_str(), why.c_str());
    else
      r.decode_tokens_per_s = sample_and_time(r, fs::exists(best) ? best.string() : resolve_checkpoint(run_dir.string()),
                                              *tok_, prompts_, suite_.sampling, opt_.sample_tokens, row_opt.seed);
    if (suite_.sampling.untrained && decodes)
      r.untrained_samples = untrained_samples(row_config(row, vocab_), *tok_, prompts_, suite_.sampling,
                                              suite_.sampling.tokens > 0 ? suite_.sampling.tokens : opt_.sample_tokens,
                                              row_opt.seed);
    return r;
  }

  // results.json/csv, intervals.json and the report: each row's mean over its
  // repeats, the runs and spreads beside, the suite's questions answered.
  void report() {
    const std::vector<RowResult> all_runs = runs_in_order(suite_, done_, extra_rows_);
    write_results_json(results_json_, header_, all_runs);
    std::vector<RowResult> results;
    for (const SuiteRow& s : suite_.rows) {
      std::vector<RowResult> runs = runs_of(all_runs, s.id);
      if (runs.empty()) continue;
      for (RowResult& r : runs) r.implementation = s.implementation;
      summary_.runs.insert(summary_.runs.end(), runs.begin(), runs.end());
      results.push_back(mean_row(runs));
    }
    if (suite_.sort == SortOrder::kBestPpl)
      std::stable_sort(results.begin(), results.end(),
                       [](const RowResult& a, const RowResult& b) { return a.best_val_ppl < b.best_val_ppl; });
    // In the report's order from here on (the CSV, the spreads), each row's runs in repeat order.
    std::vector<RowResult> ordered_runs;
    for (const RowResult& r : results) {
      std::vector<RowResult> runs = runs_of(summary_.runs, r.id);
      summary_.spreads.push_back(row_spread(runs));
      ordered_runs.insert(ordered_runs.end(), runs.begin(), runs.end());
    }
    summary_.runs = std::move(ordered_runs);
    summary_.answers =
        answer_questions(suite_.questions.empty() ? seed_questions(suite_) : suite_.questions, summary_.runs);
    write_results_csv((dir_ / "results.csv").string(), summary_.runs);
    write_intervals_json((dir_ / "intervals.json").string(), summary_.spreads, summary_.answers);
    ReportInfo info;
    info.dir = dir_.string();
    info.suite = suite_.name;
    info.title = suite_.title;
    info.sorted_by_ppl = suite_.sort == SortOrder::kBestPpl;
    info.seed = suite_.seed;
    info.settings = settings_;
    info.scale = header_["scale"].get<std::string>();
    info.gnuplot = opt_.gnuplot;
    info.skipped = summary_.skipped_rows;
    info.spreads = summary_.spreads;
    info.answers = summary_.answers;
    const ReportFiles files = write_report(info, results);
    summary_.rows = results;
    summary_.plots_written = files.plots_written;
    summary_.report_md = files.markdown;
    summary_.report_html = files.html;
  }

  const AblateOptions& opt_;
  const dist::Communicator& world_;
  // Group g of K ranks trains rows g, g + groups, ...; its rank 0 measures them.
  const int groups_, group_;
  const dist::Communicator group_comm_;
  const bool root_, leader_;
  const fs::path dir_;
  const std::string results_json_;
  Suite suite_;
  TrainOptions base_;
  std::vector<std::string> prompts_;
  json settings_, header_;
  std::unique_ptr<Tokenizer> tok_;
  int64_t vocab_ = 0;
  std::map<std::string, RowResult> done_;
  std::vector<RowResult> extra_rows_;
  std::vector<double> row_params_;
  std::vector<Job> jobs_;
  double work_done_ = 0.0, seconds_done_ = 0.0;
  std::vector<std::string> runs_here_;  // keys of the runs this group trained
  std::set<std::string> skipped_ids_;
  AblateSummary summary_;
};

}  // namespace

AblateSummary run_ablation(const AblateOptions& opt) {
  check_ablate_options(opt, dist::world());
  return SuiteRun(opt).run();
}

}  // namespace hymba::ablate
