#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threading.h"
#include "data/corpus.h"
#include "eval/evaluate.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "train/progress.h"
#include "train/run_state.h"

namespace hymba {

namespace fs = std::filesystem;
using nlohmann::json;

nlohmann::json TrainSummary::to_json() const {
  return {{"params", params},
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
          {"wall_s", wall_s}};
}

namespace {

// The options that must not change across a resume, or the run would not be
// the same run (bit-identical losses need the same data and schedule).
json run_identity(const TrainOptions& o) {
  return {{"data", o.data},           {"batch", o.batch},         {"seq_len", o.seq_len},
          {"grad_accum", o.grad_accum}, {"seed", o.seed},         {"lr", o.lr},
          {"min_lr_ratio", o.min_lr_ratio}, {"warmup", o.warmup}, {"val_fraction", o.val_fraction},
          {"label_smoothing", o.label_smoothing}, {"threads", num_threads()}};
}

void validate(const TrainOptions& o) {
  HYMBA_CHECK(!o.out_dir.empty(), "--out: a run directory is required");
  HYMBA_CHECK(o.batch >= 1, "--batch must be >= 1 (got ", o.batch, ")");
  HYMBA_CHECK(o.seq_len >= 1, "--seq-len must be >= 1 (got ", o.seq_len, ")");
  HYMBA_CHECK(o.grad_accum >= 1, "--grad-accum must be >= 1 (got ", o.grad_accum, ")");
  HYMBA_CHECK(o.steps >= 0, "--steps must be >= 0");
  HYMBA_CHECK(o.epochs >= 0, "--epochs must be >= 0");
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
  HYMBA_CHECK(o.log_interval >= 1 && o.eval_interval >= 1 && o.save_interval >= 1,
              "--log-interval/--eval-interval/--save-interval must be >= 1");
}

std::unique_ptr<Tokenizer> make_tokenizer(const TrainOptions& o, std::FILE* log) {
  if (!o.tokenizer_path.empty()) return load_tokenizer(o.tokenizer_path);
  const TokenizerKind kind = parse_tokenizer_kind(o.tokenizer_type);
  if (kind == TokenizerKind::kByte) return make_byte_tokenizer();
  if (log) std::fprintf(log, "training a %s tokenizer (vocab %d) on %s...\n", to_string(kind), o.tokenizer_vocab,
                        o.data.c_str());
  TokenizerTrainOptions t;
  t.kind = kind;
  t.vocab_size = o.tokenizer_vocab;
  t.seed = o.seed;
  return train_tokenizer(read_documents(o.data), t);
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
    } catch (const json::parse_error&) {
      break;  // a line cut by the kill: everything after it is gone too
    }
  }
  write_text_atomic(path, kept);
}

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) : out_(path, std::ios::app) {
    HYMBA_CHECK(out_.good(), path, ": cannot open for writing");
  }
  void write(const json& record) {
    out_ << record.dump() << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

}  // namespace

TrainSummary train(const ModelConfig& base_cfg, const TrainOptions& opt) {
  validate(opt);
  set_num_threads(opt.threads);
  std::FILE* log = opt.quiet ? nullptr : stderr;
  const auto t_start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create run directory (", ec.message(), ")");
  const std::string latest = (fs::path(opt.out_dir) / kLatestFile).string();
  const bool has_run = fs::exists(latest);
  HYMBA_CHECK(!has_run || opt.resume, opt.out_dir, ": already holds a run; pass --resume to continue it or choose another --out");
  HYMBA_CHECK(!opt.resume || has_run, opt.out_dir, ": --resume given but there is no checkpoint to resume");

  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Model> model;
  json state = json::object();
  int64_t start_step = 0;
  if (opt.resume) {
    const std::string ckpt = resolve_checkpoint(opt.out_dir);
    state = read_json_file((fs::path(ckpt) / kTrainStateFile).string());
    const json saved = state.at("run");
    const json now = run_identity(opt);
    for (auto it = now.begin(); it != now.end(); ++it)
      HYMBA_CHECK(saved.contains(it.key()) && saved[it.key()] == it.value(), "--resume: option '", it.key(),
                  "' was ", saved.value(it.key(), json()).dump(), " in this run, now ", it.value().dump());
    tok = load_tokenizer((fs::path(ckpt) / kTokenizerFile).string());
    model = load_model(ckpt, true);
    load_optimizer_state(ckpt, *model);
    start_step = state.at("step").get<int64_t>();
    if (log) std::fprintf(log, "resuming %s from step %lld\n", opt.out_dir.c_str(), static_cast<long long>(start_step));
  } else {
    tok = make_tokenizer(opt, log);
    json j = base_cfg.to_json();
    j["vocab_size"] = tok->vocab_size();
    if (opt.dropout >= 0) j["dropout"] = opt.dropout;
    model = std::make_unique<Model>(ModelConfig::from_json(j, "model config"), true);
    model->init(opt.seed);
  }
  HYMBA_CHECK(model->config().vocab_size == tok->vocab_size(), "tokenizer has ", tok->vocab_size(),
              " tokens but the model's vocab_size is ", model->config().vocab_size);

  DatasetOptions dopt;
  dopt.val_fraction = opt.val_fraction;
  dopt.split_seed = opt.seed;
  const TokenDataset data = TokenDataset::build(opt.data, *tok, dopt);
  const BatchSampler sampler(data.train(), opt.batch, opt.seq_len, opt.seed);
  const int64_t total = opt.steps > 0 ? opt.steps
                        : opt.epochs > 0
                            ? std::max<int64_t>(1, std::llround(opt.epochs * sampler.steps_per_epoch() / opt.grad_accum))
                            : 200;
  const std::string summary_path = (fs::path(opt.out_dir) / kSummaryFile).string();
  if (opt.resume && start_step >= total && opt.resume_finished && state.contains("final_val_loss")) {
    TrainSummary done;
    done.params = model->params().num_params();
    done.steps = start_step;
    done.tokens = state.value("tokens", int64_t{0});
    done.final_train_loss = state.value("final_train_loss", 0.0);
    done.best_val_loss = state.value("best_val_loss", 0.0);
    done.best_val_ppl = std::exp(done.best_val_loss);
    done.best_step = state.value("best_step", int64_t{-1});
    done.final_val_loss = state.value("final_val_loss", 0.0);
    done.final_val_ppl = std::exp(done.final_val_loss);
    done.final_val_acc = state.value("final_val_accuracy", 0.0);
    const double seconds = state.value("train_seconds", 0.0);
    done.train_tokens_per_s = seconds > 0 ? done.tokens / seconds : 0.0;
    done.wall_s = seconds;
    write_text_atomic(summary_path, done.to_json().dump(2) + "\n");
    return done;
  }
  HYMBA_CHECK(start_step < total, "--resume: the run already finished its ", total, " steps");
  if (log) {
    std::fprintf(log, "model: %.3fM parameters, vocab %lld; data: %zu train / %zu val tokens (%s%s)\n",
                 model->params().num_params() / 1e6, static_cast<long long>(tok->vocab_size()), data.train().size(),
                 data.val().size(), data.cache_path().c_str(), data.loaded_from_cache() ? ", cached" : "");
    std::fprintf(log, "training %lld steps of %lld x %lld tokens (x%lld accumulation), %d threads\n",
                 static_cast<long long>(total), static_cast<long long>(opt.batch), static_cast<long long>(opt.seq_len),
                 static_cast<long long>(opt.grad_accum), num_threads());
  }

  LrSchedule sched;
  sched.peak = opt.lr;
  sched.floor = opt.lr * opt.min_lr_ratio;
  sched.warmup = opt.warmup;
  sched.total = total;

  const std::string metrics_path = (fs::path(opt.out_dir) / kMetricsFile).string();
  if (opt.resume) truncate_metrics(metrics_path, start_step);
  else write_text_atomic(metrics_path, "");
  MetricsLog metrics(metrics_path);

  TrainSummary sum;
  sum.params = model->params().num_params();
  // JSON has no infinity: "no evaluation yet" is stored as null.
  sum.best_val_loss = state.contains("best_val_loss") && state["best_val_loss"].is_number()
                          ? state["best_val_loss"].get<double>()
                          : INFINITY;
  sum.best_step = state.value("best_step", int64_t{-1});
  sum.tokens = state.value("tokens", int64_t{0});
  double train_seconds = state.value("train_seconds", 0.0);
  const Rng dropout_root = Rng(opt.seed).split(0xD409);
  const bool use_dropout = model->config().dropout > 0;

  auto checkpoint_state = [&](int64_t step_done) {
    return json{{"step", step_done},
                {"tokens", sum.tokens},
                {"best_val_loss", std::isfinite(sum.best_val_loss) ? json(sum.best_val_loss) : json()},
                {"best_step", sum.best_step},
                {"train_seconds", train_seconds},
                {"final_train_loss", sum.final_train_loss},
                {"final_val_loss", sum.final_val_loss},
                {"final_val_accuracy", sum.final_val_acc},
                {"run", run_identity(opt)}};
  };
  auto run_eval = [&](int64_t step_done, Progress& progress) {
    const EvalResult r = evaluate(*model, data.val(), opt.seq_len, opt.batch, opt.eval_windows);
    sum.final_val_loss = r.loss;
    sum.final_val_ppl = r.ppl;
    sum.final_val_acc = r.accuracy;
    const bool best = r.loss < sum.best_val_loss;
    if (best) {
      sum.best_val_loss = r.loss;
      sum.best_step = step_done;
      save_inference_checkpoint((fs::path(opt.out_dir) / kBestDir).string(), *model, *tok,
                                {{"step", std::to_string(step_done)}});
    }
    metrics.write({{"step", step_done}, {"val_loss", r.loss}, {"val_ppl", r.ppl}, {"val_accuracy", r.accuracy}});
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld: val loss %.4f ppl %.2f acc %.3f%s",
                  static_cast<long long>(step_done), r.loss, r.ppl, r.accuracy, best ? " (best)" : "");
    if (log) progress.note(line);
  };

  Progress progress(log ? log : stderr, total, start_step, opt.log_interval, opt.plain_progress);
  std::vector<int32_t> ids, targets;
  double loss_window = 0.0;
  int64_t window_steps = 0;
  double window_seconds = 0.0;
  int64_t window_tokens = 0;
  for (int64_t step = start_step; step < total; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = sched.at(step);
    model->params().zero_grad();
    double step_loss = 0.0;
    for (int64_t micro = 0; micro < opt.grad_accum; ++micro) {
      const int64_t draw = step * opt.grad_accum + micro;
      sampler.batch_at(draw, ids, targets);
      ForwardOptions fo;
      fo.label_smoothing = opt.label_smoothing;
      const Rng drop = dropout_root.split(static_cast<uint64_t>(draw));
      if (use_dropout) fo.dropout_rng = &drop;
      const LossStats s = model->forward(ids.data(), targets.data(), opt.batch, opt.seq_len, fo);
      const double mean = s.scored > 0 ? s.loss_sum / static_cast<double>(s.scored) : 0.0;
      if (!std::isfinite(mean)) {
        progress.finish();
        fail("loss became ", mean, " at step ", step + 1, "; stopped. The last good checkpoint is kept in ",
             opt.out_dir, " (try a lower --lr or --grad-clip)");
      }
      step_loss += mean / static_cast<double>(opt.grad_accum);
      model->backward(1.0f / static_cast<float>(opt.grad_accum));
    }
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
    sum.tokens += step_tokens;
    sum.final_train_loss = step_loss;
    loss_window += step_loss;
    ++window_steps;
    window_seconds += dt;
    window_tokens += step_tokens;
    const int64_t done = step + 1;
    const double tok_s = window_seconds > 0 ? window_tokens / window_seconds : 0.0;
    if (log) progress.update(step, step_loss, lr, tok_s);
    if (done % opt.log_interval == 0 || done == total) {
      metrics.write({{"step", done},
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
    if (done % opt.eval_interval == 0 || done == total) run_eval(done, progress);
    if (done % opt.save_interval == 0 || done == total)
      save_training_checkpoint(opt.out_dir, done, *model, *tok, checkpoint_state(done));
  }
  progress.finish();
  sum.steps = total;
  sum.best_val_ppl = std::exp(sum.best_val_loss);
  sum.train_tokens_per_s = train_seconds > 0 ? sum.tokens / train_seconds : 0.0;
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  write_text_atomic(summary_path, sum.to_json().dump(2) + "\n");
  return sum;
}

}  // namespace hymba
