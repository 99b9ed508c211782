// Published checkpoints, read as they are downloaded (docs/import.md):
//   - official Hymba (HF HymbaForCausalLM config.json, model.* names),
//   - HF transformers MambaForCausalLM (backbone.embeddings, backbone.layers.*),
//   - original state-spaces Mamba (d_model / n_layer / ssm_cfg config,
//     backbone.embedding, vocabulary padded to pad_vocab_size_multiple),
//   - HF transformers GPTNeoForCausalLM (transformer.wte, transformer.h.*),
//   - HF transformers Qwen2ForCausalLM (a llama layer with q/k/v biases: model.layers.*),
// in safetensors, one file or shards listed by model.safetensors.index.json
// (else pytorch_model.bin, read without running its pickle: torch_checkpoint.h),
// F32 / BF16 / F16 (converted to F32). Every refusal is one line naming the
// file and the field or tensor.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/params.h"
#include "model/config.h"

namespace hymba {

enum class CheckpointLayout { kNative, kHfHymba, kHfMamba, kStateSpacesMamba, kHfGptNeo, kHfQwen2 };
const char* to_string(CheckpointLayout layout);

// Which layout a config.json is written in, from its keys. `source` names the
// file in errors (an unsupported "architectures" entry is one).
CheckpointLayout detect_layout(const nlohmann::json& config, const std::string& source);

// The engine config of a published (non-native) config.json. Every key of the
// published configs is mapped or accepted; values the engine cannot express
// are errors naming the field. JSON null means the field's default.
ModelConfig config_from_published(const nlohmann::json& config, CheckpointLayout layout, const std::string& source);

// Fills every row of `table` from the checkpoint directory's weights
// (model.safetensors or pytorch_model.bin, one file or the shards of its
// .index.json), mapping
// the layout's tensor names. All names, dtypes and shapes are checked before
// a value is written; tensors the model lacks are errors, except a stored
// lm_head equal to the embedding when the embeddings are tied.
void load_checkpoint_weights(const std::string& dir, CheckpointLayout layout, const ModelConfig& cfg,
                             ParamTable& table);

}  // namespace hymba
