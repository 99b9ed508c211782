#include "classify/trainer.h"

#include "classify/data_formats.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "classify/classifier.h"
#include "classify/data_formats.h"
#include "classify/metrics.h"
#include "classify/report.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/threading.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/step_loop.h"

namespace hymba::classify {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double mb(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void validate(const ClassifyTrainOptions& o) {
  HYMBA_CHECK(!o.out_dir.empty(), "--out: a classifier directory is required");
  HYMBA_CHECK(!o.train_path.empty(), "--data: a labelled training file is required");
  HYMBA_CHECK(o.backbones.size() == 1 || o.backbones.size() == 2, "--backbone: give one or two backbones (got ",
              o.backbones.size(), ")");
  HYMBA_CHECK(o.batch >= 1, "--batch must be >= 1 (got ", o.batch, ")");
  HYMBA_CHECK(o.max_len >= 1, "--max-len must be >= 1 (got ", o.max_len, ")");
  HYMBA_CHECK(o.steps >= 0, "--steps must be >= 0");
  HYMBA_CHECK(o.epochs > 0 || o.steps > 0, "--epochs must be > 0 (or give --steps)");
  HYMBA_CHECK(o.lr > 0 && std::isfinite(o.lr), "--lr must be > 0 (got ", o.lr, ")");
  HYMBA_CHECK(o.backbone_lr > 0 && std::isfinite(o.backbone_lr), "--backbone-lr must be > 0 (got ", o.backbone_lr,
              ")");
  HYMBA_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1]");
  HYMBA_CHECK(o.warmup >= 0, "--warmup must be >= 0");
  HYMBA_CHECK(o.grad_clip >= 0, "--grad-clip must be >= 0 (0 = off)");
  HYMBA_CHECK(o.adamw.weight_decay >= 0, "--weight-decay must be >= 0");
  HYMBA_CHECK(o.val_fraction > 0 && o.val_fraction < 1, "--val-fraction must be in (0, 1)");
  HYMBA_CHECK(o.hidden >= 0, "--hidden must be >= 0");
  HYMBA_CHECK(o.train_size >= 0 && o.eval_size >= 0, "--train-size and --eval-size must be >= 0 (0: all)");
  HYMBA_CHECK(o.eval_interval >= 0 && o.log_interval >= 1, "--eval-interval must be >= 0 and --log-interval >= 1");
}

// Scores cached pooled features (frozen backbones) with the head alone.
std::vector<int32_t> predict_cached(const HeadPlan& plan, const float* P, const std::vector<std::vector<float>>& feats,
                                    const std::vector<Example>& examples, int64_t batch, double& loss) {
  std::vector<int32_t> pred;
  HeadActs<float> acts;
  double loss_sum = 0.0;
  const int64_t n = static_cast<int64_t>(examples.size()), C = plan.cfg.num_classes;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t B = std::min(batch, n - start);
    std::vector<const float*> fp;
    for (size_t k = 0; k < feats.size(); ++k) fp.push_back(feats[k].data() + start * plan.cfg.widths[k]);
    std::vector<int32_t> labels;
    for (int64_t i = start; i < start + B; ++i) labels.push_back(examples[i].label);
    loss_sum += head_forward(plan, P, fp, B, labels.data(), acts).loss_sum;
    for (int64_t r = 0; r < B; ++r) {
      const float* row = acts.logits.data() + r * C;
      pred.push_back(static_cast<int32_t>(std::max_element(row, row + C) - row));
    }
  }
  loss = loss_sum / static_cast<double>(n);
  return pred;
}

std::vector<int32_t> labels_of(const std::vector<Example>& examples) {
  std::vector<int32_t> out;
  for (const Example& e : examples) out.push_back(e.label);
  return out;
}

int64_t count_tokens(const std::vector<Example>& examples) {
  int64_t n = 0;
  for (const Example& e : examples)
    for (const auto& ids : e.ids) n += static_cast<int64_t>(ids.size());
  return n;
}

json backbone_records(const Classifier& clf) {
  json out = json::array();
  for (const Backbone& b : clf.backbones())
    out.push_back({{"source", b.source},
                   {"params", b.model->params().num_params()},
                   {"hidden_size", b.model->config().hidden_size},
                   {"layers", b.model->config().num_hidden_layers},
                   {"tokenizer", to_string(b.tok->kind())},
                   {"vocab_size", b.tok->vocab_size()}});
  return out;
}

json memory_record(const Classifier& clf) {
  return {{"peak_rss_mb", mb(peak_rss_bytes())},
          {"backbone_weights_mb", mb(clf.backbone_value_bytes())},
          {"backbone_grads_optimizer_mb", mb(clf.backbone_grad_optimizer_bytes())},
          {"head_mb", mb(clf.head_bytes())},
          {"activation_peak_mb", mb(clf.activation_peak_bytes())}};
}

// The examples a run trains and validates on, sampled to the asked sizes.
struct ClassifyTexts {
  std::vector<LabeledText> train, val;
  size_t read_train = 0, read_val = 0;  // before sampling
  std::string val_path;  // "" when validation is a split of --data
  std::vector<std::string> classes;
};

ClassifyTexts read_texts(const ClassifyTrainOptions& opt) {
  ClassifyTexts t;
  const std::vector<LabeledText> all = read_labeled(opt.train_path, opt.read);
  t.val_path = resolve_val_path(opt.train_path, opt.val_path);
  if (t.val_path.empty()) {
    split_train_val(all, opt.val_fraction, opt.seed, t.train, t.val);
  } else {
    t.train = all;
    t.val = read_labeled(t.val_path, opt.read);
  }
  t.read_train = t.train.size();
  t.read_val = t.val.size();
  t.train = sample_examples(t.train, opt.train_size, opt.seed);
  t.val = sample_examples(t.val, opt.eval_size, opt.seed + 1);
  t.classes = class_list(t.train, opt.classes);
  return t;
}

HeadConfig head_config(const ClassifyTrainOptions& opt) {
  HeadConfig hc;
  hc.pooling = parse_pooling(opt.pooling);
  HYMBA_CHECK(opt.backbones.size() == 2 || opt.fusion.empty(),
              "--fusion: concat and gated combine two backbones; give --backbone twice");
  hc.fusion = opt.backbones.size() == 2 ? parse_feature_fusion(opt.fusion.empty() ? "concat" : opt.fusion)
                                        : FeatureFusion::kSingle;
  hc.hidden = opt.hidden;
  hc.loss_on_raw_logits = parse_raw_logits_loss(opt.loss, "--loss");
  if (hc.loss_on_raw_logits)
    std::fprintf(stderr, "warning: --loss raw-logits: the loss is -logit[label] (seed 004's NLL without log-softmax), "
                         "unbounded below, so it falls without limit while accuracy need not improve\n");
  return hc;
}

// Every example's pooled features, backbone by backbone, in batches of `batch`.
void fill_feature_cache(Classifier& clf, const std::vector<Example>& ex, int64_t batch,
                        std::vector<std::vector<float>>& cache) {
  std::vector<std::vector<float>> feats;
  std::vector<PaddedBatch> batches;
  for (std::vector<float>& c : cache) c.clear();
  for (size_t start = 0; start < ex.size(); start += static_cast<size_t>(batch)) {
    std::vector<int64_t> idx;
    for (size_t i = start; i < std::min(ex.size(), start + static_cast<size_t>(batch)); ++i)
      idx.push_back(static_cast<int64_t>(i));
    clf.features(ex, idx, feats, batches);
    for (size_t k = 0; k < cache.size(); ++k) cache[k].insert(cache[k].end(), feats[k].begin(), feats[k].end());
  }
}

// The head's training (and the backbones' when unfrozen) as hooks of the
// shared step loop (train/step_loop.h): shuffled epochs of batches, one
// global gradient norm, AdamW with a schedule per part.
class ClassifierTraining final : public StepHooks {
 public:
  ClassifierTraining(const ClassifyTrainOptions& opt, Classifier& clf, const std::vector<Example>& train_ex,
                     const std::vector<Example>& val_ex, const std::vector<std::string>& classes, std::FILE* log)
      : opt_(opt), clf_(clf), plan_(clf.head_plan()), K_(clf.backbones().size()), train_ex_(train_ex),
        val_ex_(val_ex), classes_(classes), log_(log), n_train_(static_cast<int64_t>(train_ex.size())),
        per_epoch_((n_train_ + opt.batch - 1) / opt.batch),
        total_(opt.steps > 0 ? opt.steps
                             : std::max<int64_t>(1, std::llround(opt.epochs * static_cast<double>(per_epoch_)))),
        metrics_((fs::path(opt.out_dir) / "metrics.jsonl").string(), /*fresh=*/true),
        train_cache_(K_), val_cache_(K_), feats_(K_), dfeats_(K_), order_(static_cast<size_t>(n_train_)) {}

  int64_t total() const { return total_; }

  // Frozen backbones give every example the same features at every step:
  // they run once over the data and the head trains on the cached features.
  void cache_frozen_features() {
    if (!opt_.freeze) return;
    const auto t0 = Clock::now();
    fill_feature_cache(clf_, train_ex_, opt_.batch, train_cache_);
    backbone_tokens_ = count_tokens(train_ex_);
    backbone_seconds_ = seconds_since(t0);
    fill_feature_cache(clf_, val_ex_, opt_.batch, val_cache_);
    if (log_)
      std::fprintf(log_, "features of the frozen backbone%s: %.1f s (%.0f tok/s)\n", K_ > 1 ? "s" : "",
                   backbone_seconds_, backbone_tokens_ / std::max(backbone_seconds_, 1e-9));
  }

  void run() {
    progress_.emplace(log_ ? log_ : stderr, total_, 0, opt_.log_interval, opt_.plain_progress);
    StepLoopPlan plan;
    plan.stop = total_;
    plan.lr = [this](int64_t step) { return head_sched().at(step); };
    plan.log_every = opt_.log_interval;
    plan.eval_every = opt_.eval_interval > 0 ? opt_.eval_interval : per_epoch_;
    plan.progress = log_ ? &*progress_ : nullptr;
    run_step_loop(plan, *this);
    progress_->finish();
  }

  // The summary's "train" record.
  json train_record() const {
    const double seconds = train_seconds_ + (opt_.freeze ? backbone_seconds_ : 0.0);
    return {{"steps", total_},
            {"epochs", static_cast<double>(examples_seen_) / static_cast<double>(n_train_)},
            {"final_loss", final_loss_},
            {"seconds", seconds},
            {"examples_per_s", examples_seen_ / std::max(seconds, 1e-9)},
            {"backbone_tokens", backbone_tokens_},
            {"backbone_tokens_per_s", backbone_tokens_ / std::max(backbone_seconds_, 1e-9)}};
  }
  const json& history() const { return history_; }

 private:
  LrSchedule head_sched() const { return {opt_.lr, opt_.lr * opt_.min_lr_ratio, opt_.warmup, total_}; }
  LrSchedule backbone_sched() const {
    return {opt_.backbone_lr, opt_.backbone_lr * opt_.min_lr_ratio, opt_.warmup, total_};
  }

  double gradients(int64_t step) override {
    batch_rows_ = batch_features(step);
    return head_loss_and_gradients(batch_rows_, step);
  }

  double update(int64_t step, double lr) override { return clip_and_step(step, lr); }

  void count(StepRecord& r) override {
    train_seconds_ += r.seconds;
    if (!opt_.freeze) backbone_seconds_ += r.seconds;
    examples_seen_ += batch_rows_;
    final_loss_ = r.loss;
    r.tokens_per_s = backbone_seconds_ > 0 ? backbone_tokens_ / backbone_seconds_ : 0;
  }

  void log(const StepRecord& r) override {
    metrics_.write({{"step", r.done}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm}});
  }

  // The step's batch (a new shuffle at each epoch's start) and its pooled
  // features, cached or computed; returns the batch's size.
  int64_t batch_features(int64_t step) {
    const int64_t epoch = step / per_epoch_, in_epoch = step % per_epoch_;
    if (in_epoch == 0) {
      for (int64_t i = 0; i < n_train_; ++i) order_[i] = i;
      Rng rng = Rng(opt_.seed).split(static_cast<uint64_t>(epoch) + 1);
      for (int64_t i = n_train_; i > 1; --i) std::swap(order_[i - 1], order_[rng.below(static_cast<uint64_t>(i))]);
    }
    const int64_t begin = in_epoch * opt_.batch, B = std::min(opt_.batch, n_train_ - begin);
    idx_.assign(order_.begin() + begin, order_.begin() + begin + B);
    if (opt_.freeze) {
      for (size_t k = 0; k < K_; ++k) {
        const int64_t d = plan_.cfg.widths[k];
        feats_[k].resize(static_cast<size_t>(B * d));
        for (int64_t r = 0; r < B; ++r)
          std::copy_n(train_cache_[k].begin() + idx_[r] * d, d, feats_[k].begin() + r * d);
      }
    } else {
      clf_.features(train_ex_, idx_, feats_, batches_);
      for (const PaddedBatch& pb : batches_)
        for (int64_t n : pb.lengths) backbone_tokens_ += n;
    }
    return B;
  }

  // The head's forward and backward on the batch, and the backbones' backward
  // when unfrozen; returns the batch's mean loss.
  double head_loss_and_gradients(int64_t B, int64_t step) {
    std::vector<int32_t> labels;
    for (int64_t i : idx_) labels.push_back(train_ex_[i].label);
    std::vector<const float*> fp;
    std::vector<float*> dp;
    for (size_t k = 0; k < K_; ++k) {
      fp.push_back(feats_[k].data());
      dfeats_[k].resize(feats_[k].size());
      dp.push_back(opt_.freeze ? nullptr : dfeats_[k].data());
    }
    clf_.head_params().zero_grad();
    if (!opt_.freeze)
      for (Backbone& b : clf_.backbones()) b.model->params().zero_grad();
    const LossStats s = head_forward(plan_, clf_.head_params().values_block(), fp, B, labels.data(), acts_);
    const double loss = s.loss_sum / static_cast<double>(B);
    if (!std::isfinite(loss)) {
      progress_->finish();
      fail("loss became ", loss, " at step ", step + 1, "; stopped (try a lower --lr or --backbone-lr)");
    }
    head_backward(plan_, clf_.head_params().values_block(), clf_.head_params().grads_block(), acts_, labels.data(),
                  1.0f / static_cast<float>(B), dp);
    if (!opt_.freeze) clf_.backward_features(dfeats_, batches_);
    return loss;
  }

  // One global norm over the head and the trainable backbones, clipped; then
  // AdamW on each, the head at `lr`. Returns the norm before clipping.
  double clip_and_step(int64_t step, double lr) {
    // Summed once all are taken, head first: no multiply-add is fused into the
    // sum, so the norm keeps its bits however the compiler inlines this.
    std::vector<double> squares = {std::pow(grad_global_norm(clf_.head_params()), 2)};
    if (!opt_.freeze)
      for (const Backbone& b : clf_.backbones()) squares.push_back(std::pow(grad_global_norm(b.model->params()), 2));
    double sq = 0.0;
    for (double q : squares) sq += q;
    const double norm = std::sqrt(sq);
    HYMBA_CHECK(std::isfinite(norm), "gradient norm became ", norm, " at step ", step + 1, "; stopped");
    if (opt_.grad_clip > 0 && norm > opt_.grad_clip) {
      const float scale = static_cast<float>(opt_.grad_clip / norm);
      scale_grads(clf_.head_params(), scale);
      if (!opt_.freeze)
        for (Backbone& b : clf_.backbones()) scale_grads(b.model->params(), scale);
    }
    adamw_step(clf_.head_params(), opt_.adamw, lr, step + 1);
    if (!opt_.freeze)
      for (Backbone& b : clf_.backbones()) adamw_step(b.model->params(), opt_.adamw, backbone_sched().at(step), step + 1);
    return norm;
  }

  void evaluate(int64_t step_done) override {
    double loss = 0.0;
    const std::vector<int32_t> pred = opt_.freeze ? predict_cached(plan_, clf_.head_params().values_block(),
                                                                   val_cache_, val_ex_, opt_.batch, loss)
                                                  : clf_.predict(val_ex_, opt_.batch, &loss);
    const Metrics m = compute_metrics(labels_of(val_ex_), pred, classes_);
    const json rec = {{"step", step_done}, {"val_loss", loss}, {"val_accuracy", m.accuracy}, {"val_macro_f1", m.macro_f1}};
    metrics_.write(rec);
    history_.push_back(rec);
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld: val loss %.4f accuracy %.4f macro-F1 %.4f",
                  static_cast<long long>(step_done), loss, m.accuracy, m.macro_f1);
    if (log_) progress_->note(line);
  }

  const ClassifyTrainOptions& opt_;
  Classifier& clf_;
  const HeadPlan& plan_;
  const size_t K_;
  const std::vector<Example>& train_ex_;
  const std::vector<Example>& val_ex_;
  const std::vector<std::string>& classes_;
  std::FILE* log_;
  const int64_t n_train_, per_epoch_, total_;
  MetricsLog metrics_;
  json history_ = json::array();
  std::vector<std::vector<float>> train_cache_, val_cache_, feats_, dfeats_;
  std::vector<int64_t> order_, idx_;
  std::vector<PaddedBatch> batches_;
  HeadActs<float> acts_;
  std::optional<Progress> progress_;  // from run() on
  int64_t batch_rows_ = 0;            // the step's batch size
  double backbone_seconds_ = 0.0, train_seconds_ = 0.0, final_loss_ = 0.0;
  int64_t backbone_tokens_ = 0, examples_seen_ = 0;
};

json classify_settings(const ClassifyTrainOptions& opt, const std::string& val_path, FeatureFusion fusion,
                       int64_t total) {
  return {{"backbones", opt.backbones},
          {"train", opt.train_path},
          {"val", val_path.empty() ? "split of --data" : val_path},
          {"val_fraction", opt.val_fraction},
          {"train_size", opt.train_size},
          {"eval_size", opt.eval_size},
          {"pooling", opt.pooling},
          {"fusion", to_string(fusion)},
          {"hidden", opt.hidden},
          {"loss", opt.loss},
          {"freeze", opt.freeze},
          {"max_len", opt.max_len},
          {"batch", opt.batch},
          {"steps", total},
          {"lr", opt.lr},
          {"backbone_lr", opt.backbone_lr},
          {"weight_decay", opt.adamw.weight_decay},
          {"grad_clip", opt.grad_clip},
          {"seed", opt.seed},
          {"threads", num_threads()}};
}

}  // namespace

json train_classifier(const ClassifyTrainOptions& opt) {
  validate(opt);
  const auto t_start = Clock::now();
  std::FILE* log = opt.quiet ? nullptr : stderr;
  HYMBA_CHECK(!fs::exists(fs::path(opt.out_dir) / kClassifierFile), opt.out_dir,
              ": already holds a classifier; choose another --out");
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create directory (", ec.message(), ")");

  const ClassifyTexts texts = read_texts(opt);
  Classifier clf(opt.backbones, head_config(opt), texts.classes, opt.max_len, !opt.freeze, true, opt.seed);
  const std::vector<Example> train_ex = clf.encode(texts.train);
  const std::vector<Example> val_ex = clf.encode(texts.val);
  const HeadPlan& plan = clf.head_plan();
  ClassifierTraining training(opt, clf, train_ex, val_ex, texts.classes, log);
  if (log)
    std::fprintf(log, "classify: %zu classes, %zu train / %zu val examples, %s backbone%s (%s), %lld steps of %lld\n",
                 texts.classes.size(), train_ex.size(), val_ex.size(), opt.freeze ? "frozen" : "unfrozen",
                 clf.backbones().size() > 1 ? "s" : "", to_string(plan.cfg.fusion),
                 static_cast<long long>(training.total()), static_cast<long long>(opt.batch));
  training.cache_frozen_features();
  training.run();

  // The final figures come through the same path as `classify eval`.
  const auto t_eval = Clock::now();
  double val_loss = 0.0;
  int64_t val_tokens = 0;
  const std::vector<int32_t> pred = clf.predict(val_ex, opt.batch, &val_loss, &val_tokens);
  const double eval_seconds = seconds_since(t_eval);
  Metrics m = compute_metrics(labels_of(val_ex), pred, texts.classes);
  m.loss = val_loss;

  const json settings = classify_settings(opt, texts.val_path, plan.cfg.fusion, training.total());
  clf.save(opt.out_dir, {{"trained", settings}});
  json summary = {
      {"command", "classify train"},
      {"mode", opt.freeze ? "frozen" : "unfrozen"},
      {"backbones", backbone_records(clf)},
      {"head", plan.cfg.to_json()},
      {"head_params", clf.head_params().num_params()},
      {"classes", texts.classes},
      {"data",
       {{"train_examples", static_cast<int64_t>(train_ex.size())},
        {"val_examples", val_ex.size()},
        {"train_examples_read", texts.read_train},
        {"val_examples_read", texts.read_val},
        {"max_len", opt.max_len}}},
      {"settings", settings},
      {"train", training.train_record()},
      {"metrics", m.to_json()},
      {"eval_tokens_per_s", val_tokens / std::max(eval_seconds, 1e-9)},
      {"history", training.history()},
      {"memory", memory_record(clf)},
      {"wall_s", seconds_since(t_start)}};
  write_text_atomic((fs::path(opt.out_dir) / "summary.json").string(), summary.dump(2) + "\n");
  write_classify_report(opt.out_dir, summary);
  return summary;
}

json eval_classifier(const ClassifyEvalOptions& opt) {
  HYMBA_CHECK(opt.batch >= 1, "--batch must be >= 1 (got ", opt.batch, ")");
  HYMBA_CHECK(!opt.data_path.empty(), "--data: a labelled file is required");
  const auto t_start = Clock::now();
  auto clf = Classifier::load(opt.classifier_dir);
  // A dataset with a published held-out split (aclImdb) is scored on it.
  const std::string heldout = published_heldout(opt.data_path);
  const std::vector<Example> ex = clf->encode(read_labeled(heldout.empty() ? opt.data_path : heldout, opt.read));
  const auto t0 = Clock::now();
  double loss = 0.0;
  int64_t tokens = 0;
  const std::vector<int32_t> pred = clf->predict(ex, opt.batch, &loss, &tokens);
  const double seconds = seconds_since(t0);
  Metrics m = compute_metrics(labels_of(ex), pred, clf->classes());
  m.loss = loss;
  const std::string out = opt.out_dir.empty() ? (fs::path(opt.classifier_dir) / "eval").string() : opt.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  HYMBA_CHECK(!ec, out, ": cannot create directory (", ec.message(), ")");
  const json summary = {{"command", "classify eval"},
                        {"classifier", opt.classifier_dir},
                        {"data", opt.data_path},
                        {"backbones", backbone_records(*clf)},
                        {"head", clf->head_config().to_json()},
                        {"classes", clf->classes()},
                        {"metrics", m.to_json()},
                        {"eval_tokens_per_s", tokens / std::max(seconds, 1e-9)},
                        {"memory", memory_record(*clf)},
                        {"wall_s", seconds_since(t_start)}};
  write_text_atomic((fs::path(out) / "summary.json").string(), summary.dump(2) + "\n");
  write_classify_report(out, summary);
  return summary;
}

}  // namespace hymba::classify
