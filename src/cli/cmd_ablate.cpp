// `hymba ablate`: a suite of models trained and compared under one recipe.
#include <cstdio>
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
  };
  auto o = std::make_shared<Options>();
  ablate::AblateOptions& a = o->ablate;
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
  auto* steps = cmd->add_option("--steps", o->steps, "Optimizer steps per row (overrides the recipe)")
                    ->check(range(int64_t{1}, int64_t{1} << 40));
  auto* epochs = cmd->add_option("--epochs", o->epochs, "Passes over the training tokens per row")
                     ->check(range(1e-6, 1e6))->excludes(steps);
  auto* stop_epochs = cmd->add_option("--stop-epochs", o->stop_epochs,
                                      "Stop after this many passes while the lr schedule spans --steps/--epochs "
                                      "(seed 002's epochs=1 under max_steps=150)")
                          ->check(range(1e-6, 1e6));
  auto* temperature = cmd->add_option("--temperature", o->temperature, "Sampling temperature of the samples (0 = greedy)")
                          ->check(range(0.0, 100.0));
  auto* top_k = cmd->add_option("--top-k", o->top_k, "Top-k of the samples (0 = all)")->check(range(0, 1 << 30));
  auto* top_p = cmd->add_option("--top-p", o->top_p, "Top-p of the samples (1 = no top-p, the seeds' way)")
                    ->check(range(1e-6, 1.0));
  auto* sample_length = cmd->add_option("--sample-length", o->sample_length,
                                        "Tokens per reported sample (default: the suite's, else --sample-tokens)")
                            ->check(range(1, 1 << 20));
  auto* batch = cmd->add_option("--batch", o->batch, "Sequences per step")->check(range(1, 1 << 20));
  auto* seq_len = cmd->add_option("--seq-len", o->seq_len, "Tokens per sequence")->check(range(1, 1 << 24));
  auto* lr = cmd->add_option("--lr", o->lr, "Peak learning rate")->check(range(1e-12, 10.0));
  auto* warmup = cmd->add_option("--warmup", o->warmup, "Linear warmup steps")->check(range(0, 1 << 30));
  auto* eval_interval =
      cmd->add_option("--eval-interval", o->eval_interval, "Steps between validations")->check(range(1, 1 << 30));
  auto* eval_windows = cmd->add_option("--eval-windows", o->eval_windows, "Validation windows per evaluation (0 = all)")
                           ->check(range(0, 1 << 30));
  auto* seed = cmd->add_option("--seed", o->seed, "Seed for init, data order and sampling")
                   ->check(range(int64_t{0}, int64_t{1} << 62));
  cmd->add_option("--tokenizer", a.tokenizer_file,
                  "Tokenizer file to use instead of training one (tokenizer.json or sentencepiece .model); "
                  "the rows' vocab_size becomes its vocabulary");
  auto* tok_type = cmd->add_option("--tokenizer-type", o->tokenizer_type,
                                   "byte, bpe, unigram, byte-level-bpe or hf-unigram")
                       ->check(CLI::IsMember({"byte", "bpe", "unigram", "byte-level-bpe", "hf-unigram"}));
  auto* tok_vocab = cmd->add_option("--tokenizer-vocab", o->tokenizer_vocab, "Vocabulary of a trained tokenizer")
                        ->check(range(16, 1 << 20));
  auto* precision = cmd->add_option("--precision", o->precision,
                                    "Matrix products of every row's training: f32 or bf16 (needs AVX512-BF16; "
                                    "docs/training.md)")
                       ->check(CLI::IsMember({"f32", "bf16"}));
  auto* data_split = cmd->add_option("--data-split", o->data_split,
                                     "Validation split of every row: blocks or chunks-shuffled (overrides the "
                                     "suite's; docs/training.md)")
                         ->check(CLI::IsMember({"blocks", "chunks-shuffled"}));
  auto* batching = cmd->add_option("--batching", o->batching,
                                   "Batches of every row: random-windows or epochs (overrides the suite's)")
                       ->check(CLI::IsMember({"random-windows", "epochs"}));
  auto* chunk_last = cmd->add_option("--chunk-last-target", o->chunk_last_target,
                                     "Last target of each chunk: next or eos (overrides the suite's)")
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
  auto* attention_dropout = cmd->add_option("--attention-dropout", o->attention_dropout,
                                            "Dropout on the attention probabilities of every row while training")
                                ->check(range(0.0, 0.99));
  cmd->add_option("--cache-context", a.cache_context, "Context length of the KV-cache / Mamba-state figures")
      ->check(range(int64_t{1}, int64_t{1} << 30))->capture_default_str();
  cmd->add_option("--sample-tokens", a.sample_tokens, "Tokens generated per sample prompt (also times decoding)")
      ->check(range(1, 1 << 20))->capture_default_str();
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
  cmd->callback([o, &global, scale, repeats, stop_epochs, temperature, top_k, top_p, sample_length, steps, epochs, batch, seq_len, lr, warmup, eval_interval, eval_windows, seed, tok_type,
                 tok_vocab, init_scheme, precision, data_split, batching, chunk_last, attention_dropout] {
    apply_global_options(global);
    ablate::AblateOptions& run = o->ablate;
    if (o->list) {
      list_suites(run.scale);
      return;
    }
    HYMBA_USAGE_CHECK(!run.suite.empty(), "--suite: give a suite name or a suite .json file (see 'hymba ablate --list')");
    HYMBA_USAGE_CHECK(!run.out_dir.empty(), "--out: give an output directory");
    nlohmann::json& t = run.train_overrides;
    if (steps->count()) t["steps"] = o->steps;
    if (epochs->count()) t["epochs"] = o->epochs;
    if (stop_epochs->count()) t["stop_epochs"] = o->stop_epochs;
    nlohmann::json& smp = run.sampling_overrides;
    if (temperature->count()) smp["temperature"] = o->temperature;
    if (top_k->count()) smp["top_k"] = o->top_k;
    if (top_p->count()) smp["top_p"] = o->top_p;
    if (sample_length->count()) smp["tokens"] = o->sample_length;
    if (batch->count()) t["batch"] = o->batch;
    if (seq_len->count()) t["seq_len"] = o->seq_len;
    if (lr->count()) t["lr"] = o->lr;
    if (warmup->count()) t["warmup"] = o->warmup;
    if (eval_interval->count()) t["eval_interval"] = o->eval_interval;
    if (eval_windows->count()) t["eval_windows"] = o->eval_windows;
    if (seed->count()) t["seed"] = o->seed;
    if (tok_type->count()) t["tokenizer"] = o->tokenizer_type;
    if (tok_vocab->count()) t["tokenizer_vocab"] = o->tokenizer_vocab;
    if (precision->count()) t["precision"] = o->precision;
    if (data_split->count()) t["data_split"] = o->data_split;
    if (batching->count()) t["batching"] = o->batching;
    if (chunk_last->count()) t["chunk_last_target"] = o->chunk_last_target;
    if (o->recompute) t["recompute"] = true;
    if (init_scheme->count())
      run.model_overrides["init_scheme"] = to_string(parse_init_scheme_flag(o->init_scheme));
    if (o->window_symmetric) run.model_overrides["sliding_window_symmetric"] = true;
    if (o->meta_sees_all) run.model_overrides["meta_tokens_see_all"] = true;
    if (attention_dropout->count()) run.model_overrides["attention_dropout"] = o->attention_dropout;
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
