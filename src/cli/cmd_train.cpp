// `hymba train` and `hymba eval`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "api/hymba.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace hymba::cli {

void register_train(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    ModelChoice model;
    TrainOptions train;
    std::string weight_decay_scope = "matrices";
    std::string precision = "f32";
    std::string data_split = "blocks", batching = "random-windows", chunk_last_target = "next";
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  TrainOptions& t = opts->train;
  CLI::App* cmd = app.add_subcommand("train", "Train a model on text and write checkpoints, metrics and a summary");
  add_model_options(cmd, opts->model);
  cmd->add_option("--data", t.data,
                  "Corpus: .txt file, directory of .txt, .jsonl with \"text\", TinyStories (-train.txt or .json), "
                  "WikiText-103 raw, a PG-19 folder, or 'default' (docs/training.md)")
      ->capture_default_str();
  cmd->add_option("--out", t.out_dir, "Run directory (checkpoints, metrics.jsonl, summary.json); locked while training")
      ->required();
  cmd->add_option("--data-split", opts->data_split,
                  "blocks: hold out random 256-token blocks (or a published valid split); chunks-shuffled: cut "
                  "--seq-len chunks, shuffle them once by --seed, hold out the last --val-fraction (seeds 001, 002)")
      ->check(CLI::IsMember({"blocks", "chunks-shuffled"}))->capture_default_str();
  cmd->add_option("--batching", opts->batching,
                  "random-windows: each step draws windows at random offsets; epochs: every epoch a new shuffle of "
                  "whole windows, the last partial batch dropped")
      ->check(CLI::IsMember({"random-windows", "epochs"}))->capture_default_str();
  cmd->add_option("--chunk-last-target", opts->chunk_last_target,
                  "next: a chunk's last target is the next token; eos: EOS (seed 002; needs --data-split "
                  "chunks-shuffled)")
      ->check(CLI::IsMember({"next", "eos"}))->capture_default_str();
  cmd->add_flag("--resume", t.resume,
                "Continue the run in --out from its latest checkpoint (the recipe must not change; "
                "Ctrl-C/SIGTERM save one and exit 130/143)");
  auto* init = cmd->add_option("--init", t.init_from,
                               "Fine-tune: start from this checkpoint's weights and tokenizer (run, checkpoint or "
                               "published directory) instead of a fresh model");
  init->excludes("--preset")->excludes("--config");
  cmd->add_option("--tokenizer", t.tokenizer_path, "Use this tokenizer file instead of building one")->excludes(init);
  cmd->add_option("--tokenizer-type", t.tokenizer_type,
                  "byte, bpe, unigram, byte-level-bpe or hf-unigram (seed 002's Hugging Face Unigram)")->capture_default_str();
  cmd->add_option("--tokenizer-min-frequency", t.tokenizer_min_frequency,
                  "byte-level-bpe: a merge needs a pair seen at least this often")
      ->capture_default_str();
  cmd->add_flag("--tokenizer-corpus-alphabet", t.tokenizer_corpus_alphabet,
                "byte-level-bpe: only the corpus's bytes get a token, others encode to <unk> (HF's BpeTrainer, seed 001)");
  cmd->add_option("--tokenizer-vocab", t.tokenizer_vocab, "Vocabulary of a trained tokenizer")
      ->check(range(16, 1 << 20))->capture_default_str();
  cmd->add_option("--steps", t.steps, "Optimizer steps (default 200 unless --epochs)")->check(range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--epochs", t.epochs, "Passes over the training tokens (instead of --steps)")->check(range(0.0, 1e6));
  cmd->add_option("--batch", t.batch, "Sequences per micro-batch")->check(range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--seq-len", t.seq_len, "Tokens per sequence")->check(range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--grad-accum", t.grad_accum, "Micro-batches per step")->check(range(1, 1 << 16))->capture_default_str();
  cmd->add_option("--grad-shards", t.grad_shards,
                  "Each batch's gradient as S shards of batch/S sequences added in a fixed tree: 1 process and "
                  "2, 4, ... MPI ranks (a power of two dividing S) train bit-identically (0: off)")
      ->check(range(0, 1 << 20))->capture_default_str();
  cmd->add_option("--lr", t.lr, "Peak learning rate")->check(range(1e-12, 10.0))->capture_default_str();
  cmd->add_option("--min-lr-ratio", t.min_lr_ratio, "Cosine floor as a fraction of --lr")->check(range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--warmup", t.warmup, "Linear warmup steps")->check(range(0, 1 << 30))->capture_default_str();
  cmd->add_option("--weight-decay", t.adamw.weight_decay, "AdamW decoupled weight decay")->check(range(0.0, 10.0))->capture_default_str();
  cmd->add_option("--weight-decay-scope", opts->weight_decay_scope,
                  "matrices: decay weight matrices only (not norms, biases, meta tokens, A_log, D, beta); all: every "
                  "parameter, as seed 001 passes model.parameters() to AdamW")
      ->check(CLI::IsMember({"matrices", "all"}))->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "Matrix products of the training steps: f32, or bf16 with float32 sums (needs AVX512-BF16; "
                  "weights, optimizer state, norms, softmax, the scan, the loss and validation stay float32)")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  cmd->add_flag("--recompute", t.recompute,
                "Keep only each layer's input in the forward pass and run the layer again in the backward: "
                "activation memory of about one layer for one more forward pass per step (same weights; docs/training.md)");
  cmd->add_flag("--profile", t.profile,
                "Time each step's gradient pass, optimizer and matrix products (from the third step), then replay "
                "the products' shapes alone for their peak: a few lines at the end and summary.json's \"profile\"");
  cmd->add_option("--beta1", t.adamw.beta1, "AdamW beta1")->check(range(0.0, 0.99999))->capture_default_str();
  cmd->add_option("--beta2", t.adamw.beta2, "AdamW beta2")->check(range(0.0, 0.99999))->capture_default_str();
  cmd->add_option("--grad-clip", t.grad_clip, "Global gradient-norm clip (0 = off)")->check(range(0.0, 1e6))->capture_default_str();
  cmd->add_option("--label-smoothing", t.label_smoothing, "Label smoothing")->check(range(0.0, 0.999))->capture_default_str();
  cmd->add_option("--dropout", t.dropout, "Residual dropout (default: the model config's)")->check(range(0.0, 0.999));
  cmd->add_option("--log-interval", t.log_interval, "Steps between metric records")->check(range(1, 1 << 30))->capture_default_str();
  cmd->add_option("--eval-interval", t.eval_interval, "Steps between validations")->check(range(1, 1 << 30))->capture_default_str();
  cmd->add_option("--eval-windows", t.eval_windows, "Validation windows per evaluation (0 = all)")->check(range(0, 1 << 30))->capture_default_str();
  cmd->add_option("--save-interval", t.save_interval, "Steps between checkpoints")->check(range(1, 1 << 30))->capture_default_str();
  cmd->add_option("--val-fraction", t.val_fraction, "Share of the data held out")->check(range(0.001, 0.9))->capture_default_str();
  cmd->add_option("--seed", t.seed, "Seed for init, data order and dropout")->capture_default_str();
  cmd->add_flag("--plain-progress", t.plain_progress, "Periodic lines instead of a live bar");
  cmd->add_flag("--quiet", t.quiet, "No progress output");
  cmd->add_flag("--json", opts->json, "Print the summary as JSON on stdout");
  cmd->callback([opts, &global] {
    opts->train.adamw.decay_all = opts->weight_decay_scope == "all";
    opts->train.precision = *cpu::parse_matmul_precision(opts->precision);
    opts->train.data_split = parse_data_split(opts->data_split, "--data-split");
    opts->train.batching_epochs = opts->batching == "epochs";
    opts->train.chunk_last_eos = opts->chunk_last_target == "eos";
    HYMBA_USAGE_CHECK(!opts->train.chunk_last_eos || opts->train.data_split == DataSplit::kChunksShuffled,
                      "--chunk-last-target eos needs --data-split chunks-shuffled (it rewrites each chunk's last target)");
    HYMBA_USAGE_CHECK(opts->train.data_split == DataSplit::kBlocks || opts->train.batching_epochs,
                      "--data-split chunks-shuffled needs --batching epochs (random windows would cross chunk borders)");
    apply_global_options(global);
    opts->train.threads = command_threads(global);
    opts->train.check_model = !opts->model.preset.empty() || !opts->model.config_path.empty();
    HYMBA_USAGE_CHECK(opts->train.init_from.empty() || opts->model.init_scheme.empty(),
                "--init-scheme: --init starts from the weights of its checkpoint; drop one of the two");
    HYMBA_USAGE_CHECK(!opts->train.resume || opts->model.init_scheme.empty() || opts->train.check_model,
                "--init-scheme: a resumed run keeps its weights; give the flag only with the run's --preset or --config");
    const ModelConfig cfg = resolve_model(opts->model,  // --resume and --init take the model of their checkpoint
                                          opts->train.resume || !opts->train.init_from.empty() ? "hybrid-official" : "");
    // A run killed after its last step but before summary.json: --resume writes the summary.
    opts->train.resume_finished =
        opts->train.resume && !std::filesystem::exists(std::filesystem::path(opts->train.out_dir) / kSummaryFile);
    const TrainSummary s = train(cfg, opts->train);
    if (!dist::world().is_root()) return;  // rank 0 reports for the job
    if (opts->json) {
      std::cout << s.to_json().dump(2) << "\n";
      return;
    }
    std::printf("done: %lld steps, %.3fM params, final train loss %.4f, val loss %.4f (ppl %.2f, acc %.3f), best %.4f "
                "at step %lld, %.0f train tok/s, %.1f s\n",
                static_cast<long long>(s.steps), s.params / 1e6, s.final_train_loss, s.final_val_loss, s.final_val_ppl,
                s.final_val_acc, s.best_val_loss, static_cast<long long>(s.best_step), s.train_tokens_per_s, s.wall_s);
    std::printf("run: %s (latest checkpoint, best/, metrics.jsonl, summary.json)\n", opts->train.out_dir.c_str());
  });
}

void register_eval(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, data;
    std::string split = "val";
    int64_t seq_len = 0, batch = 8, windows = 0;
    bool json = false;
    infer::WeightFormat weights = infer::WeightFormat::kF32;
    std::string top1_out, top1_against;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("eval", "Loss, perplexity and token accuracy of a checkpoint on text");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint or run directory")->required();
  cmd->add_option("--data", opts->data, "Corpus SPEC (default: the run's training data)");
  cmd->add_option("--split", opts->split,
                  "val: the held-out split (as in training; a published valid split); all: every token of train and "
                  "val; test: a published test split (WikiText-103, PG-19)")
      ->check(CLI::IsMember({"val", "all", "test"}))->capture_default_str();
  cmd->add_option("--seq-len", opts->seq_len, "Window length (default: the run's)")->check(range(1, 1 << 24));
  cmd->add_option("--batch", opts->batch, "Windows per forward")->check(range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--max-windows", opts->windows, "Evaluate at most this many windows (0 = all)")->check(range(0, 1 << 30));
  cmd->add_flag("--json", opts->json, "Print JSON");
  add_weights_option(cmd, opts->weights);
  cmd->add_option("--top1-out", opts->top1_out,
                  "Write each scored position's most likely token (JSON) to FILE, for --top1-against in another run");
  cmd->add_option("--top1-against", opts->top1_against,
                  "Also report how often this run's most likely token equals the one in FILE (written by --top1-out "
                  "on the same text, e.g. with --weights f32)");
  cmd->callback([opts, &global] {
    apply_global_options(global);
    // Read first: a bad file is an error before minutes of scoring.
    nlohmann::json against;
    if (!opts->top1_against.empty()) {
      against = read_json_file(opts->top1_against);
      HYMBA_CHECK(against.is_object() && against.contains("top1") && against["top1"].is_array(), opts->top1_against,
                  ": not a --top1-out file (no 'top1' array)");
    }
    LanguageModel lm = LanguageModel::load(opts->ckpt, opts->weights);
    CorpusScoreOptions so;
    so.data = opts->data;
    so.all_tokens = opts->split == "all";
    so.test_split = opts->split == "test";
    so.seq_len = opts->seq_len;
    so.batch = opts->batch;
    so.max_windows = opts->windows;
    so.keep_top1 = !opts->top1_out.empty() || !opts->top1_against.empty();
    // A long split takes minutes: a line on stderr at most every 2 s (none for a short one), so stdout stays clean.
    auto last = std::chrono::steady_clock::now();
    bool shown = false;
    so.on_progress = [&](int64_t done, int64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (done < total && now - last < std::chrono::seconds(2)) return;
      if (done == total && !shown) return;
      last = now;
      shown = true;
      std::fprintf(stderr, "%seval: %lld/%lld windows (%.0f%%)%s", ::isatty(2) ? "\r" : "", static_cast<long long>(done),
                   static_cast<long long>(total), 100.0 * static_cast<double>(done) / static_cast<double>(total),
                   ::isatty(2) && done < total ? "" : "\n");
      std::fflush(stderr);
    };
    const CorpusScore score = lm.score_corpus(so);
    const EvalResult& r = score.result;
    const std::string& ckpt = lm.source();
    const std::string& data = score.data;
    const int64_t seq_len = score.seq_len;
    nlohmann::json out{{"checkpoint", ckpt}, {"data", data},         {"split", opts->split},
                       {"weights", infer::to_string(opts->weights)},
                       {"loss", r.loss},      {"ppl", r.ppl},         {"accuracy", r.accuracy},
                       {"tokens", r.tokens},  {"windows", r.windows}, {"seq_len", seq_len}};
    if (!opts->top1_against.empty()) {
      const nlohmann::json& theirs = against["top1"];
      HYMBA_CHECK(theirs.size() == r.top1.size() && against.value("data", "") == data &&
                      against.value("split", "") == opts->split && against.value("seq_len", int64_t{0}) == seq_len,
                  opts->top1_against, ": scored ", theirs.size(), " positions of ", against.value("data", "?"), " (",
                  against.value("split", "?"), " split, --seq-len ", against.value("seq_len", int64_t{0}),
                  "), this run ", r.top1.size(), " of ", data, " (", opts->split, ", ", seq_len,
                  "): give both runs the same --data, --split, --seq-len and --max-windows");
      int64_t same = 0;
      for (size_t i = 0; i < r.top1.size(); ++i) {
        HYMBA_CHECK(theirs[i].is_number_integer(), opts->top1_against, ": top1[", i, "] is not a token id");
        same += theirs[i].get<int64_t>() == r.top1[i] ? 1 : 0;
      }
      out["top1_agreement"] = r.top1.empty() ? 0.0 : static_cast<double>(same) / static_cast<double>(r.top1.size());
      out["top1_against"] = against.value("weights", "?");
    }
    if (!opts->top1_out.empty()) {
      nlohmann::json saved = out;
      saved.erase("top1_agreement");
      saved.erase("top1_against");
      saved["top1"] = r.top1;
      write_text_atomic(opts->top1_out, saved.dump() + "\n");
    }
    if (opts->json) {
      std::cout << out.dump(2) << "\n";
    } else {
      std::printf("%s on %s (%s split, %lld tokens, --weights %s): loss %.4f  ppl %.3f  accuracy %.4f", ckpt.c_str(),
                  data.c_str(), opts->split.c_str(), static_cast<long long>(r.tokens), infer::to_string(opts->weights),
                  r.loss, r.ppl, r.accuracy);
      if (out.contains("top1_agreement"))
        std::printf("  top-1 agreement with %s %.4f", out["top1_against"].get<std::string>().c_str(),
                    out["top1_agreement"].get<double>());
      std::printf("\n");
    }
  });
}

}  // namespace hymba::cli
