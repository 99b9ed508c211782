// `hymba ablate`: a suite of models trained and compared under one recipe.
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>

#include "ablate/report.h"
#include "ablate/runner.h"
#include "ablate/study_budget.h"
#include "ablate/suite.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "dist/communicator.h"
#include "model/summary.h"

namespace hymba::cli {

namespace {

void list_suites(const std::string& scale) {
  for (const ablate::SuiteInfo& info : ablate::builtin_suites()) {
    const ablate::Suite s = ablate::load_suite(info.name, scale);
    std::printf("%s — %s\n", info.name.c_str(), info.description.c_str());
    for (const ablate::SuiteRow& r : s.rows)
      std::printf("  %-24s %-34s %s\n", r.id.c_str(), r.name.c_str(), r.source.c_str());
    std::printf("  recipe: %s\n\n", s.train.dump().c_str());
  }
}

// A flag that, when given, sets one key of the suite's recipe, sampling or
// rows' model (`target`) for every row; `apply` runs once the flags are parsed.
struct Overrides {
  std::vector<std::function<void(ablate::AblateOptions&)>> apply;
  template <typename T>
  CLI::Option* add(CLI::App* cmd, const char* flag, T& value, const char* help,
                   nlohmann::json ablate::AblateOptions::*target, const char* key) {
    CLI::Option* opt = cmd->add_option(flag, value, help);
    apply.push_back([opt, &value, target, key](ablate::AblateOptions& a) {
      if (opt->count()) (a.*target)[key] = value;
    });
    return opt;
  }
};

}  // namespace

void register_ablate(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    ablate::AblateOptions ablate;
    double stop_epochs = 0, temperature = 0, top_p = 0;
    int64_t top_k = 0, sample_length = 0;
    int64_t steps = 0, batch = 0, seq_len = 0, warmup = 0, eval_interval = 0, eval_windows = 0, seed = 0;
    int32_t tokenizer_vocab = 0;
    double epochs = 0, lr = 0;
    std::string tokenizer_type, init_scheme, budget, precision, data_split, batching, chunk_last_target;
    bool no_plots = false, list = false, recompute = false;
    bool window_symmetric = false, meta_sees_all = false;
    double attention_dropout = 0;
    Overrides overrides;
  };
  auto o = std::make_shared<Options>();
  ablate::AblateOptions& a = o->ablate;
  Overrides& ov = o->overrides;
  constexpr auto kTrain = &ablate::AblateOptions::train_overrides;
  constexpr auto kSampling = &ablate::AblateOptions::sampling_overrides;
  constexpr auto kModel = &ablate::AblateOptions::model_overrides;
  CLI::App* cmd = app.add_subcommand(
      "ablate", "Train every model of a suite under one recipe and write a comparison report (tables, plots, samples)");
  cmd->footer(
      "Suites: seed-000, seed-ablation (seed 001), hymba-roadmap, hymba-roadmap-epoch (seed 002), seed-003,\n"
      "seed-003-long (seed 003's round 3), arch-compare, demo, or a suite .json file (docs/ablation.md).\n"
      "Each suite trains with its notebook's recipe; the flags above override it. Rerunning with the same --out\n"
      "skips the rows already measured and resumes a row whose training was interrupted.");
  cmd->add_option("--suite", a.suite, "Built-in suite name or a suite .json file");
  auto* scale = cmd->add_option("--scale", a.scale,
                                "Scale of preset rows: tiny, small or seed (default: the suite file's, else seed)")
                    ->check(CLI::IsMember({"tiny", "small", "seed"}));
  cmd->add_option("--budget", o->budget,
                  "study: the scale, recipe and repeats of the project's study (docs/results.md); flags given "
                  "beside it win")
      ->check(CLI::IsMember({"study"}));
  cmd->add_option("--transformer", a.transformer,
                  "seed-003 suites' Transformer row: gpt (GPT-style, the seed's; default) or rope (RoPE/SwiGLU)")
      ->check(CLI::IsMember({"gpt", "rope"}));
  cmd->add_option("--seq-lens", a.seq_lens,
                  "seed-003-long: the sequence lengths T, ascending (default 256,512,1024,2048,4096)")
      ->delimiter(',');
  cmd->add_option("--data", a.data, "Corpus: .txt file, directory of .txt, .jsonl with \"text\", or 'default'")
      ->capture_default_str();
  cmd->add_option("--out", a.out_dir, "Output directory (runs/, results.json/.csv, report.md/.html, plots/)");
  auto* steps = ov.add(cmd, "--steps", o->steps, "Optimizer steps per row (overrides the recipe)", kTrain, "steps")
                    ->check(range(int64_t{1}, int64_t{1} << 40));
  ov.add(cmd, "--epochs", o->epochs, "Passes over the training tokens per row", kTrain, "epochs")
      ->check(range(1e-6, 1e6))
      ->excludes(steps);
  ov.add(cmd, "--stop-epochs", o->stop_epochs,
         "Stop after this many passes while the lr schedule spans --steps/--epochs "
         "(seed 002's epochs=1 under max_steps=150)",
         kTrain, "stop_epochs")
      ->check(range(1e-6, 1e6));
  ov.add(cmd, "--temperature", o->temperature, "Sampling temperature of the samples (0 = greedy)", kSampling,
         "temperature")
      ->check(range(0.0, 100.0));
  ov.add(cmd, "--top-k", o->top_k, "Top-k of the samples (0 = all)", kSampling, "top_k")->check(range(0, 1 << 30));
  ov.add(cmd, "--top-p", o->top_p, "Top-p of the samples (1 = no top-p, the seeds' way)", kSampling, "top_p")
      ->check(range(1e-6, 1.0));
  ov.add(cmd, "--sample-length", o->sample_length,
         "Tokens per reported sample (default: the suite's, else --sample-tokens)", kSampling, "tokens")
      ->check(range(1, 1 << 20));
  ov.add(cmd, "--batch", o->batch, "Sequences per step", kTrain, "batch")->check(range(1, 1 << 20));
  ov.add(cmd, "--seq-len", o->seq_len, "Tokens per sequence", kTrain, "seq_len")->check(range(1, 1 << 24));
  ov.add(cmd, "--lr", o->lr, "Peak learning rate", kTrain, "lr")->check(range(1e-12, 10.0));
  ov.add(cmd, "--warmup", o->warmup, "Linear warmup steps", kTrain, "warmup")->check(range(0, 1 << 30));
  ov.add(cmd, "--eval-interval", o->eval_interval, "Steps between validations", kTrain, "eval_interval")
      ->check(range(1, 1 << 30));
  ov.add(cmd, "--eval-windows", o->eval_windows, "Validation windows per evaluation (0 = all)", kTrain, "eval_windows")
      ->check(range(0, 1 << 30));
  ov.add(cmd, "--seed", o->seed, "Seed for init, data order and sampling", kTrain, "seed")
      ->check(range(int64_t{0}, int64_t{1} << 62));
  cmd->add_option("--tokenizer", a.tokenizer_file,
                  "Tokenizer file to use instead of training one (tokenizer.json or sentencepiece .model); "
                  "the rows' vocab_size becomes its vocabulary");
  ov.add(cmd, "--tokenizer-type", o->tokenizer_type, "byte, bpe, unigram, byte-level-bpe or hf-unigram", kTrain,
         "tokenizer")
      ->check(CLI::IsMember({"byte", "bpe", "unigram", "byte-level-bpe", "hf-unigram"}));
  ov.add(cmd, "--tokenizer-vocab", o->tokenizer_vocab, "Vocabulary of a trained tokenizer", kTrain, "tokenizer_vocab")
      ->check(range(16, 1 << 20));
  ov.add(cmd, "--precision", o->precision,
         "Matrix products of every row's training: f32 or bf16 (needs AVX512-BF16; "
         "docs/training.md)",
         kTrain, "precision")
      ->check(CLI::IsMember({"f32", "bf16"}));
  ov.add(cmd, "--data-split", o->data_split,
         "Validation split of every row: blocks or chunks-shuffled (overrides the "
         "suite's; docs/training.md)",
         kTrain, "data_split")
      ->check(CLI::IsMember({"blocks", "chunks-shuffled"}));
  ov.add(cmd, "--batching", o->batching, "Batches of every row: random-windows or epochs (overrides the suite's)",
         kTrain, "batching")
      ->check(CLI::IsMember({"random-windows", "epochs"}));
  ov.add(cmd, "--chunk-last-target", o->chunk_last_target,
         "Last target of each chunk: next or eos (overrides the suite's)", kTrain, "chunk_last_target")
      ->check(CLI::IsMember({"next", "eos"}));
  cmd->add_flag("--recompute", o->recompute,
                "Recompute each layer's activations in the backward pass (less memory, the same results)");
  auto* init_scheme = cmd->add_option("--init-scheme", o->init_scheme,
                                      "Parameter init of every row: normal, torch or mamba_ssm (docs/model-config.md)");
  cmd->add_flag("--sliding-window-symmetric", o->window_symmetric,
                "Every row's local layers also see the window's future tokens (|i - j| < w): the leak seed 000's "
                "numbers suggest; such rows get no samples or decode rate");
  cmd->add_flag("--meta-tokens-see-all", o->meta_sees_all,
                "Every row's meta tokens see the whole sequence (seed 002's leaking mask); no samples or decode rate");
  cmd->add_option("--same-kv-compression", a.same_kv_compression,
                  "hymba-roadmap row 10: paper (GQA + SWA + KV sharing, default) or gqa-only (seed 002's code)")
      ->check(CLI::IsMember({"paper", "gqa-only"}));
  cmd->add_flag("--kv-reuse-all-pairs", a.kv_reuse_all_pairs,
                "Rows sharing K/V by consecutive local pairs pair every consecutive layer, global ones included "
                "(seed 002's); a pair of two windows gets no samples or decode rate");
  ov.add(cmd, "--attention-dropout", o->attention_dropout,
         "Dropout on the attention probabilities of every row while training", kModel, "attention_dropout")
      ->check(range(0.0, 0.99));
  cmd->add_option("--cache-context", a.cache_context, "Context length of the KV-cache / Mamba-state figures")
      ->check(range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--sample-tokens", a.sample_tokens, "Tokens generated per sample prompt (also times decoding)")
      ->check(range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--prompt", a.prompts, "Sample prompt (repeatable; default: the suite's)");
  cmd->add_option("--gnuplot", a.gnuplot, "gnuplot program to render the plots")->capture_default_str();
  cmd->add_flag("--no-plots", o->no_plots, "Write the report without plots");
  cmd->add_option("--ranks-per-row", a.ranks_per_row,
                  "Under mpirun: MPI ranks that train each row data-parallel (must divide the ranks; "
                  "the default 1 gives every rank rows of its own)")
      ->check(range(1, 1 << 20))->capture_default_str();
  auto* repeats = cmd->add_option("--repeats", a.repeats,
                  "Trainings per row with seeds --seed + 0 .. N-1; the report gives means, 95 % intervals and the "
                  "suite's questions (a rerun with a larger N adds the missing repeats)")
      ->check(range(int64_t{1}, int64_t{1000}))->capture_default_str();
  cmd->add_flag("--plain-progress", a.plain_progress, "Periodic lines instead of live progress bars");
  cmd->add_flag("--quiet", a.quiet, "No per-row training progress (row start/end lines remain)");
  cmd->add_flag("--list", o->list, "List the built-in suites, their rows and recipes, and exit");
  cmd->callback([o, &global, scale, repeats, init_scheme] {
    apply_global_options(global);
    ablate::AblateOptions& run = o->ablate;
    if (o->list) {
      list_suites(run.scale);
      return;
    }
    HYMBA_USAGE_CHECK(!run.suite.empty(), "--suite: give a suite name or a suite .json file (see 'hymba ablate --list')");
    HYMBA_USAGE_CHECK(!run.out_dir.empty(), "--out: give an output directory");
    for (const auto& apply : o->overrides.apply) apply(run);
    nlohmann::json& t = run.train_overrides;
    if (o->recompute) t["recompute"] = true;
    if (init_scheme->count())
      run.model_overrides["init_scheme"] = to_string(parse_init_scheme_flag(o->init_scheme));
    if (o->window_symmetric) run.model_overrides["sliding_window_symmetric"] = true;
    if (o->meta_sees_all) run.model_overrides["meta_tokens_see_all"] = true;
    if (o->no_plots) run.gnuplot.clear();
    if (!o->budget.empty()) {
      const ablate::StudyBudget b = ablate::study_budget(run.suite);
      if (!scale->count()) run.scale = b.scale;
      if (!repeats->count()) run.repeats = b.repeats;
      for (auto it = b.train.begin(); it != b.train.end(); ++it)
        if (!t.contains(it.key()) && !(it.key() == "steps" && t.contains("epochs"))) t[it.key()] = it.value();
    }
    run.threads = command_threads(global);
    const ablate::AblateSummary s = ablate::run_ablation(run);
    if (!dist::world().is_root()) return;  // rank 0 wrote the suite's files and reports them
    std::printf("%s\n", ablate::markdown_table(s.rows).c_str());
    if (!s.answers.empty()) std::printf("%s\n", report::answers_markdown(s.answers).c_str());
    std::printf("report: %s\n        %s%s\n", s.report_md.c_str(), s.report_html.c_str(),
                s.plots_written ? " (plots in plots/)" : "");
  });
}

}  // namespace hymba::cli
