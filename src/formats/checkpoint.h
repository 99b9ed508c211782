// Checkpoint formats, picked by one dispatcher: every `--ckpt` loader goes
// through load_model / load_checkpoint_config / load_checkpoint_tokenizer_of,
// which open
//   - a native checkpoint directory: config.json + model.safetensors (names
//     in docs/checkpoint-format.md; training adds its own files beside them),
//   - a published HF Hymba, HF / state-spaces Mamba or HF GPT-Neo directory
//     (formats/hf_import.h, docs/import.md),
//   - a GGUF file (formats/gguf_model.h, docs/gguf.md).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tokenizer/tokenizer_files.h"
#include "model/model.h"

namespace hymba {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kWeightsFile = "model.safetensors";

// Writes config.json and model.safetensors atomically, creating dir if
// needed; matrices the model holds in blocks are written as blocks. A
// float32 model's file is laid out as its parameter block
// (save_params_mappable), which load_model maps copy-on-write instead of
// reading: the weights cost page cache only, shared between processes, and
// writes to them (training) never reach the file.
void save_model(const std::string& dir, const Model& model, const std::map<std::string, std::string>& metadata = {});

// True when `path` is a regular file starting with GGUF's magic.
bool is_gguf_file(const std::string& path);

// Builds a model from a checkpoint directory (dir/config.json and its
// weights, every tensor's name, shape and dtype checked) or a GGUF file.
// Linear weights stored in q8 / q4 blocks (a quantized checkpoint,
// formats/held_checkpoint.h, or a GGUF file's Q8_0 / Q4_0 tensors) are held
// as they are when keep_blocks (inference: model/held_weights.h); otherwise,
// and always for training, they are widened to float32 with a one-line note
// on stderr. hold_floats_as (with keep_blocks: inference in that q8 / q4
// format) also holds a GGUF file's float linear matrices in it, quantized
// at load (gguf::load_gguf_weights), where they would otherwise be float32
// rows in anonymous memory; other checkpoints' float32 rows are file pages
// that the decoder drops once quantized.
std::unique_ptr<Model> load_model(const std::string& path, bool training, bool keep_blocks = false,
                                  std::optional<BlockFormat> hold_floats_as = std::nullopt);

// Reads and resolves a config.json file in any layout (native or published);
// errors name the file and field.
ModelConfig load_config_file(const std::string& path);
// The config of a checkpoint directory (its config.json) or a GGUF file.
ModelConfig load_checkpoint_config(const std::string& path);

// The tokenizer of a checkpoint directory (tokenizer/tokenizer_files.h) or of a
// GGUF file's metadata.
CheckpointTokenizer load_checkpoint_tokenizer_of(const std::string& path);
// A tokenizer file, a checkpoint directory's tokenizer or a GGUF file's.
std::unique_ptr<Tokenizer> load_tokenizer_anywhere(const std::string& path);

}  // namespace hymba
