// `hymba export --format hf`: a directory HF transformers loads — config.json
// with "architectures" (HymbaForCausalLM or MambaForCausalLM), the weights
// under the HF names in model.safetensors (F32, BF16 or F16), and the
// tokenizer files.
// See docs/import.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/float_formats.h"
#include "model/model.h"

namespace hymba {

// The HF config.json of a model. Models HF's classes cannot express (other
// layer kinds, fusions, projection styles, a 1-key window) are errors naming
// the config field. torch_dtype names `dtype`.
nlohmann::json hf_config_json(const ModelConfig& cfg, int bos_id, int eos_id, int pad_id,
                              FloatFormat dtype = FloatFormat::kF32);

// Writes out_dir/model.safetensors (weights stored as `dtype`, rounded to
// nearest even; a weight the dtype cannot hold is an error naming it) and
// out_dir/config.json atomically, and copies or writes the tokenizer files of
// tokenizer_dir (when not empty). Returns a one-line note about the tokenizer
// ("" when nothing to say).
std::string export_hf(const Model& model, const std::string& tokenizer_dir, const std::string& out_dir,
                      FloatFormat dtype = FloatFormat::kF32);

}  // namespace hymba
