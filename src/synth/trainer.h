// Training and evaluating one model on one synthetic task (`hymba synth`):
// Transformer, Mamba, Hymba (parallel heads) and seed 004's sequential
// hybrids, with per-epoch train loss, eval loss and eval accuracy over the
// scored positions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/communicator.h"
#include "model/config.h"
#include "synth/tasks.h"

namespace hymba::synth {

enum class ArchKind { kTransformer, kMamba, kHymba, kHybrid };

struct ArchSpec {
  ArchKind kind = ArchKind::kTransformer;
  int64_t hidden_size = 32;
  int64_t num_layers = 2;  // transformer, mamba, hymba
  int64_t num_heads = 2;
  // hybrid: num_blocks x (trans_layers attention layers, then mamba_layers Mamba layers), joined by `link`
  int64_t num_blocks = 1, trans_layers = 2, mamba_layers = 2;
  BlockLink link = BlockLink::kNull;
  double ffn_mult = 4.0;  // SwiGLU width / hidden for models with attention (pure Mamba never has one)
  int64_t d_state = 16;
  double init_std = 0.02;  // model initializer_range: std of the normal init (normal; mamba_ssm: embeddings)
  InitScheme init_scheme = InitScheme::kNormal;  // model init_scheme

  void validate() const;                 // errors name the flag
  std::string label() const;             // "Hybrid blocks 1, Null tLrs 2 mLrs 2" (seed 004's wording)
  nlohmann::json to_json() const;
  static ArchSpec from_json(const nlohmann::json& j, const ArchSpec& base, const std::string& source);
};

const char* to_string(ArchKind k);
ArchKind parse_arch(const std::string& name);  // transformer, mamba, hymba, hybrid
BlockLink parse_link(const std::string& name);  // null, residual (res), gated (gated-res)
InitScheme parse_scheme(const std::string& name);  // normal, torch, mamba_ssm

// The model config of an architecture for a task vocabulary.
ModelConfig make_model_config(const ArchSpec& arch, int64_t vocab_size);

struct TrainSettings {
  int64_t epochs = 50;
  int64_t batch_size = 8;
  int64_t eval_batch = 64;
  double lr = 5e-4;
  double weight_decay = 0.01;  // PyTorch AdamW's default, as the seed notebooks ran
  double beta2 = 0.999;
  // "constant"; "cosine": MAD's CosineAnnealingLR(T_max = epochs, eta_min =
  // 1e-6) stepped once per epoch; "cosine-step": the same curve over steps.
  std::string schedule = "constant";
  int64_t warmup = 0;                 // linear warmup steps (constant and cosine-step)
  double grad_clip = 1.0;             // <= 0: off
  uint64_t seed = 0;                  // data (train and test sets) and initialisation
  int64_t num_train = 4000, num_test = 200;
  double stop_at_acc = 0.0;           // > 0: stop after the first epoch reaching this eval accuracy
  std::string stop_metric = "token";  // which accuracy stop_at_acc reads: "token" or "macro" (MAD's)
  int64_t test_seq_len = 0;           // > 0: the test set at another length (length generalisation)
  int64_t test_num_kv_pairs = 0;      // MQAR, > 0: the test set with this many pairs (Zoology tests more)
  int64_t decoder_width = 0;          // compression decoder width; 0: the model width (MAD)

  void validate() const;
  nlohmann::json to_json() const;
  static TrainSettings from_json(const nlohmann::json& j, const TrainSettings& base, const std::string& source);
};

struct EpochStats {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, eval_loss = 0;
  double eval_acc = 0;        // token accuracy: correct / scored positions of the test set
  double eval_macro_acc = 0;  // MAD's macro-averaged accuracy (synth/metrics.h)
  double seconds = 0;
  double lr = 0;              // the learning rate of the epoch's last step
};

struct RunResult {
  int64_t params = 0;
  std::vector<EpochStats> epochs;
  bool stopped_early = false;
  double seconds = 0;
  const EpochStats& last() const { return epochs.back(); }
};

// The first `limit` examples (0 = all) of the train and test sets a run with
// these settings uses: separate seeds drawn from settings.seed, and the test
// set's --test-* overrides applied.
struct TaskData {
  Dataset train, test;
};
TaskData task_data(const TaskSpec& task, const TrainSettings& settings, int64_t limit = 0);

// Generates the task's train and test sets from settings.seed, trains, and
// evaluates after every epoch; on_epoch (may be empty) sees each epoch.
// With `comm` of K > 1 ranks the run is data-parallel (hymba synth
// --ranks-per-row): rank r takes rows [r B/K, (r+1) B/K) of every batch, the
// gradients are summed, and every rank takes the same step and evaluates the
// whole (small) test set, so every rank returns the same result.
RunResult train_on_task(const TaskSpec& task, const ArchSpec& arch, const TrainSettings& settings,
                        const std::function<void(const EpochStats&)>& on_epoch = {},
                        const dist::Communicator* comm = nullptr);

}  // namespace hymba::synth
