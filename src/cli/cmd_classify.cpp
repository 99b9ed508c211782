// `hymba classify train` and `hymba classify eval`: sequence classification
// with a head on one or two frozen or unfrozen backbones (docs/classify.md).
#include <cstdio>
#include <iostream>
#include <memory>

#include "classify/suite.h"
#include "classify/suite_report.h"
#include "classify/trainer.h"
#include "cli/commands.h"

namespace hymba::cli {

namespace {

void add_read_options(CLI::App* cmd, classify::ReadOptions& r) {
  cmd->add_option("--format", r.format,
                  "auto (an aclImdb folder; .jsonl/.json: JSONL, .csv: CSV with a header, else TSV), tsv, jsonl or csv")
      ->check(CLI::IsMember({"auto", "tsv", "jsonl", "csv"}))->capture_default_str();
  cmd->add_option("--label-field", r.label_field, "JSONL field / CSV column holding the label")->capture_default_str();
  cmd->add_option("--text-field", r.text_field, "JSONL field / CSV column holding the text")->capture_default_str();
}

void print_metrics(const nlohmann::json& s) {
  const auto& m = s.at("metrics");
  std::printf("accuracy %.4f  macro-F1 %.4f  loss %.4f  (%lld examples)\n", m.at("accuracy").get<double>(),
              m.at("macro_f1").get<double>(), m.at("loss").get<double>(),
              static_cast<long long>(m.at("examples").get<int64_t>()));
  for (const auto& c : m.at("per_class"))
    std::printf("  %-16s precision %.4f  recall %.4f  F1 %.4f  support %lld\n", c.at("class").get<std::string>().c_str(),
                c.at("precision").get<double>(), c.at("recall").get<double>(), c.at("f1").get<double>(),
                static_cast<long long>(c.at("support").get<int64_t>()));
  const auto& mem = s.at("memory");
  std::printf("peak RSS %.1f MB, backbone grads + AdamW %.2f MB, activations %.2f MB\n",
              mem.at("peak_rss_mb").get<double>(), mem.at("backbone_grads_optimizer_mb").get<double>(),
              mem.at("activation_peak_mb").get<double>());
}

void register_classify_suite(CLI::App* group, const GlobalOptions& global) {
  struct SuiteOpts {
    classify::ClassifySuiteOptions o;
    bool list = false;
  };
  auto so = std::make_shared<SuiteOpts>();
  classify::ClassifySuiteOptions& o = so->o;
  CLI::App* cmd = group->add_subcommand(
      "suite", "A seed's classification table as one command: every row trained and reported beside the seed's");
  cmd->footer(
      "Suite seed-004: heads on frozen GPT-Neo-125M, Mamba-130M and both, with the seed's recipe (batch 1, lr 5e-5,\n"
      "1 epoch, log-softmax loss). Give the published checkpoints with --gpt-neo / --mamba; a backbone left out is\n"
      "its preset drawn at random at --scale (not pretrained). docs/classify.md.");
  cmd->add_option("--suite", o.suite, "Suite name (see --list)")->capture_default_str();
  cmd->add_option("--data", o.data, "Labelled training data: TSV label<TAB>text, or JSONL");
  cmd->add_option("--val", o.val_path, "Separate validation (dev) file (default: split --val-fraction off --data)");
  add_read_options(cmd, o.read);
  cmd->add_option("--out", o.out_dir, "Output directory (rows/, results.json/.csv, report.md/.html)");
  cmd->add_option("--gpt-neo", o.gpt_neo, "GPT-Neo backbone: checkpoint or Hugging Face directory (gpt-neo-125M)");
  cmd->add_option("--mamba", o.mamba, "Mamba backbone: checkpoint or Hugging Face directory (mamba-130m-hf)");
  cmd->add_option("--scale", o.scale, "Scale of the random preset backbones: tiny, small or seed")
      ->check(CLI::IsMember({"tiny", "small", "seed"}))->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer, "Tokenizer file for the random backbones (default: train one)");
  cmd->add_option("--tokenizer-type", o.tokenizer_type, "Tokenizer trained for the random backbones: byte, bpe or unigram")
      ->check(CLI::IsMember({"byte", "bpe", "unigram"}))->capture_default_str();
  cmd->add_option("--tokenizer-vocab", o.tokenizer_vocab, "Its vocabulary")->check(range(16, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--train-size", o.train_size, "At most this many training examples per row (0: all)")
      ->check(range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--eval-size", o.eval_size, "At most this many validation examples per row (0: all)")
      ->check(range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd->add_flag("--seed-sizes", o.seed_sizes, "Each row's own sizes from the seed (GPT-Neo 20,000; Mamba 5,000 / 200)");
  cmd->add_option("--fusion", o.fusion, "Head of the two-backbone row: concat or gated")
      ->check(CLI::IsMember({"concat", "gated"}))->capture_default_str();
  cmd->add_option("--pooling", o.pooling, "Features: mean or last")->check(CLI::IsMember({"last", "mean"}))
      ->capture_default_str();
  cmd->add_option("--loss", o.loss,
                  "log-softmax (the seed's table) or raw-logits (its variant without log-softmax: NLL on raw logits, "
                  "warned)")
      ->check(CLI::IsMember({"log-softmax", "raw-logits"}))->capture_default_str();
  cmd->add_option("--max-len", o.max_len, "Tokens kept per text")->check(range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--batch", o.batch, "Examples per step (the seed: 1)")->check(range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "Passes over the training examples (the seed: 1)")
      ->check(range(1e-6, 1e6))->capture_default_str();
  cmd->add_option("--lr", o.lr, "Head learning rate (the seed: 5e-5)")->check(range(1e-12, 10.0))
      ->capture_default_str();
  cmd->add_option("--val-fraction", o.val_fraction, "Share of --data held out when there is no --val")
      ->check(range(0.001, 0.9))->capture_default_str();
  cmd->add_option("--eval-interval", o.eval_interval, "Steps between validations (the seed: 1,000)")
      ->check(range(0, 1 << 30))->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed for random backbones, heads, splits and order")->capture_default_str();
  cmd->add_option("--repeats", o.repeats,
                  "Trainings per row with seeds --seed + 0 .. N-1 (split, head, order; the backbones stay); the report "
                  "gives means, 95 % intervals and the seed's questions")
      ->check(range(int64_t{1}, int64_t{1000}))->capture_default_str();
  cmd->add_flag("--plain-progress", o.plain_progress, "Periodic lines instead of a live bar");
  cmd->add_flag("--quiet", o.quiet, "No per-row training progress (row start/end lines remain)");
  cmd->add_flag("--list", so->list, "List the suites and their rows as the seed reports them, and exit");
  cmd->callback([so, &global] {
    apply_global_options(global);
    if (so->list) {
      for (const classify::ClassifySuiteInfo& s : classify::builtin_classify_suites()) {
        std::printf("%s — %s\n", s.name.c_str(), s.description.c_str());
        for (const classify::SeedClassifyRow& r : s.rows)
          std::printf("  %-8s %-32s seed: %s\n", r.id.c_str(), r.name.c_str(), r.recipe.c_str());
      }
      return;
    }
    const classify::ClassifySuiteSummary s = classify::run_classify_suite(so->o);
    std::printf("%s\n", report::markdown_table(classify::suite_table(s.results.at("rows"))).c_str());
    std::printf("report: %s\n        %s\n", s.report_md.c_str(), s.report_html.c_str());
  });
}

}  // namespace

void register_classify(CLI::App& app, const GlobalOptions& global) {
  CLI::App* group = app.add_subcommand("classify", "Sequence classification with a head on frozen or unfrozen backbones");
  group->require_subcommand(1);

  struct TrainOpts {
    classify::ClassifyTrainOptions o;
    bool unfreeze = false, json = false;
  };
  auto t = std::make_shared<TrainOpts>();
  classify::ClassifyTrainOptions& o = t->o;
  CLI::App* train = group->add_subcommand(
      "train", "Train a classification head (and with --unfreeze the backbones) on labelled text");
  train->add_option("--backbone", o.backbones, "Checkpoint or run directory; give it twice for a two-backbone head")
      ->required()->expected(1, 2);
  train->add_option("--data", o.train_path, "Labelled training data: TSV label<TAB>text, or JSONL")->required();
  train->add_option("--val", o.val_path, "Separate validation file (default: split --val-fraction off --data)");
  add_read_options(train, o.read);
  train->add_option("--classes", o.classes, "Comma-separated class names in order (default: sorted labels)");
  train->add_option("--out", o.out_dir, "Classifier directory to write")->required();
  train->add_option("--pooling", o.pooling, "Features: last (last real token) or mean (over real tokens)")
      ->check(CLI::IsMember({"last", "mean"}))->capture_default_str();
  train->add_option("--fusion", o.fusion, "Two backbones: concat (default) or gated features")
      ->check(CLI::IsMember({"concat", "gated"}));
  train->add_option("--hidden", o.hidden, "Width of a tanh hidden layer in the head (0: linear head)")
      ->check(range(0, 1 << 20))->capture_default_str();
  train->add_option("--loss", o.loss,
                    "log-softmax: cross-entropy; raw-logits: NLL on the raw logits (-logit[label], seed 004's "
                    "variant without log-softmax; unbounded below, warned)")
      ->check(CLI::IsMember({"log-softmax", "raw-logits"}))->capture_default_str();
  train->add_flag("--unfreeze", t->unfreeze, "Train the backbones too (default: frozen, no gradients or moments)");
  train->add_option("--max-len", o.max_len, "Tokens kept per text (the first ones)")
      ->check(range(1, 1 << 24))->capture_default_str();
  train->add_option("--batch", o.batch, "Examples per step (right-padded, masked)")
      ->check(range(1, 1 << 20))->capture_default_str();
  train->add_option("--epochs", o.epochs, "Passes over the training examples (when --steps is 0)")
      ->check(range(1e-6, 1e6))->capture_default_str();
  train->add_option("--steps", o.steps, "Optimizer steps (overrides --epochs)")->check(range(int64_t{0}, int64_t{1} << 40));
  train->add_option("--lr", o.lr, "Peak learning rate of the head")->check(range(1e-12, 10.0))->capture_default_str();
  train->add_option("--backbone-lr", o.backbone_lr, "Peak learning rate of unfrozen backbones")
      ->check(range(1e-12, 10.0))->capture_default_str();
  train->add_option("--min-lr-ratio", o.min_lr_ratio, "Cosine floor as a fraction of the peak")
      ->check(range(0.0, 1.0))->capture_default_str();
  train->add_option("--warmup", o.warmup, "Linear warmup steps")->check(range(0, 1 << 30))->capture_default_str();
  train->add_option("--weight-decay", o.adamw.weight_decay, "AdamW decoupled weight decay")
      ->check(range(0.0, 10.0))->capture_default_str();
  train->add_option("--grad-clip", o.grad_clip, "Global gradient-norm clip over head and backbones (0 = off)")
      ->check(range(0.0, 1e6))->capture_default_str();
  train->add_option("--val-fraction", o.val_fraction, "Share of --data held out when there is no --val")
      ->check(range(0.001, 0.9))->capture_default_str();
  train->add_option("--eval-interval", o.eval_interval, "Steps between validations (0: once per epoch)")
      ->check(range(0, 1 << 30))->capture_default_str();
  train->add_option("--log-interval", o.log_interval, "Steps between metric records")
      ->check(range(1, 1 << 30))->capture_default_str();
  train->add_option("--train-size", o.train_size, "Use at most this many training examples, drawn by --seed (0: all)")
      ->check(range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  train->add_option("--eval-size", o.eval_size, "Use at most this many validation examples, drawn by --seed (0: all)")
      ->check(range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  train->add_option("--seed", o.seed, "Seed for the head's init, the split and the example order")->capture_default_str();
  train->add_flag("--plain-progress", o.plain_progress, "Periodic lines instead of a live bar");
  train->add_flag("--quiet", o.quiet, "No progress output");
  train->add_flag("--json", t->json, "Print summary.json on stdout");
  train->callback([t, &global] {
    apply_global_options(global);
    t->o.freeze = !t->unfreeze;
    const nlohmann::json s = classify::train_classifier(t->o);
    if (t->json) {
      std::cout << s.dump(2) << "\n";
      return;
    }
    print_metrics(s);
    std::printf("classifier: %s (summary.json, report.md, report.html, metrics.jsonl)\n", t->o.out_dir.c_str());
  });

  struct EvalOpts {
    classify::ClassifyEvalOptions o;
    bool json = false;
  };
  auto e = std::make_shared<EvalOpts>();
  CLI::App* eval = group->add_subcommand("eval", "Score a trained classifier on labelled text");
  eval->add_option("--classifier", e->o.classifier_dir, "Directory written by 'classify train'")->required();
  eval->add_option("--data", e->o.data_path, "Labelled data: TSV label<TAB>text, or JSONL")->required();
  add_read_options(eval, e->o.read);
  eval->add_option("--out", e->o.out_dir, "Where summary.json and the report go (default: CLASSIFIER/eval)");
  eval->add_option("--batch", e->o.batch, "Examples per forward")->check(range(1, 1 << 20))->capture_default_str();
  eval->add_flag("--json", e->json, "Print summary.json on stdout");
  eval->callback([e, &global] {
    apply_global_options(global);
    const nlohmann::json s = classify::eval_classifier(e->o);
    if (e->json) {
      std::cout << s.dump(2) << "\n";
      return;
    }
    print_metrics(s);
  });

  register_classify_suite(group, global);
}

}  // namespace hymba::cli
