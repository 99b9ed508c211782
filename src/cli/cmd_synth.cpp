// `hymba synth`: synthetic recall / copying tasks (MAD, Zoology MQAR,
// induction heads) on Transformer, Mamba, Hymba and sequential hybrids.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "kernels/cpu/cross_entropy.h"
#include "synth/runner.h"
#include "synth/suite.h"
#include "synth/tasks.h"
#include "synth/trainer.h"

namespace hymba::cli {

namespace {

using nlohmann::json;

// A flag whose value, when given, overrides one key of the task, train or
// model settings (of every row of a suite).
struct Override {
  CLI::Option* option;
  std::string group, key;
  std::function<json()> value;
};

struct Options {
  std::string suite, out, task, preset, gnuplot = "gnuplot";
  int64_t show = 0;
  int ranks_per_row = 1;
  int64_t repeats = 1;
  bool list = false, no_plots = false, quiet = false;
  // Values of the override flags (read only when given).
  int64_t vocab_size = 0, seq_len = 0, num_tokens_to_copy = 0, noise_vocab_size = 0, max_key_len = 0,
          max_value_len = 0, num_kv_pairs = 0, num_passes = 0;
  double frac_noise = 0, mqar_power_a = 0;
  uint64_t memorization_seed = 0;
  bool multi_query = true, random_non_queries = true;
  std::string train_scores;
  int64_t epochs = 0, batch_size = 0, eval_batch = 0, warmup = 0, num_train = 0, num_test = 0, test_seq_len = 0,
          test_num_kv_pairs = 0, decoder_width = 0;
  double lr = 0, weight_decay = 0, beta2 = 0, grad_clip = 0, stop_at_acc = 0;
  uint64_t seed = 0;
  std::string schedule, stop_metric, model, link, init_scheme;
  int64_t hidden_size = 0, num_layers = 0, num_heads = 0, num_blocks = 0, trans_layers = 0, mamba_layers = 0,
          d_state = 0;
  double ffn_mult = 0, init_std = 0;
  std::vector<Override> overrides;
};

template <class T>
CLI::Option* add(CLI::App* cmd, Options& o, const std::string& names, T& field, const char* group, const char* key,
                 const std::string& help) {
  CLI::Option* opt = cmd->add_option(names, field, help);
  o.overrides.push_back({opt, group, key, [&field] { return json(field); }});
  return opt;
}

void list_everything() {
  std::printf("Tasks: ");
  for (const std::string& n : synth::task_names()) std::printf("%s ", n.c_str());
  std::printf("\n\nTask presets (--preset):\n");
  for (const synth::TaskPreset& p : synth::task_presets())
    std::printf("  %-28s %s\n  %-28s recipe: %s\n", p.name.c_str(), p.description.c_str(), "", p.train.dump().c_str());
  std::printf("\nSuites (--suite):\n");
  for (const synth::SynthSuiteInfo& info : synth::builtin_synth_suites()) {
    const synth::SynthSuite s = synth::load_synth_suite(info.name);
    std::printf("  %s — %s\n", info.name.c_str(), info.description.c_str());
    for (const synth::SynthRow& r : s.rows) std::printf("    %-22s %s\n", r.id.c_str(), r.name.c_str());
    std::printf("    recipe: %s\n", s.train.to_json().dump().c_str());
  }
}

// The first examples of the sets training uses (train and test have separate seeds).
void show_examples(const synth::TaskSpec& task, int64_t n, const synth::TrainSettings& settings) {
  const synth::TaskData data = synth::task_data(task, settings, n);
  for (bool test : {false, true}) {
    const synth::Dataset& d = test ? data.test : data.train;
    std::printf("%s set, first %lld of %lld examples (%lld scored of %lld positions):\n", test ? "test" : "train",
                static_cast<long long>(d.n), static_cast<long long>(test ? settings.num_test : settings.num_train),
                static_cast<long long>(d.scored()), static_cast<long long>(d.n * d.seq));
    for (int64_t i = 0; i < d.n; ++i) {
      std::printf("  input :");
      for (int64_t t = 0; t < d.seq; ++t) std::printf(" %3d", d.input(i)[t]);
      std::printf("\n  target:");
      for (int64_t t = 0; t < d.seq; ++t) {
        const int32_t v = d.target(i)[t];
        if (v == cpu::kIgnoreIndex) std::printf("   .");
        else std::printf(" %3d", v);
      }
      std::printf("\n");
    }
  }
}

void run(Options& o) {
  json ovr = {{"task", json::object()}, {"train", json::object()}, {"model", json::object()}};
  for (const Override& f : o.overrides)
    if (f.option->count() > 0) ovr[f.group][f.key] = f.value();
  if (ovr["task"].contains("train_scores"))
    ovr["task"]["train_scores_all"] = ovr["task"]["train_scores"].get<std::string>() == "all";
  ovr["task"].erase("train_scores");

  synth::SynthSuite suite;
  const bool single = o.suite.empty();
  if (!single) {
    HYMBA_CHECK(o.task.empty() && o.preset.empty(), "--suite: a suite names its own task; drop --task / --preset");
    suite = synth::load_synth_suite(o.suite);
  } else {
    HYMBA_CHECK(!o.task.empty() || !o.preset.empty(), "--task: give a task, a --preset or a --suite (see --list)");
    suite.name = "custom";
    if (!o.preset.empty()) {
      const synth::TaskPreset& p = synth::find_task_preset(o.preset);
      suite.task = p.spec;
      suite.train = synth::TrainSettings::from_json(p.train, suite.train, "preset " + p.name);
    }
    if (!o.task.empty()) {
      const synth::TaskKind kind = synth::parse_task(o.task);
      HYMBA_CHECK(o.preset.empty() || kind == suite.task.kind, "--task: ", o.task, " differs from preset ", o.preset,
                  "'s task");
      suite.task.kind = kind;
    }
    synth::SynthRow row;
    row.id = "run";
    suite.rows.push_back(row);
  }
  suite.task = synth::TaskSpec::from_json(ovr["task"], suite.task, "flags");
  suite.train = synth::TrainSettings::from_json(ovr["train"], suite.train, "flags");
  for (synth::SynthRow& r : suite.rows) {
    const bool default_name = r.name.empty() || r.name == r.arch.label();
    r.arch = synth::ArchSpec::from_json(ovr["model"], r.arch, "flags");
    if (default_name) r.name = r.arch.label();
  }
  if (single) suite.title = std::string(synth::to_string(suite.task.kind)) + " — " + suite.rows[0].name;

  if (o.show > 0) {
    show_examples(synth::row_task(suite, suite.rows[0]), o.show, suite.train);
    return;
  }
  if (single && o.out.empty()) {
    HYMBA_CHECK(o.ranks_per_row == 1, "--ranks-per-row: only for a suite or a run with --out");
    HYMBA_CHECK(o.repeats == 1, "--repeats: only for a suite or a run with --out");
    const synth::TaskSpec task = synth::row_task(suite, suite.rows[0]);
    const synth::RunResult r = synth::train_on_task(task, suite.rows[0].arch, suite.train, [](const synth::EpochStats& e) {
      std::printf("epoch %3lld  train loss %.4f  eval loss %.4f  eval acc %.4f  macro %.4f  lr %.3g  (%.1fs)\n",
                  static_cast<long long>(e.epoch), e.train_loss, e.eval_loss, e.eval_acc, e.eval_macro_acc, e.lr,
                  e.seconds);
      std::fflush(stdout);
    });
    const synth::EpochStats& e = r.last();
    std::printf("%s: %lld parameters; epoch %lld: train loss %.3f, eval loss %.3f, eval acc %.3f, macro acc %.3f\n",
                suite.rows[0].name.c_str(), static_cast<long long>(r.params), static_cast<long long>(e.epoch),
                e.train_loss, e.eval_loss, e.eval_acc, e.eval_macro_acc);
    return;
  }
  HYMBA_CHECK(!o.out.empty(), "--out: a suite needs an output directory");
  synth::SuiteRunOptions ro;
  ro.out_dir = o.out;
  ro.quiet = o.quiet;
  ro.ranks_per_row = o.ranks_per_row;
  ro.repeats = o.repeats;
  if (!o.no_plots) ro.gnuplot = o.gnuplot;
  else ro.gnuplot.clear();
  const synth::SuiteRunSummary s = synth::run_synth_suite(suite, ro);
  if (!dist::world().is_root()) return;  // rank 0 wrote the suite's files and reports them
  std::printf("%s\n", synth::synth_markdown_table(s.rows).c_str());
  if (!s.answers.empty()) std::printf("%s\n", report::answers_markdown(s.answers).c_str());
  std::printf("report: %s\n        %s%s\n", s.report_md.c_str(), s.report_html.c_str(),
              s.plots_written ? " (plots in plots/)" : "");
}

}  // namespace

void register_synth(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<Options>();
  Options& x = *o;
  CLI::App* cmd = app.add_subcommand(
      "synth", "Synthetic tasks (MAD recall/copying/compression/memorization, MQAR, induction heads): train and "
               "compare Transformer, Mamba, Hymba and sequential hybrids");
  cmd->footer(
      "One run:  hymba synth --task selective-copying --model mamba [task, model and training flags]\n"
      "A suite:  hymba synth --suite seed004-selective-copying --out DIR   (or a suite .json file; flags override it)\n"
      "Settings left out come from --preset (or the suite; --list shows each preset's recipe). The mad-* presets\n"
      "train as MAD does: batch 128, 200 epochs, cosine per epoch to 1e-6, weight decay 0, no clipping, stop at\n"
      "macro accuracy 0.999. Without a preset: V 16, L 128 and the other task defaults (docs/synth.md), and seed\n"
      "004's copying recipe (batch 8, 50 epochs, constant lr 5e-4, weight decay 0.01, clipping at 1.0, 4000 / 200\n"
      "examples, no early stop).\n"
      "Seed 004's flag spellings (--vocab_size, --num_tokens_to_copy, --num_train_examples, --batch_size, ...)\n"
      "are accepted. docs/synth.md.");
  cmd->add_option("--suite", x.suite, "Built-in suite (see --list) or a suite .json file");
  cmd->add_option("--out", x.out, "Output directory: results.json/.csv, report.md/.html, plots/");
  cmd->add_option("--task", x.task, "in-context-recall, noisy-recall, fuzzy-recall, selective-copying, compression, "
                                    "memorization, mqar, induction-heads");
  cmd->add_option("--preset", x.preset, "Task preset: mad-*, mqar, induction-heads, seed004-* (see --list)");
  cmd->add_option("--show", x.show, "Print N generated examples (train and test scoring) and exit")
      ->check(range(1, 1000));
  cmd->add_flag("--list", x.list, "List the tasks, task presets and suites, and exit");
  cmd->add_option("--gnuplot", x.gnuplot, "gnuplot program to render the plots")->capture_default_str();
  cmd->add_flag("--no-plots", x.no_plots, "Write the report without plots");
  cmd->add_flag("--quiet", x.quiet, "No per-epoch lines");
  cmd->add_option("--repeats", x.repeats,
                  "A suite: runs per row with seeds --seed + 0 .. N-1; the report gives means, 95 % intervals and "
                  "the suite's questions (a rerun with a larger N adds the missing repeats)")
      ->check(range(int64_t{1}, int64_t{1000}))->capture_default_str();
  cmd->add_option("--ranks-per-row", x.ranks_per_row,
                  "A suite under mpirun: MPI ranks that train each row data-parallel (must divide the ranks; "
                  "the default 1 gives every rank rows of its own)")
      ->check(range(1, 1 << 20))->capture_default_str();
  // Task difficulty.
  add(cmd, x, "--vocab-size,--vocab_size", x.vocab_size, "task", "vocab_size", "Vocabulary (all special tokens included)");
  add(cmd, x, "--seq-len,--seq_len", x.seq_len, "task", "seq_len", "Sequence length L");
  add(cmd, x, "--num-tokens-to-copy,--num_tokens_to_copy", x.num_tokens_to_copy, "task", "num_tokens_to_copy",
      "Selective copying: data tokens to copy");
  add(cmd, x, "--noise-vocab-size", x.noise_vocab_size, "task", "noise_vocab_size",
      "Noisy recall: noise tokens (the top of the vocabulary)");
  add(cmd, x, "--frac-noise", x.frac_noise, "task", "frac_noise", "Noisy recall: probability a pair slot is noise");
  add(cmd, x, "--max-key-len", x.max_key_len, "task", "max_key_len", "Fuzzy recall: longest key tuple");
  add(cmd, x, "--max-value-len", x.max_value_len, "task", "max_value_len", "Fuzzy recall: longest value tuple");
  add(cmd, x, "--num-kv-pairs", x.num_kv_pairs, "task", "num_kv_pairs", "MQAR: key-value pairs (queries)");
  add(cmd, x, "--mqar-power-a", x.mqar_power_a, "task", "mqar_power_a", "MQAR: query gap power-law exponent a");
  add(cmd, x, "--num-passes", x.num_passes, "task", "num_passes", "MQAR: times the key-value context is repeated");
  add(cmd, x, "--random-non-queries", x.random_non_queries, "task", "random_non_queries",
      "MQAR: true (Zoology's default) fills non-query slots with random tokens, distractor keys included; false: 0");
  add(cmd, x, "--multi-query", x.multi_query, "task", "multi_query",
      "Recall tasks: true (MAD's default) scores every repeated key at test; false: MAD's single-query variant");
  add(cmd, x, "--memorization-seed", x.memorization_seed, "task", "memorization_seed",
      "Memorization: seed of the fixed fact table");
  add(cmd, x, "--train-scores", x.train_scores, "task", "train_scores",
      "Recall tasks: training scores 'all' next tokens (MAD) or only the 'answers'")
      ->check(CLI::IsMember({"all", "answers"}));
  // Model.
  add(cmd, x, "--model", x.model, "model", "model", "transformer, mamba, hymba (parallel heads) or hybrid (sequential)")
      ->check(CLI::IsMember({"transformer", "mamba", "hymba", "hybrid"}));
  add(cmd, x, "--hidden-size,--hidden_size", x.hidden_size, "model", "hidden_size", "Model width");
  add(cmd, x, "--num-layers,--num_layers", x.num_layers, "model", "num_layers", "Layers (transformer, mamba, hymba)");
  add(cmd, x, "--num-heads,--num_heads", x.num_heads, "model", "num_heads", "Attention heads");
  add(cmd, x, "--num-blocks,--num_blocks", x.num_blocks, "model", "num_blocks", "Hybrid: blocks");
  add(cmd, x, "--trans-layers,--num_trans_layers", x.trans_layers, "model", "trans_layers",
      "Hybrid: attention layers per block (first)");
  add(cmd, x, "--mamba-layers,--num_mamba_layers", x.mamba_layers, "model", "mamba_layers",
      "Hybrid: Mamba layers per block (after the attention layers)");
  add(cmd, x, "--link", x.link, "model", "link", "Hybrid: block link null, residual or gated")
      ->check(CLI::IsMember({"null", "residual", "res", "gated", "gated-res"}));
  add(cmd, x, "--ffn-mult", x.ffn_mult, "model", "ffn_mult", "SwiGLU width / hidden for models with attention (0: none)");
  add(cmd, x, "--d-state", x.d_state, "model", "d_state", "Mamba state size");
  add(cmd, x, "--init-std", x.init_std, "model", "init_std",
      "Model initializer_range: std of the normal init (scheme normal; mamba_ssm: embeddings)");
  add(cmd, x, "--init-scheme", x.init_scheme, "model", "init_scheme",
      "Parameter init: normal (N(0, --init-std)), torch (PyTorch module defaults) or mamba_ssm (MambaLMHeadModel)");
  // Training.
  add(cmd, x, "--epochs", x.epochs, "train", "epochs", "Epochs over the training set");
  add(cmd, x, "--batch-size,--batch_size", x.batch_size, "train", "batch_size", "Training batch");
  add(cmd, x, "--eval-batch", x.eval_batch, "train", "eval_batch", "Evaluation batch");
  add(cmd, x, "--lr", x.lr, "train", "lr", "AdamW learning rate");
  add(cmd, x, "--weight-decay", x.weight_decay, "train", "weight_decay", "AdamW weight decay");
  add(cmd, x, "--beta2", x.beta2, "train", "beta2", "AdamW beta2");
  add(cmd, x, "--schedule", x.schedule, "train", "schedule",
      "constant, cosine (MAD: to 1e-6, stepped once per epoch) or cosine-step (the same curve over steps)")
      ->check(CLI::IsMember({"constant", "cosine", "cosine-step"}));
  add(cmd, x, "--warmup", x.warmup, "train", "warmup", "Linear warmup steps");
  add(cmd, x, "--grad-clip", x.grad_clip, "train", "grad_clip", "Global gradient-norm clip (<= 0: off)");
  add(cmd, x, "--seed", x.seed, "train", "seed", "Seed of the data sets, initialisation and order");
  add(cmd, x, "--num-train-examples,--num_train_examples", x.num_train, "train", "num_train", "Training examples");
  add(cmd, x, "--num-test-examples,--num_test_examples", x.num_test, "train", "num_test", "Test examples");
  add(cmd, x, "--stop-at-acc", x.stop_at_acc, "train", "stop_at_acc",
      "Stop after the first epoch whose eval accuracy reaches this (0: off)");
  add(cmd, x, "--stop-metric", x.stop_metric, "train", "stop_metric",
      "Accuracy --stop-at-acc reads: token, or macro (MAD's per-class average)")
      ->check(CLI::IsMember({"token", "macro"}));
  add(cmd, x, "--test-num-kv-pairs", x.test_num_kv_pairs, "train", "test_num_kv_pairs",
      "MQAR: key-value pairs of the test set (0: as in training)");
  add(cmd, x, "--test-seq-len", x.test_seq_len, "train", "test_seq_len",
      "Test at another sequence length (length generalisation; 0: the training length)");
  add(cmd, x, "--decoder-width", x.decoder_width, "train", "decoder_width", "Compression decoder width (0: the model width, as MAD)");
  cmd->callback([o, &global] {
    apply_global_options(global);
    if (o->list) {
      list_everything();
      return;
    }
    run(*o);
  });
}

}  // namespace hymba::cli
