// The training loop behind `hymba train`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/dataset.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "dist/communicator.h"
#include "kernels/cpu/matmul.h"
#include "model/config.h"
#include "train/optimizer.h"

namespace hymba {

struct TrainOptions {
  std::string data = "default";  // corpus SPEC (see data/corpus.h)
  std::string out_dir;
  // Tokenizer: an existing file, or one to build (byte needs no training).
  std::string tokenizer_path;
  std::string tokenizer_type = "byte";
  int32_t tokenizer_vocab = 4096;
  // byte-level-bpe only: HF BpeTrainer's min_frequency, and whether the
  // alphabet is the corpus's bytes (as the trainer and seed 001 have it) or
  // all 256 (as HF's ByteLevelBPETokenizer).
  uint64_t tokenizer_min_frequency = 2;
  bool tokenizer_corpus_alphabet = false;

  int64_t steps = 0;    // total optimizer steps; 0: from epochs
  double epochs = 0.0;  // passes over the training tokens (when steps == 0)
  // > 0: stop after this many passes (whole batches, like a DataLoader with
  // drop_last) while the lr schedule still spans steps/epochs (seed 002's
  // epochs=1 under max_steps=150).
  double stop_epochs = 0.0;
  int64_t batch = 8;
  int64_t seq_len = 128;
  int64_t grad_accum = 1;
  // > 0: each micro-batch's gradient is the sum of this many shards' (B/S
  // sequences each, separate passes) in a fixed pairwise tree, so 1 process
  // and 2, 4, ... MPI ranks give bit-identical runs (train/sharded_gradient.h).
  int64_t grad_shards = 0;

  double lr = 3e-4;
  double min_lr_ratio = 0.1;  // cosine floor as a fraction of lr
  int64_t warmup = 20;
  AdamWConfig adamw;
  double grad_clip = 1.0;
  double label_smoothing = 0.0;
  double dropout = -1.0;  // < 0: the model config's value
  // The matrix products of each step's forward and backward: float32, or
  // bf16 with float32 sums (kernels/cpu/matmul.h, PyTorch's autocast on a
  // CPU). Weights, gradients, optimizer moments, norms, softmax, the scan
  // and the loss stay float32; validation runs in float32.
  cpu::MatmulPrecision precision = cpu::MatmulPrecision::kF32;
  // Keep only each layer's input in the forward and run the layer again in
  // the backward (ForwardOptions::recompute): activation memory of about one
  // layer plus the layer inputs, for one more forward pass per step. The
  // weights come out bit-identical, so it is not part of the recipe.
  bool recompute = false;
  // Time the steps' parts and their matrix products, then measure the
  // products' peak on the same shapes (train/step_profile.h): summary.json's
  // "profile" and, unless quiet, a few lines at the end. Not in the recipe.
  bool profile = false;
  // bf16's kernels. Unset: the CPU's best, refused where that is the portable
  // path (slower than float32); tests name kPortable to run on any CPU.
  std::optional<cpu::Bf16GemmIsa> bf16_isa;

  int64_t log_interval = 10;
  int64_t eval_interval = 50;
  // A fresh run evaluates the untrained model too (metrics.jsonl step 0), so
  // validation curves start where training does; not part of the recipe
  // (the weights are the same), and the step-0 figures are never "best".
  bool eval_at_start = false;
  int64_t eval_windows = 64;  // validation windows per evaluation (0: all)
  int64_t save_interval = 100;
  double val_fraction = 0.1;
  // How the data is cut (docs/training.md, "Splits and batches"): recipe
  // keys data_split (blocks | chunks-shuffled), batching (random-windows |
  // epochs: shuffled whole windows, the last partial batch dropped) and
  // chunk_last_target (next | eos: each chunk's last target is EOS).
  DataSplit data_split = DataSplit::kBlocks;
  bool batching_epochs = false;
  bool chunk_last_eos = false;
  uint64_t seed = 1234;
  int threads = 0;
  bool resume = false;
  // Fine-tuning: a new run starts from this checkpoint's weights and
  // tokenizer (any directory load_checkpoint() reads) instead of a fresh
  // init; the model config comes from it too. A resume reuses the run's.
  std::string init_from;
  // With resume: the model given by the caller (--preset/--config) must equal
  // the run's; otherwise the run's own model is used without comparison.
  bool check_model = false;
  // With resume: a run whose last checkpoint is its final step (killed before
  // summary.json was written) writes its summary instead of failing.
  bool resume_finished = false;
  bool quiet = false;       // no progress output
  bool plain_progress = false;  // periodic lines even on a terminal
  // Library hooks (the Python package; no flags). on_step, when set, runs
  // after every optimizer step with {"step", "steps", "loss", "lr",
  // "grad_norm", "tokens_per_s", "tokens"}, plus "val_loss", "val_ppl" and
  // "val_accuracy" after an evaluation. Returning false stops the run at this
  // step boundary as SIGINT does: a checkpoint, then Interrupted.
  std::function<bool(const nlohmann::json& step)> on_step;
  // false: SIGINT/SIGTERM keep the caller's handlers (Python polls its own
  // from on_step, so a notebook's second interrupt does not kill the kernel).
  bool catch_signals = true;
  // The ranks that train this run data-parallel (docs/training.md, MPI):
  // nullptr is every rank of the job (one process without mpirun). Each rank
  // computes the gradients of its share of every batch; rank 0 alone writes.
  const dist::Communicator* comm = nullptr;
};

struct TrainSummary {
  int64_t params = 0;
  int64_t steps = 0;
  int64_t tokens = 0;
  double final_train_loss = 0.0;
  double best_val_loss = 0.0, best_val_ppl = 0.0;
  int64_t best_step = -1;
  double final_val_loss = 0.0, final_val_ppl = 0.0, final_val_acc = 0.0;
  double train_tokens_per_s = 0.0;
  double wall_s = 0.0;
  // Memory of this run's training: the process's peak RSS since train()
  // started (the whole process's where the kernel cannot reset the mark:
  // peak_rss_scope "process", else "run"), and the activation arena's
  // high-water mark of the trained model. 0 when no step ran in this call.
  int64_t peak_rss_bytes = 0, activation_peak_bytes = 0;
  std::string peak_rss_scope = "run";
  // Data-parallel runs (ranks > 1): the share of the training time spent
  // summing gradients and losses across ranks (in summary.json only then).
  int ranks = 1;
  double comm_share = 0.0;
  // Of that, the gradient sum alone once every rank has arrived (transfer
  // and adds, without waiting for a slower rank's backward pass).
  double grad_sum_share = 0.0;
  // train --profile: profile_report()'s figures (null otherwise).
  nlohmann::json profile;
  nlohmann::json to_json() const;
};

// Trains (or resumes) a run in opt.out_dir, holding its lock (train/run_lock.h).
// Throws hymba::Error on bad input and when the loss becomes NaN/Inf (the last
// good checkpoint is kept), and Interrupted (train/stop_signal.h) after saving
// a checkpoint when SIGINT/SIGTERM arrives.
// The optimisation recipe's settings that every record of a run shares (the
// run state, ablation results); each record adds its own keys.
nlohmann::json recipe_core_json(const TrainOptions& opt);

// The options that build the run's tokenizer (tokenizer_type, _vocab, seed,
// and byte-level-bpe's min frequency and alphabet); errors name --tokenizer-type.
TokenizerTrainOptions tokenizer_train_options(const TrainOptions& opt);

TrainSummary train(const ModelConfig& cfg, const TrainOptions& opt);

// The dataset options of a run's recipe: its split, its seed as the split
// seed, its seq_len as the chunk length.
DatasetOptions dataset_options(const TrainOptions& opt);

// The recipe's data keys as written in records ("blocks", "epochs", ...).
const char* batching_name(bool epochs);
const char* chunk_last_target_name(bool eos);

// Reads a checkpoint's train_state.json (`text`, from `path`) as `--resume`
// does before it loads anything else: typed fields, then the run's recipe
// compared with `opt`'s. Throws hymba::Error naming the file and field, or
// listing the changed settings. For tests and fuzz/fuzz_train_state.cpp.
void check_train_state(const std::string& path, const std::string& text, const TrainOptions& opt);

}  // namespace hymba
