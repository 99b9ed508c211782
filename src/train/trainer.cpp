#include "train/trainer.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "data/corpus.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_files.h"
#include "eval/evaluate.h"
#include "formats/checkpoint.h"
#include "model/memory_estimate.h"
#include "model/mixing.h"
#include "model/model.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/run_lock.h"
#include "train/run_state.h"
#include "train/sharded_gradient.h"
#include "train/stop_signal.h"

namespace hymba {

namespace fs = std::filesystem;
using nlohmann::json;

nlohmann::json TrainSummary::to_json() const {
  json j = {{"params", params},
          {"steps", steps},
          {"tokens", tokens},
          {"final_train_loss", final_train_loss},
          {"best_val_loss", best_val_loss},
          {"best_val_ppl", best_val_ppl},
          {"best_step", best_step},
          {"final_val_loss", final_val_loss},
          {"final_val_ppl", final_val_ppl},
          {"final_val_accuracy", final_val_acc},
          {"train_tokens_per_s", train_tokens_per_s},
          {"wall_s", wall_s},
          {"peak_rss_mb", static_cast<double>(peak_rss_bytes) / (1024.0 * 1024.0)},
          {"activation_peak_mb", static_cast<double>(activation_peak_bytes) / (1024.0 * 1024.0)},
          {"peak_rss_scope", peak_rss_scope}};
  if (ranks > 1) {
    j["ranks"] = ranks;
    j["comm_share"] = comm_share;
    j["grad_sum_share"] = grad_sum_share;
  }
  return j;
}

namespace {

// The whole recipe: every option that changes the weights a run produces.
// It is stored in each checkpoint's train_state.json ("run"), and a resume
// that would change any of it is refused by name. Not in it: --steps and
// --epochs (a run may be extended), the log/eval/save intervals and eval
// windows (they do not touch the weights), the thread count (see
// resume_checks()) and a --tokenizer file's path (its content is compared).
json run_recipe(const TrainOptions& o, double dropout) {
  json j = recipe_core_json(o);
  // A tokenizer given as a file, or brought by --init, is not built by the recipe.
  const bool builds_tokenizer = o.tokenizer_path.empty() && o.init_from.empty();
  j.update(json{{"data", o.data},
                {"init", o.init_from},
                {"tokenizer_type", builds_tokenizer ? o.tokenizer_type : std::string()},
                {"tokenizer_vocab", builds_tokenizer && o.tokenizer_type != "byte" ? o.tokenizer_vocab : 0},
                {"eps", o.adamw.eps},
                {"dropout", dropout},  // the one in effect: --dropout or the model config's
                {"grad_shards", o.grad_shards},
                {"weight_decay_scope", o.adamw.decay_all ? "all" : "matrices"},
                {"data_split", to_string(o.data_split)},
                {"batching", batching_name(o.batching_epochs)},
                {"chunk_last_target", chunk_last_target_name(o.chunk_last_eos)},
                {"precision", cpu::to_string(o.precision)},
                {"threads", num_threads()}});
  if (builds_tokenizer && o.tokenizer_type == "byte-level-bpe") {
    j["tokenizer_min_frequency"] = o.tokenizer_min_frequency;
    j["tokenizer_corpus_alphabet"] = o.tokenizer_corpus_alphabet;
  }
  return j;
}

// The command-line spelling of a recipe key, for messages.
std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

// Refuses a resume whose recipe or model differs from the run's, naming every
// change. A different thread count is allowed with a warning: reductions are
// split by thread, so results are bit-identical only for the same count.
void resume_checks(const JsonFields& saved, const json& now, const ModelConfig* asked_model,
                   const ModelConfig& run_model, const std::string& tokenizer_path, const std::string& run_tokenizer,
                   std::FILE* log) {
  std::string changes;
  // The first few differences, then a count: the message stays one short line.
  constexpr int kShown = 3;
  int differences = 0;
  auto note_change = [&](const std::string& name, const json& was, const json& is) {
    if (++differences <= kShown)
      changes += (changes.empty() ? "" : ", ") + name + " " + json_excerpt(was, 40) + " -> " + json_excerpt(is, 40);
  };
  if (!tokenizer_path.empty() && read_file(tokenizer_path) != read_file(run_tokenizer))
    changes += std::string(changes.empty() ? "" : ", ") + "--tokenizer " + tokenizer_path + " is not the run's tokenizer";
  for (auto it = now.begin(); it != now.end(); ++it) {
    const std::string& key = it.key();
    if (key == "threads" || !saved.has(key.c_str())) continue;  // checkpoints of older builds lack some keys
    // A --tokenizer file is compared by content above, whatever built the run's.
    if (!tokenizer_path.empty() && key.rfind("tokenizer_", 0) == 0) continue;
    const json& was = saved.at(key.c_str());
    const bool same = was.is_number() && it.value().is_number() ? was.get<double>() == it.value().get<double>()
                                                                : was == it.value();
    if (!same) note_change(flag_of(key), was, it.value());
  }
  if (asked_model != nullptr) {
    const json a = run_model.to_json(), b = asked_model->to_json();
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()) || a[it.key()] != it.value())
        note_change("model " + it.key(), a.value(it.key(), json()), it.value());
  }
  if (differences > kShown) changes += " and " + std::to_string(differences - kShown) + " more";
  HYMBA_CHECK(changes.empty(), "--resume: the run was trained with other settings: ", changes,
              " (resume with the run's values, or start a new run with another --out)");
  if (saved.has("threads")) {
    const int64_t was = saved.i64("threads");
    if (was != now.at("threads").get<int64_t>() && log != nullptr)
      std::fprintf(log,
                   "note: this run used %lld thread(s), now %d: results stay correct but are not bit-identical to an "
                   "uninterrupted run (pass --threads %lld for that)\n",
                   static_cast<long long>(was), num_threads(), static_cast<long long>(was));
  }
}

// train_state.json, read field by field with typed getters: a missing key or
// a wrong type is one line naming the file and field.
struct SavedState {
  int64_t step = 0, tokens = 0, best_step = -1;
  double best_val_loss = INFINITY, train_seconds = 0.0;
  double final_train_loss = 0.0, final_val_loss = 0.0, final_val_accuracy = 0.0;
};

SavedState read_train_state(const JsonFields& f) {
  SavedState s;
  s.step = f.i64("step");
  HYMBA_CHECK(s.step >= 1, f.where("step"), " must be >= 1 (got ", s.step, ")");
  s.tokens = f.i64("tokens");
  s.best_step = f.i64("best_step");
  s.best_val_loss = f.f64_or_null("best_val_loss", INFINITY);  // null: no evaluation yet
  s.train_seconds = f.f64("train_seconds");
  s.final_train_loss = f.f64("final_train_loss");
  s.final_val_loss = f.f64("final_val_loss");
  s.final_val_accuracy = f.f64("final_val_accuracy");
  return s;
}

void validate(const TrainOptions& o) {
  HYMBA_CHECK(!o.out_dir.empty(), "--out: a run directory is required");
  HYMBA_CHECK(o.init_from.empty() || o.tokenizer_path.empty(),
              "--tokenizer: not with --init (the run uses the tokenizer of ", o.init_from, ")");
  if (o.tokenizer_path.empty()) (void)parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  HYMBA_CHECK(o.batch >= 1, "--batch must be >= 1 (got ", o.batch, ")");
  HYMBA_CHECK(o.seq_len >= 1, "--seq-len must be >= 1 (got ", o.seq_len, ")");
  HYMBA_CHECK(o.grad_accum >= 1, "--grad-accum must be >= 1 (got ", o.grad_accum, ")");
  HYMBA_CHECK(o.grad_shards >= 0, "--grad-shards must be >= 0 (0: off; got ", o.grad_shards, ")");
  HYMBA_CHECK(o.steps >= 0, "--steps must be >= 0");
  HYMBA_CHECK(o.epochs >= 0, "--epochs must be >= 0");
  HYMBA_CHECK(o.stop_epochs >= 0, "--stop-epochs must be >= 0");
  HYMBA_CHECK(o.lr > 0 && std::isfinite(o.lr), "--lr must be > 0 (got ", o.lr, ")");
  HYMBA_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1]");
  HYMBA_CHECK(o.warmup >= 0, "--warmup must be >= 0");
  HYMBA_CHECK(o.adamw.weight_decay >= 0, "--weight-decay must be >= 0");
  HYMBA_CHECK(o.adamw.beta1 >= 0 && o.adamw.beta1 < 1 && o.adamw.beta2 >= 0 && o.adamw.beta2 < 1,
              "--beta1/--beta2 must be in [0, 1)");
  HYMBA_CHECK(o.grad_clip >= 0, "--grad-clip must be >= 0 (0 = off)");
  HYMBA_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  HYMBA_CHECK(o.dropout < 1, "--dropout must be < 1");
  HYMBA_CHECK(o.val_fraction > 0 && o.val_fraction < 1, "--val-fraction must be in (0, 1)");
  HYMBA_CHECK(!o.chunk_last_eos || o.data_split == DataSplit::kChunksShuffled,
              "--chunk-last-target eos needs --data-split chunks-shuffled (it rewrites each chunk's last target)");
  HYMBA_CHECK(o.data_split != DataSplit::kChunksShuffled || o.batching_epochs,
              "--data-split chunks-shuffled needs --batching epochs (random windows would cross chunk borders)");
  HYMBA_CHECK(o.log_interval >= 1 && o.eval_interval >= 1 && o.save_interval >= 1,
              "--log-interval/--eval-interval/--save-interval must be >= 1");
  HYMBA_CHECK(o.precision != cpu::MatmulPrecision::kBf16 || o.bf16_isa.has_value() ||
                  cpu::best_bf16_gemm_isa() != cpu::Bf16GemmIsa::kPortable,
              "--precision bf16: this CPU has no AVX512-BF16 instructions, and bf16 products without them run "
              "slower than float32; train with --precision f32");
  HYMBA_CHECK(!o.bf16_isa || cpu::bf16_gemm_isa_available(*o.bf16_isa),
              "bf16_isa: this CPU cannot run ", cpu::to_string(*o.bf16_isa));
}

}  // namespace

TokenizerTrainOptions tokenizer_train_options(const TrainOptions& o) {
  TokenizerTrainOptions t;
  t.kind = parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  t.vocab_size = o.tokenizer_vocab;
  t.seed = o.seed;
  t.min_frequency = o.tokenizer_min_frequency;
  t.corpus_alphabet = o.tokenizer_corpus_alphabet;
  return t;
}

namespace {

std::unique_ptr<Tokenizer> make_tokenizer(const TrainOptions& o, std::FILE* log) {
  if (!o.tokenizer_path.empty()) return load_tokenizer(o.tokenizer_path);
  const TokenizerKind kind = parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  if (kind == TokenizerKind::kByte) return make_byte_tokenizer();
  if (log) std::fprintf(log, "training a %s tokenizer (vocab %d) on %s...\n", to_string(kind), o.tokenizer_vocab,
                        o.data.c_str());
  return train_tokenizer(read_documents(o.data), tokenizer_train_options(o));
}

// Keeps metrics.jsonl consistent with a resumed run: records after the
// checkpoint's step are dropped (they will be produced again).
void truncate_metrics(const std::string& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) <= step) kept += line + "\n";
    } catch (const json::exception&) {
      break;  // a line cut by the kill: everything after it is gone too
    }
  }
  write_text_atomic(path, kept);
}

}  // namespace

void check_train_state(const std::string& path, const std::string& text, const TrainOptions& opt) {
  const json state_json = parse_json(text, path);
  const JsonFields fields(state_json, path);
  (void)read_train_state(fields);
  const JsonFields run = fields.object("run");
  if (run.has("init")) (void)run.str("init");
  resume_checks(run, run_recipe(opt, opt.dropout >= 0 ? opt.dropout : 0.0), nullptr, ModelConfig{}, "", "", nullptr);
}

namespace {

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

}  // namespace

json recipe_core_json(const TrainOptions& o) {
  json j = {{"batch", o.batch},
          {"seq_len", o.seq_len},
          {"grad_accum", o.grad_accum},
          {"seed", o.seed},
          {"lr", o.lr},
          {"min_lr_ratio", o.min_lr_ratio},
          {"warmup", o.warmup},
          {"weight_decay", o.adamw.weight_decay},
          {"beta1", o.adamw.beta1},
          {"beta2", o.adamw.beta2},
          {"grad_clip", o.grad_clip},
          {"label_smoothing", o.label_smoothing},
          {"val_fraction", o.val_fraction}};
  // Written only when not the default, so records from before the key match.
  if (o.adamw.decay_all) j["weight_decay_scope"] = "all";
  if (o.data_split != DataSplit::kBlocks) j["data_split"] = to_string(o.data_split);
  if (o.batching_epochs) j["batching"] = batching_name(true);
  if (o.chunk_last_eos) j["chunk_last_target"] = chunk_last_target_name(true);
  if (o.precision != cpu::MatmulPrecision::kF32) j["precision"] = cpu::to_string(o.precision);
  return j;
}

const char* batching_name(bool epochs) { return epochs ? "epochs" : "random-windows"; }
const char* chunk_last_target_name(bool eos) { return eos ? "eos" : "next"; }

DatasetOptions dataset_options(const TrainOptions& o) {
  DatasetOptions d;
  d.val_fraction = o.val_fraction;
  d.split_seed = o.seed;
  d.split = o.data_split;
  d.chunk_tokens = o.seq_len;
  d.chunk_last_eos = o.chunk_last_eos;
  return d;
}

TrainSummary train(const ModelConfig& base_cfg, const TrainOptions& options) {
  validate(options);
  TrainOptions opt = options;
  // SIGINT/SIGTERM: stop at the next step boundary (unless the caller watches them).
  std::optional<StopSignals> stop_signals;
  if (opt.catch_signals) stop_signals.emplace();
  bool hook_stopped = false;  // on_step asked to stop
  auto stop_signal = [&]() -> int { return hook_stopped ? SIGINT : stop_signals ? StopSignals::received() : 0; };
  auto stop_reason = [&](int sig) {
    return hook_stopped ? std::string("interrupted") : std::string("interrupted by ") + signal_name(sig);
  };
  set_num_threads(opt.threads);
  const dist::Communicator& comm = opt.comm != nullptr ? *opt.comm : dist::world();
  // Rank 0 alone writes the run directory and prints progress; every rank
  // reads it (a resume), so it must be on a filesystem they all see.
  const bool root = comm.is_root();
  std::FILE* log = opt.quiet || !root ? nullptr : stderr;
  HYMBA_CHECK(opt.batch >= comm.size(), "--batch ", opt.batch, " is smaller than the ", comm.size(),
              " MPI ranks: each rank needs at least one sequence of every batch");
  if (opt.grad_shards > 0) check_grad_shards(opt.grad_shards, opt.batch, comm.size());
  const auto t_start = std::chrono::steady_clock::now();
  // This run's memory, not an earlier run's in the same process (a suite).
  const bool rss_from_here = reset_peak_rss();
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create run directory (", ec.message(), ")");
  // One process per run directory; then whatever a killed writer left behind
  // (no other writer can be active now) is swept away.
  std::optional<RunLock> lock;
  if (root) lock.emplace(opt.out_dir);
  const int stale = root ? remove_stale_temp_files(opt.out_dir) : 0;
  if (stale > 0 && log) std::fprintf(log, "removed %d unfinished temporary file(s) of an earlier run\n", stale);
  const std::string latest = (fs::path(opt.out_dir) / kLatestFile).string();
  const bool has_run = fs::exists(latest);
  HYMBA_CHECK(!has_run || opt.resume, opt.out_dir, ": already holds a run; pass --resume to continue it or choose another --out");
  HYMBA_CHECK(!opt.resume || has_run, opt.out_dir, ": --resume given but there is no checkpoint to resume");
  comm.barrier();  // every rank has seen the directory as it was before rank 0 writes to it

  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Model> model;
  SavedState state;
  json saved_run = json::object();  // the resumed run's recipe
  int64_t start_step = 0;
  // The model's config and the recipe's memory need, checked before anything
  // of that size is allocated.
  auto require_memory = [&](const ModelConfig& cfg) {
    model_run_memory(cfg, opt.batch, opt.seq_len, true, "--batch", "--seq-len", opt.recompute)
        .require_available(opt.recompute ? "training with --recompute" : "training without --recompute");
  };
  if (opt.resume) {
    const std::string ckpt = resolve_checkpoint(opt.out_dir);
    const std::string state_path = (fs::path(ckpt) / kTrainStateFile).string();
    const json state_json = read_json_file(state_path);
    const JsonFields fields(state_json, state_path);
    state = read_train_state(fields);
    saved_run = state_json.value("run", json::object());
    // A fine-tuning run resumes from its own checkpoint whether or not --init
    // is given again; given, it must name the run's.
    const std::string run_init = fields.object("run").has("init") ? fields.object("run").str("init") : "";
    if (opt.init_from.empty()) opt.init_from = run_init;
    const ModelConfig run_cfg = load_config_file((fs::path(ckpt) / kConfigFile).string());
    std::optional<ModelConfig> asked;
    if (opt.check_model) {
      json j = base_cfg.to_json();
      j["vocab_size"] = run_cfg.vocab_size;  // set by the run's tokenizer
      if (opt.dropout >= 0) j["dropout"] = opt.dropout;
      asked = ModelConfig::from_json(j, "model config");
    }
    resume_checks(fields.object("run"), run_recipe(opt, opt.dropout >= 0 ? opt.dropout : run_cfg.dropout),
                  asked ? &*asked : nullptr, run_cfg, opt.tokenizer_path, checkpoint_tokenizer_path(ckpt), log);
    tok = load_fitting_tokenizer(ckpt, run_cfg.vocab_size).tokenizer;
    require_memory(run_cfg);
    model = load_model(ckpt, true);
    load_optimizer_state(ckpt, *model);
    start_step = state.step;
    const int64_t saved_ranks = saved_run.value("ranks", int64_t{1});
    if (saved_ranks != comm.size() && opt.grad_shards == 0 && log)
      std::fprintf(log,
                   "note: this run trained on %lld MPI rank(s), now %d: the global batch is the same, but sums are "
                   "split differently, so results are not bit-identical to an uninterrupted run\n",
                   static_cast<long long>(saved_ranks), comm.size());
    if (log) std::fprintf(log, "resuming %s from step %lld\n", opt.out_dir.c_str(), static_cast<long long>(start_step));
  } else if (!opt.init_from.empty()) {
    LoadedCheckpoint init = load_checkpoint(opt.init_from, true);
    tok = std::move(init.tokenizer);
    if (opt.dropout >= 0) {  // the config is fixed at construction: rebuild with the new dropout
      json j = init.model->config().to_json();
      j["dropout"] = opt.dropout;
      auto with_dropout = std::make_unique<Model>(ModelConfig::from_json(j, "model config"), true);
      // Dropout declares no parameters: the two tables have one layout.
      std::copy_n(init.model->params().values_block(), init.model->params().total_floats(),
                  with_dropout->params().values_block());
      init.model = std::move(with_dropout);
    }
    require_memory(init.model->config());
    model = std::move(init.model);
    if (log) std::fprintf(log, "fine-tuning %s from %s\n", opt.out_dir.c_str(), init.dir.c_str());
  } else {
    tok = make_tokenizer(opt, log);
    json j = base_cfg.to_json();
    j["vocab_size"] = tok->vocab_size();
    if (opt.dropout >= 0) j["dropout"] = opt.dropout;
    const ModelConfig cfg = ModelConfig::from_json(j, "model config");
    require_memory(cfg);
    model = std::make_unique<Model>(cfg, true);
    model->init(opt.seed);
  }
  // Published models may pad their vocabulary beyond the tokenizer's.
  HYMBA_CHECK(opt.init_from.empty() ? model->config().vocab_size == tok->vocab_size()
                                    : model->config().vocab_size >= tok->vocab_size(),
              "tokenizer has ", tok->vocab_size(), " tokens but the model's vocab_size is ",
              model->config().vocab_size);

  const TokenDataset data = TokenDataset::build(opt.data, *tok, dataset_options(opt));
  const int64_t stride = data.window_stride();
  const BatchSampler sampler =
      opt.batching_epochs ? BatchSampler::epochs(data.train(), stride > 0 ? stride : opt.seq_len, opt.batch,
                                                 opt.seq_len, opt.seed)
                          : BatchSampler(data.train(), opt.batch, opt.seq_len, opt.seed);
  // Checked now, not at the first evaluation after minutes of training.
  HYMBA_CHECK(num_eval_windows(data.val(), opt.seq_len, stride) > 0, "--seq-len ", opt.seq_len, ": the validation split of ",
              opt.data, " has ", data.val().size(), " tokens, fewer than one window of ", opt.seq_len + 1,
              "; lower --seq-len or raise --val-fraction");
  const int64_t total = opt.steps > 0 ? opt.steps
                        : opt.epochs > 0
                            ? std::max<int64_t>(1, std::llround(opt.epochs * sampler.steps_per_epoch() / opt.grad_accum))
                            : 200;
  // Seed 002's budget: the schedule spans `total` steps, but training stops
  // after stop_epochs passes over the data (its epochs=1 ends before warmup).
  const int64_t stop =
      opt.stop_epochs > 0
          ? std::min<int64_t>(total, std::max<int64_t>(1, static_cast<int64_t>(std::floor(
                                                              opt.stop_epochs * sampler.steps_per_epoch() /
                                                              static_cast<double>(opt.grad_accum)))))
          : total;
  const std::string summary_path = (fs::path(opt.out_dir) / kSummaryFile).string();
  if (opt.resume && start_step >= stop && opt.resume_finished) {
    TrainSummary done;
    done.params = model->params().num_params();
    done.steps = start_step;
    done.tokens = state.tokens;
    done.final_train_loss = state.final_train_loss;
    done.best_val_loss = state.best_val_loss;
    done.best_val_ppl = std::exp(done.best_val_loss);
    done.best_step = state.best_step;
    done.final_val_loss = state.final_val_loss;
    done.final_val_ppl = std::exp(done.final_val_loss);
    done.final_val_acc = state.final_val_accuracy;
    done.train_tokens_per_s = state.train_seconds > 0 ? done.tokens / state.train_seconds : 0.0;
    done.wall_s = state.train_seconds;
    if (root) write_text_atomic(summary_path, done.to_json().dump(2) + "\n");
    return done;
  }
  HYMBA_CHECK(start_step < stop, "--resume: the run already finished its ", stop, " steps");
  if (log) {
    std::fprintf(log, "model: %.3fM parameters, vocab %lld; data: %zu train / %zu val tokens (%s%s)\n",
                 model->params().num_params() / 1e6, static_cast<long long>(tok->vocab_size()), data.train().size(),
                 data.val().size(), data.cache_path().c_str(), data.loaded_from_cache() ? ", cached" : "");
    std::fprintf(log, "training %lld steps of %lld x %lld tokens (x%lld accumulation), %d threads",
                 static_cast<long long>(stop), static_cast<long long>(opt.batch), static_cast<long long>(opt.seq_len),
                 static_cast<long long>(opt.grad_accum), num_threads());
    if (comm.size() > 1) std::fprintf(log, " on each of %d MPI ranks", comm.size());
    std::fprintf(log, "\n");
  }

  LrSchedule sched;
  sched.peak = opt.lr;
  sched.floor = opt.lr * opt.min_lr_ratio;
  sched.warmup = opt.warmup;
  sched.total = total;

  const std::string metrics_path = (fs::path(opt.out_dir) / kMetricsFile).string();
  std::optional<MetricsLog> metrics;
  if (root) {
    if (opt.resume) truncate_metrics(metrics_path, start_step);
    else write_text_atomic(metrics_path, "");
    metrics.emplace(metrics_path);
  }

  TrainSummary sum;
  sum.params = model->params().num_params();
  // JSON has no infinity: "no evaluation yet" is stored as null.
  sum.best_val_loss = state.best_val_loss;
  sum.best_step = state.best_step;
  sum.tokens = state.tokens;
  double train_seconds = state.train_seconds;
  const Rng dropout_root = Rng(opt.seed).split(0xD409);
  // One dropout stream serves the residual and the attention dropout.
  const bool use_dropout = model->config().dropout > 0 || model->config().attention_dropout > 0;

  // A resume given the run's own tokenizer file (compared by content) keeps
  // the tokenizer the run recorded, so a later plain --resume still matches.
  auto recipe_to_save = [&] {
    json recipe = run_recipe(opt, model->config().dropout);
    if (comm.size() > 1) recipe["ranks"] = comm.size();
    if (opt.resume && !opt.tokenizer_path.empty())
      for (auto it = saved_run.begin(); it != saved_run.end(); ++it)
        if (it.key().rfind("tokenizer_", 0) == 0) recipe[it.key()] = it.value();
    return recipe;
  };
  auto checkpoint_state = [&](int64_t step_done) {
    return json{{"step", step_done},
                {"tokens", sum.tokens},
                {"best_val_loss", std::isfinite(sum.best_val_loss) ? json(sum.best_val_loss) : json()},
                {"best_step", sum.best_step},
                {"train_seconds", train_seconds},
                {"final_train_loss", sum.final_train_loss},
                {"final_val_loss", sum.final_val_loss},
                {"final_val_accuracy", sum.final_val_acc},
                {"run", recipe_to_save()}};
  };
  auto run_eval = [&](int64_t step_done, Progress& progress) -> EvalResult {
    EvalResult r;
    const bool untrained = step_done == 0;  // eval_at_start: a curve's first point, never the best
    try {
      r = evaluate_shared(*model, data.val(), opt.seq_len, opt.batch, opt.eval_windows, comm, stride);
    } catch (const dist::PeerLost&) {
      throw;  // the loop names the checkpoint
    } catch (const Error& e) {  // a non-finite loss: name the run whose weights gave it
      throw Error(opt.out_dir + ": " + e.what());
    }
    if (!untrained) {
      sum.final_val_loss = r.loss;
      sum.final_val_ppl = r.ppl;
      sum.final_val_acc = r.accuracy;
    }
    const bool best = !untrained && r.loss < sum.best_val_loss;
    if (best) {
      sum.best_val_loss = r.loss;
      sum.best_step = step_done;
      if (root)
        save_inference_checkpoint((fs::path(opt.out_dir) / kBestDir).string(), *model, *tok,
                                {{"step", std::to_string(step_done)}});
    }
    if (metrics) {
      json record = {{"step", step_done}, {"val_loss", r.loss}, {"val_ppl", r.ppl}, {"val_accuracy", r.accuracy}};
      // Learned-beta fusion: the attention share per layer as it moves (seed 003's question).
      if (const std::vector<double> mixing = learned_attention_mixing(*model); !mixing.empty())
        record["attention_mixing"] = mixing;
      metrics->write(record);
    }
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld: val loss %.4f ppl %.2f acc %.3f%s",
                  static_cast<long long>(step_done), r.loss, r.ppl, r.accuracy, best ? " (best)" : "");
    if (log) progress.note(line);
    return r;
  };

  Progress progress(log ? log : stderr, stop, start_step, opt.log_interval, opt.plain_progress);
  std::vector<int32_t> ids, targets;
  double loss_window = 0.0;
  int64_t window_steps = 0;
  double window_seconds = 0.0;
  int64_t window_tokens = 0;
  // This rank's rows of every batch; the ranks' shares cover the batch in order.
  const int64_t row_begin = opt.batch * comm.rank() / comm.size();
  const int64_t rows = opt.batch * (comm.rank() + 1) / comm.size() - row_begin;
  // A stop (signal or hook) on any rank stops all of them at the same step.
  auto agreed_stop_signal = [&]() -> int {
    int sig = stop_signal();
    if (comm.size() == 1) return sig;
    double any = sig != 0 ? 1.0 : 0.0;
    comm.sum(&any, 1);
    return sig != 0 ? sig : any > 0 ? SIGTERM : 0;
  };
  std::optional<ShardedGradient> sharded;
  if (opt.grad_shards > 0) sharded.emplace(opt.grad_shards, opt.batch, opt.seq_len, opt.grad_accum, comm);
  if (sharded) sharded->set_recompute(opt.recompute);
  double grad_sum_seconds = 0.0;  // the gradient sums alone, after every rank arrived
  double comm_seconds = 0.0;  // of the steps' time, in sums across ranks (waits for slower ranks included)
  // A rank that stops mid-run (killed, out of memory, hung) is named by the
  // ranks that waited for it, with the checkpoint a --resume would continue.
  try {
    if (opt.eval_at_start && start_step == 0) run_eval(0, progress);
    for (int64_t step = start_step; step < stop; ++step) {
      if (const int sig = agreed_stop_signal(); sig != 0 && step == start_step) {
        progress.finish();
        throw Interrupted(stop_reason(sig) + " before the first step; " +
                              (opt.resume ? "the run's checkpoint is unchanged" : "nothing was saved"),
                          sig);
      }
      const auto t0 = std::chrono::steady_clock::now();
      const double comm_at_t0 = comm.sum_seconds();
      const double lr = sched.at(step);
      model->params().zero_grad();
      double step_loss = 0.0;
      // This step's forward and backward in the run's precision (not its evaluation).
      std::optional<cpu::MatmulPrecisionScope> autocast;
      autocast.emplace(opt.precision, opt.bf16_isa.value_or(cpu::best_bf16_gemm_isa()));
      if (sharded) {
        const ShardedGradient::Step st =
            sharded->compute(*model, sampler, step, opt.label_smoothing, use_dropout ? &dropout_root : nullptr);
        if (!std::isfinite(st.worst_mean)) {
          progress.finish();
          fail("loss became ", st.worst_mean, " at step ", step + 1, "; stopped. The last good checkpoint is kept in ",
               opt.out_dir, " (try a lower --lr or --grad-clip)");
        }
        step_loss = st.loss;
      }
      for (int64_t micro = 0; micro < (sharded ? 0 : opt.grad_accum); ++micro) {
        const int64_t draw = step * opt.grad_accum + micro;
        sampler.batch_at(draw, ids, targets);
        ForwardOptions fo;
        fo.label_smoothing = opt.label_smoothing;
        fo.recompute = opt.recompute;
        // Each rank draws its own masks (they cover its rows only).
        const Rng drop = comm.size() == 1 ? dropout_root.split(static_cast<uint64_t>(draw))
                                          : dropout_root.split(static_cast<uint64_t>(draw)).split(
                                                0xD15700 + static_cast<uint64_t>(comm.rank()));
        if (use_dropout) fo.dropout_rng = &drop;
        const int64_t first = row_begin * opt.seq_len;
        const LossStats s = model->forward(ids.data() + first, targets.data() + first, rows, opt.seq_len, fo);
        // The loss is the mean over the whole batch's scored tokens, on every rank.
        double batch_sums[2] = {s.loss_sum, static_cast<double>(s.scored)};
        comm.sum(batch_sums, 2);
        const double mean = batch_sums[1] > 0 ? batch_sums[0] / batch_sums[1] : 0.0;
        if (!std::isfinite(mean)) {
          progress.finish();
          fail("loss became ", mean, " at step ", step + 1, "; stopped. The last good checkpoint is kept in ",
               opt.out_dir, " (try a lower --lr or --grad-clip)");
        }
        step_loss += mean / static_cast<double>(opt.grad_accum);
        // d(batch mean) is the ranks' sum of (scored here / scored) d(mean here).
        const double share = comm.size() == 1 ? 1.0 : static_cast<double>(s.scored) / batch_sums[1];
        model->backward(comm.size() == 1 ? 1.0f / static_cast<float>(opt.grad_accum)
                                         : static_cast<float>(share / static_cast<double>(opt.grad_accum)));
      }
      autocast.reset();
      if (!sharded) grad_sum_seconds += timed_grad_sum(comm, model->params());
      const double norm = clip_grad_norm(model->params(), opt.grad_clip);
      if (!std::isfinite(norm)) {
        progress.finish();
        fail("gradient norm became ", norm, " at step ", step + 1, "; stopped. The last good checkpoint is kept in ",
             opt.out_dir);
      }
      adamw_step(model->params(), opt.adamw, lr, step + 1);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int64_t step_tokens = opt.batch * opt.seq_len * opt.grad_accum;
      train_seconds += dt;
      comm_seconds += comm.sum_seconds() - comm_at_t0;
      sum.tokens += step_tokens;
      sum.final_train_loss = step_loss;
      loss_window += step_loss;
      ++window_steps;
      window_seconds += dt;
      window_tokens += step_tokens;
      const int64_t done = step + 1;
      const double tok_s = window_seconds > 0 ? window_tokens / window_seconds : 0.0;
      if (log) progress.update(step, step_loss, lr, tok_s);
      if (done % opt.log_interval == 0 || done == stop) {
        if (metrics) metrics->write({{"step", done},
                       {"loss", step_loss},
                       {"loss_avg", loss_window / static_cast<double>(window_steps)},
                       {"lr", lr},
                       {"grad_norm", norm},
                       {"tokens_per_s", tok_s},
                       {"tokens", sum.tokens}});
        loss_window = 0.0;
        window_steps = 0;
        window_seconds = 0.0;
        window_tokens = 0;
      }
      std::optional<EvalResult> evaluated;
      if (done % opt.eval_interval == 0 || done == stop) evaluated = run_eval(done, progress);
      const bool saved = done % opt.save_interval == 0 || done == stop;
      if (saved && root) save_training_checkpoint(opt.out_dir, done, *model, *tok, checkpoint_state(done));
      if (opt.on_step) {
        json record = {{"step", done},    {"steps", stop},     {"loss", step_loss},     {"lr", lr},
                       {"grad_norm", norm}, {"tokens_per_s", tok_s}, {"tokens", sum.tokens}};
        if (evaluated) {
          record["val_loss"] = evaluated->loss;
          record["val_ppl"] = evaluated->ppl;
          record["val_accuracy"] = evaluated->accuracy;
        }
        if (!opt.on_step(record)) hook_stopped = true;
      }
      // A signal during the last step lets the run finish: it is complete.
      if (const int sig = agreed_stop_signal(); sig != 0 && done < stop) {
        progress.finish();
        if (!saved && root) save_training_checkpoint(opt.out_dir, done, *model, *tok, checkpoint_state(done));
        throw Interrupted(stop_reason(sig) + ": stopped after step " +
                              std::to_string(done) + " of " + std::to_string(stop) + " and saved " +
                              (fs::path(opt.out_dir) / ("ckpt-" + std::to_string(done))).string() +
                              "; rerun with --resume to continue",
                          sig);
      }
    }
  } catch (const dist::PeerLost& lost) {
    progress.finish();
    std::string last;
    try {
      last = "the last checkpoint " + resolve_checkpoint(opt.out_dir) + " is intact";
    } catch (const Error&) {
      last = "no checkpoint was saved yet";
    }
    fail(lost.what(), "; ", last, " (rerun with --resume to continue)");
  }
  progress.finish();
  sum.steps = stop;
  sum.best_val_ppl = std::exp(sum.best_val_loss);
  sum.train_tokens_per_s = train_seconds > 0 ? sum.tokens / train_seconds : 0.0;
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.peak_rss_scope = rss_from_here ? "run" : "process";
  sum.activation_peak_bytes = static_cast<int64_t>(model->activation_bytes());
  sum.ranks = comm.size();
  const double trained_here = train_seconds - state.train_seconds;
  sum.comm_share = trained_here > 0 ? comm_seconds / trained_here : 0.0;
  if (sharded) grad_sum_seconds = sharded->grad_sum_seconds();
  sum.grad_sum_share = trained_here > 0 ? grad_sum_seconds / trained_here : 0.0;
  if (log && comm.size() > 1)
    std::fprintf(log,
                 "data-parallel over %d ranks: %.1f%% of the training time went to sums across ranks (waits for a "
                 "slower rank included), %.1f%% to the gradient sums alone\n",
                 comm.size(), 100.0 * sum.comm_share, 100.0 * sum.grad_sum_share);
  if (root) write_text_atomic(summary_path, sum.to_json().dump(2) + "\n");
  return sum;
}

}  // namespace hymba
