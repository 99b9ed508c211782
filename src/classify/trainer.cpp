#include "classify/trainer.h"

#include "classify/data_formats.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

  const std::vector<LabeledText> all = read_labeled(opt.train_path, opt.read);
  const std::string val_path = resolve_val_path(opt.train_path, opt.val_path);
  std::vector<LabeledText> train_texts, val_texts;
  if (val_path.empty()) {
    split_train_val(all, opt.val_fraction, opt.seed, train_texts, val_texts);
  } else {
    train_texts = all;
    val_texts = read_labeled(val_path, opt.read);
  }
  const size_t read_train = train_texts.size(), read_val = val_texts.size();
  train_texts = sample_examples(train_texts, opt.train_size, opt.seed);
  val_texts = sample_examples(val_texts, opt.eval_size, opt.seed + 1);
  const std::vector<std::string> classes = class_list(train_texts, opt.classes);

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
  Classifier clf(opt.backbones, hc, classes, opt.max_len, !opt.freeze, true, opt.seed);
  const std::vector<Example> train_ex = clf.encode(train_texts);
  const std::vector<Example> val_ex = clf.encode(val_texts);
  const HeadPlan& plan = clf.head_plan();
  const size_t K = clf.backbones().size();

  const int64_t n_train = static_cast<int64_t>(train_ex.size());
  const int64_t per_epoch = (n_train + opt.batch - 1) / opt.batch;
  const int64_t total =
      opt.steps > 0 ? opt.steps : std::max<int64_t>(1, std::llround(opt.epochs * static_cast<double>(per_epoch)));
  const int64_t eval_every = opt.eval_interval > 0 ? opt.eval_interval : per_epoch;
  if (log)
    std::fprintf(log, "classify: %zu classes, %lld train / %zu val examples, %s backbone%s (%s), %lld steps of %lld\n",
                 classes.size(), static_cast<long long>(n_train), val_ex.size(), opt.freeze ? "frozen" : "unfrozen",
                 K > 1 ? "s" : "", to_string(plan.cfg.fusion), static_cast<long long>(total),
                 static_cast<long long>(opt.batch));

  // Frozen backbones give every example the same features at every step:
  // they run once over the data and the head trains on the cached features.
  std::vector<std::vector<float>> train_cache(K), val_cache(K);
  double backbone_seconds = 0.0;
  int64_t backbone_tokens = 0;
  if (opt.freeze) {
    const auto t0 = Clock::now();
    auto fill = [&](const std::vector<Example>& ex, std::vector<std::vector<float>>& cache) {
      std::vector<std::vector<float>> feats;
      std::vector<PaddedBatch> batches;
      for (size_t k = 0; k < K; ++k) cache[k].clear();
      for (size_t start = 0; start < ex.size(); start += static_cast<size_t>(opt.batch)) {
        std::vector<int64_t> idx;
        for (size_t i = start; i < std::min(ex.size(), start + static_cast<size_t>(opt.batch)); ++i)
          idx.push_back(static_cast<int64_t>(i));
        clf.features(ex, idx, feats, batches);
        for (size_t k = 0; k < K; ++k) cache[k].insert(cache[k].end(), feats[k].begin(), feats[k].end());
      }
    };
    fill(train_ex, train_cache);
    backbone_tokens = count_tokens(train_ex);
    backbone_seconds = seconds_since(t0);
    fill(val_ex, val_cache);
    if (log)
      std::fprintf(log, "features of the frozen backbone%s: %.1f s (%.0f tok/s)\n", K > 1 ? "s" : "",
                   backbone_seconds, backbone_tokens / std::max(backbone_seconds, 1e-9));
  }

  LrSchedule head_sched{opt.lr, opt.lr * opt.min_lr_ratio, opt.warmup, total};
  LrSchedule backbone_sched{opt.backbone_lr, opt.backbone_lr * opt.min_lr_ratio, opt.warmup, total};
  MetricsLog metrics((fs::path(opt.out_dir) / "metrics.jsonl").string(), /*fresh=*/true);
  json history = json::array();
  auto evaluate_val = [&](int64_t step_done, Progress& progress) {
    double loss = 0.0;
    const std::vector<int32_t> pred = opt.freeze ? predict_cached(plan, clf.head_params().values_block(), val_cache,
                                                                  val_ex, opt.batch, loss)
                                                 : clf.predict(val_ex, opt.batch, &loss);
    const Metrics m = compute_metrics(labels_of(val_ex), pred, classes);
    const json rec = {{"step", step_done}, {"val_loss", loss}, {"val_accuracy", m.accuracy}, {"val_macro_f1", m.macro_f1}};
    metrics.write(rec);
    history.push_back(rec);
    char line[160];
    std::snprintf(line, sizeof line, "eval step %lld: val loss %.4f accuracy %.4f macro-F1 %.4f",
                  static_cast<long long>(step_done), loss, m.accuracy, m.macro_f1);
    if (log) progress.note(line);
  };

  Progress progress(log ? log : stderr, total, 0, opt.log_interval, opt.plain_progress);
  std::vector<int64_t> order(static_cast<size_t>(n_train));
  std::vector<std::vector<float>> feats(K), dfeats(K);
  std::vector<PaddedBatch> batches;
  HeadActs<float> acts;
  double train_seconds = 0.0, final_loss = 0.0;
  int64_t examples_seen = 0;
  for (int64_t step = 0; step < total; ++step) {
    const auto t0 = Clock::now();
    const int64_t epoch = step / per_epoch, in_epoch = step % per_epoch;
    if (in_epoch == 0) {
      for (int64_t i = 0; i < n_train; ++i) order[i] = i;
      Rng rng = Rng(opt.seed).split(static_cast<uint64_t>(epoch) + 1);
      for (int64_t i = n_train; i > 1; --i) std::swap(order[i - 1], order[rng.below(static_cast<uint64_t>(i))]);
    }
    const int64_t begin = in_epoch * opt.batch, B = std::min(opt.batch, n_train - begin);
    const std::vector<int64_t> idx(order.begin() + begin, order.begin() + begin + B);
    std::vector<int32_t> labels;
    for (int64_t i : idx) labels.push_back(train_ex[i].label);

    if (opt.freeze) {
      for (size_t k = 0; k < K; ++k) {
        const int64_t d = plan.cfg.widths[k];
        feats[k].resize(static_cast<size_t>(B * d));
        for (int64_t r = 0; r < B; ++r)
          std::copy_n(train_cache[k].begin() + idx[r] * d, d, feats[k].begin() + r * d);
      }
    } else {
      clf.features(train_ex, idx, feats, batches);
      for (const PaddedBatch& pb : batches)
        for (int64_t n : pb.lengths) backbone_tokens += n;
    }
    std::vector<const float*> fp;
    std::vector<float*> dp;
    for (size_t k = 0; k < K; ++k) {
      fp.push_back(feats[k].data());
      dfeats[k].resize(feats[k].size());
      dp.push_back(opt.freeze ? nullptr : dfeats[k].data());
    }
    clf.head_params().zero_grad();
    if (!opt.freeze)
      for (Backbone& b : clf.backbones()) b.model->params().zero_grad();
    const LossStats s = head_forward(plan, clf.head_params().values_block(), fp, B, labels.data(), acts);
    const double loss = s.loss_sum / static_cast<double>(B);
    if (!std::isfinite(loss)) {
      progress.finish();
      fail("loss became ", loss, " at step ", step + 1, "; stopped (try a lower --lr or --backbone-lr)");
    }
    head_backward(plan, clf.head_params().values_block(), clf.head_params().grads_block(), acts, labels.data(),
                  1.0f / static_cast<float>(B), dp);
    if (!opt.freeze) clf.backward_features(dfeats, batches);

    // One global norm over the head and the trainable backbones.
    double sq = std::pow(grad_global_norm(clf.head_params()), 2);
    if (!opt.freeze)
      for (const Backbone& b : clf.backbones()) sq += std::pow(grad_global_norm(b.model->params()), 2);
    const double norm = std::sqrt(sq);
    HYMBA_CHECK(std::isfinite(norm), "gradient norm became ", norm, " at step ", step + 1, "; stopped");
    if (opt.grad_clip > 0 && norm > opt.grad_clip) {
      const float scale = static_cast<float>(opt.grad_clip / norm);
      scale_grads(clf.head_params(), scale);
      if (!opt.freeze)
        for (Backbone& b : clf.backbones()) scale_grads(b.model->params(), scale);
    }
    adamw_step(clf.head_params(), opt.adamw, head_sched.at(step), step + 1);
    if (!opt.freeze)
      for (Backbone& b : clf.backbones()) adamw_step(b.model->params(), opt.adamw, backbone_sched.at(step), step + 1);

    const double dt = seconds_since(t0);
    train_seconds += dt;
    if (!opt.freeze) backbone_seconds += dt;
    examples_seen += B;
    final_loss = loss;
    const int64_t done = step + 1;
    if (log) progress.update(step, loss, head_sched.at(step), backbone_seconds > 0 ? backbone_tokens / backbone_seconds : 0);
    if (done % opt.log_interval == 0 || done == total)
      metrics.write({{"step", done}, {"loss", loss}, {"lr", head_sched.at(step)}, {"grad_norm", norm}});
    if (done % eval_every == 0 || done == total) evaluate_val(done, progress);
  }
  progress.finish();

  // The final figures come through the same path as `classify eval`.
  const auto t_eval = Clock::now();
  double val_loss = 0.0;
  int64_t val_tokens = 0;
  const std::vector<int32_t> pred = clf.predict(val_ex, opt.batch, &val_loss, &val_tokens);
  const double eval_seconds = seconds_since(t_eval);
  Metrics m = compute_metrics(labels_of(val_ex), pred, classes);
  m.loss = val_loss;

  const json settings = {{"backbones", opt.backbones},
                         {"train", opt.train_path},
                         {"val", val_path.empty() ? "split of --data" : val_path},
                         {"val_fraction", opt.val_fraction},
                         {"train_size", opt.train_size},
                         {"eval_size", opt.eval_size},
                         {"pooling", opt.pooling},
                         {"fusion", to_string(plan.cfg.fusion)},
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
  clf.save(opt.out_dir, {{"trained", settings}});

  json summary = {
      {"command", "classify train"},
      {"mode", opt.freeze ? "frozen" : "unfrozen"},
      {"backbones", backbone_records(clf)},
      {"head", plan.cfg.to_json()},
      {"head_params", clf.head_params().num_params()},
      {"classes", classes},
      {"data",
       {{"train_examples", n_train},
        {"val_examples", val_ex.size()},
        {"train_examples_read", read_train},
        {"val_examples_read", read_val},
        {"max_len", opt.max_len}}},
      {"settings", settings},
      {"train",
       {{"steps", total},
        {"epochs", static_cast<double>(examples_seen) / static_cast<double>(n_train)},
        {"final_loss", final_loss},
        {"seconds", train_seconds + (opt.freeze ? backbone_seconds : 0.0)},
        {"examples_per_s", examples_seen / std::max(train_seconds + (opt.freeze ? backbone_seconds : 0.0), 1e-9)},
        {"backbone_tokens", backbone_tokens},
        {"backbone_tokens_per_s", backbone_tokens / std::max(backbone_seconds, 1e-9)}}},
      {"metrics", m.to_json()},
      {"eval_tokens_per_s", val_tokens / std::max(eval_seconds, 1e-9)},
      {"history", history},
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
