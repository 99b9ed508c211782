// Native checkpoints whose linear weights are stored in a block format
// (`hymba quantize`, or `hymba import` of a quantized GGUF file):
// model.safetensors holds each such matrix as a U8 tensor [rows,
// block_row_bytes] in GGUF's block layout (Q8_0 / Q4_0, byte for byte), or
// as a BF16 tensor of its own shape, and its metadata key "hymba.blocks" maps
// those tensor names to "q8_0" / "q4_0" / "bf16". Everything else is stored
// as float32. docs/checkpoint-format.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/safetensors.h"
#include "model/model.h"

namespace hymba {

inline constexpr const char* kBlocksMetadataKey = "hymba.blocks";

// Writes a model holding matrices (model/held_weights.h) as such a file.
void save_held_params(const std::string& path, const Model& model, const std::map<std::string, std::string>& metadata);

// Loads such a file into a freshly built model. keep_blocks: the model holds
// the stored matrices (mapped from the file, never widened); else they are
// widened into its float32 rows, and the returned note says so. Every block
// tensor's dtype, shape and scales are checked before anything is loaded.
std::string load_held_params(const SafetensorsFile& file, Model& model, bool keep_blocks);

// Quantizes every linear weight matrix of a float32 model into `format`
// blocks and holds them (`hymba quantize`). Returns how many.
int64_t hold_quantized(Model& model, BlockFormat format);

// The name of the parameter at offset `offset` of the model's table.
const std::string& param_name_at(const Model& model, int64_t offset);

}  // namespace hymba
