// Models in GGUF files (docs/gguf.md): the engine's Mamba-only models as
// llama.cpp's `mamba` architecture, its Llama-like Transformers as `llama`,
// and every other model as `hymba`, a key set of ours that the engine reads
// back exactly (llama.cpp cannot run it). Tensor names, shapes and values
// follow llama.cpp's converter (convert_hf_to_gguf.py): Q/K rows permuted for
// llama's interleaved RoPE, Mamba's A stored as -exp(A_log), conv weights
// squeezed to [d_inner, d_conv].
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"
#include "model/model.h"

namespace hymba::gguf {

// The --dtype of `export --format gguf`.
enum class ExportDtype { kF32, kF16, kQ8_0, kQ4_0 };
std::optional<ExportDtype> parse_export_dtype(std::string_view name);
const char* to_string(ExportDtype d);

// "mamba", "llama", "qwen2" (llama with Q/K/V biases) or "hymba" for cfg; for "hymba", `why` says (one clause)
// which part of the config llama.cpp's architectures lack.
std::string architecture_for(const ModelConfig& cfg, std::string* why = nullptr);

// The tensor type a tensor is stored in under `dtype`, as llama.cpp's
// converter and quantizer choose it: 1-D tensors, norms, conv1d, Mamba's A,
// D and dt bias (names not ending ".weight") stay F32; other matrices take
// the dtype, or F16 when their rows are not whole blocks of 32; under q4_0
// the output head (the tied embedding when there is none) keeps Q8_0.
TensorType storage_type(const std::string& gguf_name, int64_t rank, int64_t row_length, ExportDtype dtype,
                        bool is_output_head);

struct ExportSummary {
  std::string architecture;
  std::string note;  // one line for stderr ("" when nothing to say)
  int64_t tensors = 0;
  int64_t quantized = 0;  // tensors stored as Q8_0 / Q4_0
};
// Writes `model` (and the tokenizer of the checkpoint at tokenizer_source: a
// directory or a .gguf file; "" for none) to `path` atomically.
ExportSummary export_gguf(const Model& model, const std::string& tokenizer_source, const std::string& path,
                          ExportDtype dtype);

// A tensor's values widened to float32 (F16, BF16, Q8_0, Q4_0 decoded), in
// the file's order: ggml dims[0] fastest.
std::vector<float> read_tensor_f32(const File& file, const TensorInfo& tensor);

// The engine config a GGUF file describes; errors name the file and key.
ModelConfig config_from_gguf(const File& file);
// Fills every row of the model's table from the file's tensors (names,
// shapes and types checked first; tensors the model lacks are errors). With
// keep_blocks, Q8_0 / Q4_0 tensors of linear weight matrices are held as
// they are (model/held_weights.h: the same blocks, mapped from the file);
// other quantized tensors are widened to float32, and the returned one-line
// note says how many ("" when none). With keep_blocks and hold_floats_as
// (inference whose decoder runs in that q8 / q4 format), the file's float
// (F32 / F16 / BF16) linear weight matrices and untied head are quantized
// at load and held, the head in q8 (infer::head_format_of): the same blocks
// the decoder would make of them, and their float32 rows, which would be
// anonymous memory here, are never written.
std::string load_gguf_weights(const File& file, Model& model, bool keep_blocks,
                              std::optional<BlockFormat> hold_floats_as = std::nullopt);

}  // namespace hymba::gguf
