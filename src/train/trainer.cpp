#include "train/trainer.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/batch_sampler.h"
#include "eval/evaluate.h"
#include "model/mixing.h"
#include "model/model.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/run_start.h"
#include "train/run_state.h"
#include "train/sharded_gradient.h"
#include "train/step_loop.h"
#include "train/step_profile.h"
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
  if (!profile.is_null()) j["profile"] = profile;
  return j;
}

namespace {

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


// A resumed run whose last checkpoint is its final step: the summary its
// checkpoint records, with nothing trained.
TrainSummary finished_summary(const Model& model, const SavedState& state) {
  TrainSummary done;
  done.params = model.params().num_params();
  done.steps = state.step;
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
  return done;
}

// The schedule's length and the step training stops after.
struct StepPlan {
  int64_t total = 0, stop = 0;
};

StepPlan plan_steps(const TrainOptions& opt, const BatchSampler& sampler) {
  StepPlan p;
  p.total = opt.steps > 0 ? opt.steps
            : opt.epochs > 0
                ? std::max<int64_t>(1, std::llround(opt.epochs * sampler.steps_per_epoch() / opt.grad_accum))
                : 200;
  // Seed 002's budget: the schedule spans `total` steps, but training stops
  // after stop_epochs passes over the data (its epochs=1 ends before warmup).
  p.stop = opt.stop_epochs > 0
               ? std::min<int64_t>(p.total, std::max<int64_t>(1, static_cast<int64_t>(std::floor(
                                                                     opt.stop_epochs * sampler.steps_per_epoch() /
                                                                     static_cast<double>(opt.grad_accum)))))
               : p.total;
  return p;
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

// SIGINT/SIGTERM (unless the caller watches them) and the on_step hook both
// stop the run at a step boundary; a stop on any rank stops all of them at
// the same step.
class StopRequests {
 public:
  explicit StopRequests(bool catch_signals) {
    if (catch_signals) signals_.emplace();
  }
  void hook_asked() { hook_stopped_ = true; }
  int agreed(const dist::Communicator& comm) const {
    const int sig = local();
    if (comm.size() == 1) return sig;
    double any = sig != 0 ? 1.0 : 0.0;
    comm.sum(&any, 1);
    return sig != 0 ? sig : any > 0 ? SIGTERM : 0;
  }
  std::string reason(int sig) const {
    return hook_stopped_ ? std::string("interrupted") : std::string("interrupted by ") + signal_name(sig);
  }

 private:
  int local() const { return hook_stopped_ ? SIGINT : signals_ ? StopSignals::received() : 0; }
  std::optional<StopSignals> signals_;
  bool hook_stopped_ = false;
};

// The steps since the last metrics record.
struct StepWindow {
  double loss = 0.0, seconds = 0.0;
  int64_t steps = 0, tokens = 0;
  double tokens_per_s() const { return seconds > 0 ? tokens / seconds : 0.0; }
};

// One run's parts of the shared step loop (train/step_loop.h), from its
// start to its stop step: gradients, AdamW, metrics, evaluations with the
// best checkpoint, periodic checkpoints and stops at step boundaries.
class TrainingLoop final : public StepHooks {
 public:
  TrainingLoop(const TrainOptions& opt, const dist::Communicator& comm, std::FILE* log, RunStart& start,
               const TokenDataset& data, const BatchSampler& sampler, const StepPlan& plan, StopRequests& stops)
      : opt_(opt), comm_(comm), log_(log), root_(comm.is_root()), run_(start), data_(data), sampler_(sampler),
        stop_(plan.stop), stops_(stops), progress_(log ? log : stderr, plan.stop, start.start_step, opt.log_interval,
                                                   opt.plain_progress) {
    sched_.peak = opt.lr;
    sched_.floor = opt.lr * opt.min_lr_ratio;
    sched_.warmup = opt.warmup;
    sched_.total = plan.total;
    sum_.params = model().params().num_params();
    // JSON has no infinity: "no evaluation yet" is stored as null.
    sum_.best_val_loss = run_.state.best_val_loss;
    sum_.best_step = run_.state.best_step;
    sum_.tokens = run_.state.tokens;
    train_seconds_ = run_.state.train_seconds;
    // This rank's rows of every batch; the ranks' shares cover the batch in order.
    row_begin_ = opt.batch * comm.rank() / comm.size();
    rows_ = opt.batch * (comm.rank() + 1) / comm.size() - row_begin_;
    // One dropout stream serves the residual and the attention dropout.
    use_dropout_ = model().config().dropout > 0 || model().config().attention_dropout > 0;
    if (opt.grad_shards > 0) sharded_.emplace(opt.grad_shards, opt.batch, opt.seq_len, opt.grad_accum, comm);
    if (sharded_) sharded_->set_recompute(opt.recompute);
    if (opt.profile) profile_.emplace();
  }

  void open_metrics(const std::string& path) {
    if (!root_) return;
    if (opt_.resume) truncate_metrics(path, run_.start_step);
    else write_text_atomic(path, "");
    metrics_.emplace(path);
  }

  // A rank that stops mid-run (killed, out of memory, hung) is named by the
  // ranks that waited for it, with the checkpoint a --resume would continue.
  void run() {
    try {
      if (opt_.eval_at_start && run_.start_step == 0) validate(0);
      StepLoopPlan plan;
      plan.start = run_.start_step;
      plan.stop = stop_;
      plan.lr = [this](int64_t step) { return sched_.at(step); };
      plan.log_every = opt_.log_interval;
      plan.eval_every = opt_.eval_interval;
      plan.save_every = opt_.save_interval;
      plan.progress = log_ ? &progress_ : nullptr;
      run_step_loop(plan, *this);
    } catch (const dist::PeerLost& lost) {
      progress_.finish();
      std::string last;
      try {
        last = "the last checkpoint " + resolve_checkpoint(opt_.out_dir) + " is intact";
      } catch (const Error&) {
        last = "no checkpoint was saved yet";
      }
      fail(lost.what(), "; ", last, " (rerun with --resume to continue)");
    }
    progress_.finish();
  }

  // The summary once run() returned; wall_s and peak RSS are the caller's.
  TrainSummary summary() {
    sum_.steps = stop_;
    sum_.best_val_ppl = std::exp(sum_.best_val_loss);
    sum_.train_tokens_per_s = train_seconds_ > 0 ? sum_.tokens / train_seconds_ : 0.0;
    sum_.activation_peak_bytes = static_cast<int64_t>(model().activation_bytes());
    sum_.ranks = comm_.size();
    const double trained_here = train_seconds_ - run_.state.train_seconds;
    sum_.comm_share = trained_here > 0 ? comm_seconds_ / trained_here : 0.0;
    const double grad_sum_seconds = sharded_ ? sharded_->grad_sum_seconds() : grad_sum_seconds_;
    sum_.grad_sum_share = trained_here > 0 ? grad_sum_seconds / trained_here : 0.0;
    if (profile_) sum_.profile = profile_report(*profile_, opt_.precision);
    return sum_;
  }

 private:
  Model& model() { return *run_.model; }
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  [[noreturn]] void stop_on(const char* what, double value, int64_t step, const char* advice) {
    progress_.finish();
    fail(what, " became ", value, " at step ", step + 1, "; stopped. The last good checkpoint is kept in ", opt_.out_dir,
         advice);
  }

  // The step's gradients, summed over micro-batches (or shards) and ranks;
  // returns the step's loss, the mean over the whole batch's scored tokens.
  double accumulate_gradients(int64_t step, const Rng& dropout_root) {
    double step_loss = 0.0;
    const Rng* dropout = use_dropout_ ? &dropout_root : nullptr;
    // This step's forward and backward in the run's precision (not its evaluation).
    cpu::MatmulPrecisionScope autocast(opt_.precision, opt_.bf16_isa.value_or(cpu::best_bf16_gemm_isa()));
    if (sharded_) {
      const ShardedGradient::Step st = sharded_->compute(model(), sampler_, step, opt_.label_smoothing, dropout);
      if (!std::isfinite(st.worst_mean)) stop_on("loss", st.worst_mean, step, " (try a lower --lr or --grad-clip)");
      return st.loss;
    }
    for (int64_t micro = 0; micro < opt_.grad_accum; ++micro) {
      const int64_t draw = step * opt_.grad_accum + micro;
      sampler_.batch_at(draw, ids_, targets_);
      ForwardOptions fo;
      fo.label_smoothing = opt_.label_smoothing;
      fo.recompute = opt_.recompute;
      // Each rank draws its own masks (they cover its rows only).
      const Rng drop = comm_.size() == 1 ? dropout_root.split(static_cast<uint64_t>(draw))
                                         : dropout_root.split(static_cast<uint64_t>(draw)).split(
                                               0xD15700 + static_cast<uint64_t>(comm_.rank()));
      if (dropout) fo.dropout_rng = &drop;
      const int64_t first = row_begin_ * opt_.seq_len;
      const auto t_forward = std::chrono::steady_clock::now();
      const LossStats s = model().forward(ids_.data() + first, targets_.data() + first, rows_, opt_.seq_len, fo);
      forward_seconds_ += seconds_since(t_forward);
      // The loss is the mean over the whole batch's scored tokens, on every rank.
      double batch_sums[2] = {s.loss_sum, static_cast<double>(s.scored)};
      comm_.sum(batch_sums, 2);
      const double mean = batch_sums[1] > 0 ? batch_sums[0] / batch_sums[1] : 0.0;
      if (!std::isfinite(mean)) stop_on("loss", mean, step, " (try a lower --lr or --grad-clip)");
      step_loss += mean / static_cast<double>(opt_.grad_accum);
      // d(batch mean) is the ranks' sum of (scored here / scored) d(mean here).
      const double share = comm_.size() == 1 ? 1.0 : static_cast<double>(s.scored) / batch_sums[1];
      model().backward(comm_.size() == 1 ? 1.0f / static_cast<float>(opt_.grad_accum)
                                         : static_cast<float>(share / static_cast<double>(opt_.grad_accum)));
    }
    return step_loss;
  }

  // Every step asks the ranks whether to stop (a collective: each rank asks
  // at every step); before the first step that ends the run unsaved.
  void before_step(int64_t step) override {
    const int sig = stops_.agreed(comm_);
    if (sig == 0 || step != run_.start_step) return;
    progress_.finish();
    throw Interrupted(stops_.reason(sig) + " before the first step; " +
                          (opt_.resume ? "the run's checkpoint is unchanged" : "nothing was saved"),
                      sig);
  }

  double gradients(int64_t step) override {
    step_t0_ = std::chrono::steady_clock::now();
    comm_at_t0_ = comm_.sum_seconds();
    profiled_ = profile_ && step - run_.start_step >= StepProfile::kSkippedSteps ? &*profile_ : nullptr;
    if (profiled_) trace_.emplace(profiled_->products);
    forward_before_ = forward_seconds_;
    model().params().zero_grad();
    const double loss = accumulate_gradients(step, dropout_root_);
    if (!sharded_) grad_sum_seconds_ += timed_grad_sum(comm_, model().params());
    return loss;
  }

  double update(int64_t step, double lr) override {
    t_optimizer_ = std::chrono::steady_clock::now();
    const double norm = clip_grad_norm(model().params(), opt_.grad_clip);
    if (!std::isfinite(norm)) stop_on("gradient norm", norm, step, "");
    adamw_step(model().params(), opt_.adamw, lr, step + 1);
    optimizer_seconds_ = seconds_since(t_optimizer_);
    return norm;
  }

  void count(StepRecord& r) override {
    if (profiled_) {
      trace_.reset();
      ++profiled_->steps;
      profiled_->step_s += r.seconds;
      profiled_->optimizer_s += optimizer_seconds_;
      profiled_->gradients_s += std::chrono::duration<double>(t_optimizer_ - step_t0_).count();
      if (!sharded_) profiled_->forward_s += forward_seconds_ - forward_before_;
    }
    const int64_t step_tokens = opt_.batch * opt_.seq_len * opt_.grad_accum;
    train_seconds_ += r.seconds;
    comm_seconds_ += comm_.sum_seconds() - comm_at_t0_;
    sum_.tokens += step_tokens;
    sum_.final_train_loss = r.loss;
    window_.loss += r.loss;
    ++window_.steps;
    window_.seconds += r.seconds;
    window_.tokens += step_tokens;
    r.tokens_per_s = window_.tokens_per_s();
  }

  void log(const StepRecord& r) override {
    if (metrics_)
      metrics_->write({{"step", r.done},
                       {"loss", r.loss},
                       {"loss_avg", window_.loss / static_cast<double>(window_.steps)},
                       {"lr", r.lr},
                       {"grad_norm", r.grad_norm},
                       {"tokens_per_s", r.tokens_per_s},
                       {"tokens", sum_.tokens}});
    window_ = StepWindow{};
  }

  void evaluate(int64_t done) override { last_eval_ = validate(done); }

  void checkpoint(int64_t done) override {
    if (root_) save_training_checkpoint(opt_.out_dir, done, model(), *run_.tok, checkpoint_state(done));
  }

  // The on_step hook, then a stop asked by it or a signal.
  bool keep_going(const StepRecord& r) override {
    if (opt_.on_step) {
      json record = {{"step", r.done},         {"steps", stop_},     {"loss", r.loss},
                     {"lr", r.lr},             {"grad_norm", r.grad_norm}, {"tokens_per_s", r.tokens_per_s},
                     {"tokens", sum_.tokens}};
      if (r.evaluated) {
        record["val_loss"] = last_eval_.loss;
        record["val_ppl"] = last_eval_.ppl;
        record["val_accuracy"] = last_eval_.accuracy;
      }
      if (!opt_.on_step(record)) stops_.hook_asked();
    }
    stop_if_asked(r.done, r.saved);
    return true;
  }

  // A signal during the last step lets the run finish: it is complete.
  void stop_if_asked(int64_t done, bool saved) {
    const int sig = stops_.agreed(comm_);
    if (sig == 0 || done >= stop_) return;
    progress_.finish();
    if (!saved && root_) save_training_checkpoint(opt_.out_dir, done, model(), *run_.tok, checkpoint_state(done));
    throw Interrupted(stops_.reason(sig) + ": stopped after step " + std::to_string(done) + " of " +
                          std::to_string(stop_) + " and saved " +
                          (fs::path(opt_.out_dir) / ("ckpt-" + std::to_string(done))).string() +
                          "; rerun with --resume to continue",
                      sig);
  }

  EvalResult validate(int64_t step_done) {
    EvalResult r;
    const bool untrained = step_done == 0;  // eval_at_start: a curve's first point, never the best
    const int64_t stride = data_.window_stride();
    try {
      r = evaluate_shared(model(), data_.val(), opt_.seq_len, opt_.batch, opt_.eval_windows, comm_, stride);
    } catch (const dist::PeerLost&) {
      throw;  // the loop names the checkpoint
    } catch (const Error& e) {  // a non-finite loss: name the run whose weights gave it
      throw Error(opt_.out_dir + ": " + e.what());
    }
    if (!untrained) {
      sum_.final_val_loss = r.loss;
      sum_.final_val_ppl = r.ppl;
      sum_.final_val_acc = r.accuracy;
    }
    const bool best = !untrained && r.loss < sum_.best_val_loss;
    if (best) {
      sum_.best_val_loss = r.loss;
      sum_.best_step = step_done;
      if (root_)
        save_inference_checkpoint((fs::path(opt_.out_dir) / kBestDir).string(), model(), *run_.tok,
                                  {{"step", std::to_string(step_done)}});
    }
    if (metrics_) {
      json record = {{"step", step_done}, {"val_loss", r.loss}, {"val_ppl", r.ppl}, {"val_accuracy", r.accuracy}};
      // Learned-beta fusion: the attention share per layer as it moves (seed 003's question).
      if (const std::vector<double> mixing = learned_attention_mixing(model()); !mixing.empty())
        record["attention_mixing"] = mixing;
      metrics_->write(record);
    }
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld: val loss %.4f ppl %.2f acc %.3f%s",
                  static_cast<long long>(step_done), r.loss, r.ppl, r.accuracy, best ? " (best)" : "");
    if (log_) progress_.note(line);
    return r;
  }

  // A resume given the run's own tokenizer file (compared by content) keeps
  // the tokenizer the run recorded, so a later plain --resume still matches.
  json recipe_to_save() {
    json recipe = run_recipe(opt_, model().config().dropout);
    if (comm_.size() > 1) recipe["ranks"] = comm_.size();
    if (opt_.resume && !opt_.tokenizer_path.empty())
      for (auto it = run_.saved_run.begin(); it != run_.saved_run.end(); ++it)
        if (it.key().rfind("tokenizer_", 0) == 0) recipe[it.key()] = it.value();
    return recipe;
  }

  json checkpoint_state(int64_t step_done) {
    return json{{"step", step_done},
                {"tokens", sum_.tokens},
                {"best_val_loss", std::isfinite(sum_.best_val_loss) ? json(sum_.best_val_loss) : json()},
                {"best_step", sum_.best_step},
                {"train_seconds", train_seconds_},
                {"final_train_loss", sum_.final_train_loss},
                {"final_val_loss", sum_.final_val_loss},
                {"final_val_accuracy", sum_.final_val_acc},
                {"run", recipe_to_save()}};
  }

  const TrainOptions& opt_;
  const dist::Communicator& comm_;
  std::FILE* log_;
  const bool root_;
  RunStart& run_;
  const TokenDataset& data_;
  const BatchSampler& sampler_;
  const int64_t stop_;
  StopRequests& stops_;
  Progress progress_;
  LrSchedule sched_;
  std::optional<MetricsLog> metrics_;
  TrainSummary sum_;
  double train_seconds_ = 0.0;
  const Rng dropout_root_ = Rng(opt_.seed).split(0xD409);
  bool use_dropout_ = false;
  int64_t row_begin_ = 0, rows_ = 0;
  std::optional<ShardedGradient> sharded_;
  double grad_sum_seconds_ = 0.0;  // the gradient sums alone, after every rank arrived
  double forward_seconds_ = 0.0;   // the micro-batches' forward passes (not under sharding)
  std::optional<StepProfile> profile_;  // --profile
  double comm_seconds_ = 0.0;  // of the steps' time, in sums across ranks (waits for slower ranks included)
  // The step under way: its start, the optimizer's share and its profile.
  std::chrono::steady_clock::time_point step_t0_, t_optimizer_;
  double comm_at_t0_ = 0.0, forward_before_ = 0.0, optimizer_seconds_ = 0.0;
  StepProfile* profiled_ = nullptr;
  std::optional<cpu::MatmulTraceScope> trace_;
  EvalResult last_eval_;  // the latest evaluation, for on_step
  StepWindow window_;
  std::vector<int32_t> ids_, targets_;
};

void log_plan(std::FILE* log, const TrainOptions& opt, const RunStart& run, const TokenDataset& data, int64_t stop,
              int ranks) {
  if (!log) return;
  std::fprintf(log, "model: %.3fM parameters, vocab %lld; data: %zu train / %zu val tokens (%s%s)\n",
               run.model->params().num_params() / 1e6, static_cast<long long>(run.tok->vocab_size()),
               data.train().size(), data.val().size(), data.cache_path().c_str(),
               data.loaded_from_cache() ? ", cached" : "");
  std::fprintf(log, "training %lld steps of %lld x %lld tokens (x%lld accumulation), %d threads",
               static_cast<long long>(stop), static_cast<long long>(opt.batch), static_cast<long long>(opt.seq_len),
               static_cast<long long>(opt.grad_accum), num_threads());
  if (ranks > 1) std::fprintf(log, " on each of %d MPI ranks", ranks);
  std::fprintf(log, "\n");
}

}  // namespace

TrainSummary train(const ModelConfig& base_cfg, const TrainOptions& options) {
  validate_train_options(options);
  TrainOptions opt = options;
  StopRequests stops(opt.catch_signals);
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
  std::optional<RunLock> lock;
  open_run_directory(opt, comm, log, lock);
  RunStart start = start_run(base_cfg, opt, comm, log);

  const TokenDataset data = TokenDataset::build(opt.data, *start.tok, dataset_options(opt));
  const int64_t stride = data.window_stride();
  const BatchSampler sampler =
      opt.batching_epochs ? BatchSampler::epochs(data.train(), stride > 0 ? stride : opt.seq_len, opt.batch,
                                                 opt.seq_len, opt.seed)
                          : BatchSampler(data.train(), opt.batch, opt.seq_len, opt.seed);
  // Checked now, not at the first evaluation after minutes of training.
  HYMBA_CHECK(num_eval_windows(data.val(), opt.seq_len, stride) > 0, "--seq-len ", opt.seq_len, ": the validation split of ",
              opt.data, " has ", data.val().size(), " tokens, fewer than one window of ", opt.seq_len + 1,
              "; lower --seq-len or raise --val-fraction");
  const StepPlan plan = plan_steps(opt, sampler);
  const std::string summary_path = (fs::path(opt.out_dir) / kSummaryFile).string();
  if (opt.resume && start.start_step >= plan.stop && opt.resume_finished) {
    const TrainSummary done = finished_summary(*start.model, start.state);
    if (root) write_text_atomic(summary_path, done.to_json().dump(2) + "\n");
    return done;
  }
  HYMBA_CHECK(start.start_step < plan.stop, "--resume: the run already finished its ", plan.stop, " steps");
  log_plan(log, opt, start, data, plan.stop, comm.size());

  TrainingLoop loop(opt, comm, log, start, data, sampler, plan, stops);
  loop.open_metrics((fs::path(opt.out_dir) / kMetricsFile).string());
  loop.run();
  TrainSummary sum = loop.summary();
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.peak_rss_scope = rss_from_here ? "run" : "process";
  if (log && comm.size() > 1)
    std::fprintf(log,
                 "data-parallel over %d ranks: %.1f%% of the training time went to sums across ranks (waits for a "
                 "slower rank included), %.1f%% to the gradient sums alone\n",
                 comm.size(), 100.0 * sum.comm_share, 100.0 * sum.grad_sum_share);
  if (log && root && !sum.profile.is_null()) std::fputs(profile_text(sum.profile).c_str(), log);
  if (root) write_text_atomic(summary_path, sum.to_json().dump(2) + "\n");
  return sum;
}

}  // namespace hymba
