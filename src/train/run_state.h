// A training run's directory:
//   OUT/ckpt-<step>/   config.json, model.safetensors, tokenizer.model,
//                      optimizer.safetensors (AdamW m and v), train_state.json
//   OUT/latest         name of the newest complete checkpoint (atomic pointer)
//   OUT/best/          model-only checkpoint with the best validation loss
//   OUT/metrics.jsonl  one record per log / eval step
//   OUT/summary.json   final figures
// A checkpoint directory is complete before `latest` points to it, so a run
// killed at any moment resumes from the previous checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"  // read_json_file
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"  // CheckpointTokenizer
#include "model/model.h"

namespace hymba {

inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kBestDir = "best";
inline constexpr const char* kMetricsFile = "metrics.jsonl";
inline constexpr const char* kSummaryFile = "summary.json";
inline constexpr const char* kTrainStateFile = "train_state.json";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";

// Resolves a checkpoint argument: a run directory (follows `latest`) or a
// checkpoint directory itself.
std::string resolve_checkpoint(const std::string& path);

// The training run record (train_state.json) that belongs to a checkpoint
// directory: its own (a run's step checkpoint), else, for one that sits in a
// run directory (its best/), the run's latest checkpoint's; "" when it has
// none (an exported or imported checkpoint).
std::string run_state_for_checkpoint(const std::string& dir);

// A model and its tokenizer from any directory a `--ckpt` flag takes: a run
// directory (its latest checkpoint), a checkpoint of ours, or a published HF
// Hymba / HF or state-spaces Mamba directory (docs/import.md). The tokenizer
// is tokenizer.model or tokenizer.json; errors name the directory or file.
struct LoadedCheckpoint {
  std::string dir;  // the checkpoint directory itself (after `latest`)
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;  // tokenizer.model, or a published tokenizer.json
  bool add_bos = false;  // tokenizer_config.json add_bos_token: prompts start with bos
};
// training: also allocate gradients and optimizer moments. keep_blocks:
// weights stored in q8 / q4 blocks stay so (inference; formats/checkpoint.h),
// and with hold_floats_as a GGUF file's float matrices are held in it.
LoadedCheckpoint load_checkpoint(const std::string& path, bool training, bool keep_blocks = false,
                                 std::optional<BlockFormat> hold_floats_as = std::nullopt);

// The checkpoint's tokenizer, refused (naming both files) when it has more
// ids than the model's vocab_size: such an id would fail deep in a forward
// pass, mid-run, instead of now.
// model_vocab < 0: the directory's config.json says (read after the tokenizer).
CheckpointTokenizer load_fitting_tokenizer(const std::string& ckpt_dir, int64_t model_vocab = -1);

// Writes OUT/ckpt-<step> completely, points `latest` at it, and removes
// older ckpt-* directories.
void save_training_checkpoint(const std::string& out_dir, int64_t step, const Model& model, const Tokenizer& tok,
                              const nlohmann::json& state);

// Writes a model-only checkpoint (config, weights, tokenizer) to dir.
void save_inference_checkpoint(const std::string& dir, const Model& model, const Tokenizer& tok,
                               const std::map<std::string, std::string>& metadata = {});

// Loads AdamW moments saved by save_training_checkpoint into model.
void load_optimizer_state(const std::string& ckpt_dir, Model& model);


}  // namespace hymba
