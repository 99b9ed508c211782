#include "formats/gguf_model.h"

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/excerpt.h"
#include "core/float_formats.h"
#include "core/json_io.h"
#include "core/safetensors.h"
#include "core/system_memory.h"
#include "formats/gguf_tokenizer.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"
#include "model/layout.h"

namespace hymba::gguf {

using nlohmann::json;

namespace {

// How a tensor's values change between the engine and the file.
enum class Transform {
  kNone,
  kPermuteQ,     // llama: rotate-half RoPE rows -> interleaved pairs, per query head
  kPermuteK,     // the same per key/value head
  kNegExp,       // mamba: A = -exp(A_log)
  kSqueezeConv,  // mamba: conv1d [d_inner, 1, K] stored as [d_inner, K]
  kZeros,        // mamba: a conv bias the engine model has not (llama.cpp requires one)
};

struct Mapping {
  std::string engine;  // row of the parameter table ("" for kZeros)
  std::string file;    // tensor name in the GGUF file
  Transform transform = Transform::kNone;
  std::vector<int64_t> dims;  // ggml order (innermost first)
  bool output_head = false;
};

std::vector<int64_t> reversed(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = s.rank - 1; i >= 0; --i) d.push_back(s[i]);
  return d;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::vector<Mapping> mappings(const ModelConfig& cfg, const ParamTable& table, const std::string& arch) {
  const ModelTensorNames names = tensor_names(cfg);
  std::vector<Mapping> out;
  auto add = [&](const std::string& engine, const std::string& file, Transform tr = Transform::kNone) {
    if (engine.empty()) return;
    Mapping m{engine, file, tr, reversed(table.info(engine).shape), false};
    if (tr == Transform::kSqueezeConv) m.dims = {m.dims[0], m.dims[2]};
    m.output_head = engine == names.lm_head || (cfg.tie_word_embeddings && engine == names.embed);
    out.push_back(std::move(m));
  };
  if (arch == "hymba") {
    for (const ParamInfo& p : table.rows()) add(p.name, p.name);
    return out;
  }
  add(names.embed, "token_embd.weight");
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerTensorNames& t = names.layers[static_cast<size_t>(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    add(t.input_norm, b + "attn_norm.weight");
    if (arch == "mamba") {
      add(t.mamba_in_proj, b + "ssm_in.weight");
      add(t.conv_weight, b + "ssm_conv1d.weight", Transform::kSqueezeConv);
      if (t.conv_bias.empty())
        out.push_back({"", b + "ssm_conv1d.bias", Transform::kZeros, {cfg.d_inner()}, false});
      add(t.conv_bias, b + "ssm_conv1d.bias");
      add(t.x_proj, b + "ssm_x.weight");
      add(t.dt_proj_weight, b + "ssm_dt.weight");
      add(t.dt_proj_bias, b + "ssm_dt.bias");
      add(t.a_log, b + "ssm_a", Transform::kNegExp);
      add(t.d_skip, b + "ssm_d");
      add(t.mamba_out_proj, b + "ssm_out.weight");
    } else if (arch == "qwen2") {
      // llama.cpp's qwen2 graph rotates halves (NeoX RoPE), as the engine does: rows as they are.
      add(t.q_proj, b + "attn_q.weight");
      add(t.q_proj_bias, b + "attn_q.bias");
      add(t.k_proj, b + "attn_k.weight");
      add(t.k_proj_bias, b + "attn_k.bias");
      add(t.v_proj, b + "attn_v.weight");
      add(t.v_proj_bias, b + "attn_v.bias");
      add(t.o_proj, b + "attn_output.weight");
      add(t.ffn_norm, b + "ffn_norm.weight");
      add(t.ffn_gate, b + "ffn_gate.weight");
      add(t.ffn_up, b + "ffn_up.weight");
      add(t.ffn_down, b + "ffn_down.weight");
    } else {
      add(t.q_proj, b + "attn_q.weight", Transform::kPermuteQ);
      add(t.k_proj, b + "attn_k.weight", Transform::kPermuteK);
      add(t.v_proj, b + "attn_v.weight");
      add(t.o_proj, b + "attn_output.weight");
      add(t.ffn_norm, b + "ffn_norm.weight");
      add(t.ffn_gate, b + "ffn_gate.weight");
      add(t.ffn_up, b + "ffn_up.weight");
      add(t.ffn_down, b + "ffn_down.weight");
    }
  }
  add(names.final_norm, "output_norm.weight");
  add(names.lm_head, "output.weight");
  return out;
}

// llama.cpp's `llama` graph rotates interleaved pairs (x[2i], x[2i+1]); the
// engine rotates halves (x[i], x[i + D/2]), as HF does. convert_hf_to_gguf.py
// permutes the Q/K rows so both compute the same: row h*D + 2i + t of the file
// is row h*D + t*D/2 + i of the engine.
// Rows of row_bytes bytes (floats or a row's quantized blocks).
void permute_row_bytes(const uint8_t* in, uint8_t* out, int64_t rows, int64_t row_bytes, int64_t head_dim,
                       bool to_file) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t file_row = h * head_dim + 2 * i + t, engine_row = h * head_dim + t * half + i;
        const int64_t src = to_file ? engine_row : file_row, dst = to_file ? file_row : engine_row;
        std::memcpy(out + dst * row_bytes, in + src * row_bytes, static_cast<size_t>(row_bytes));
      }
}

void permute_rows(const float* in, float* out, int64_t rows, int64_t cols, int64_t head_dim, bool to_file) {
  permute_row_bytes(reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out), rows,
                    cols * static_cast<int64_t>(sizeof(float)), head_dim, to_file);
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The file's float values of a mapping, from the engine's.
std::vector<float> to_file_values(const Mapping& m, const ParamTable& table, const ModelConfig& cfg) {
  const int64_t n = numel_of(m.dims);
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  if (m.transform == Transform::kZeros) return v;
  const float* src = table.value(m.engine).data;
  const int64_t cols = m.dims[0], rows = n / cols;
  switch (m.transform) {
    case Transform::kPermuteQ: case Transform::kPermuteK:
      permute_rows(src, v.data(), rows, cols, cfg.qk_head_dim, true);
      break;
    case Transform::kNegExp:
      // In double: log(-A) then gives the same float A_log back (docs/gguf.md).
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(-std::exp(double{src[i]}));
      break;
    default: std::memcpy(v.data(), src, sizeof(float) * static_cast<size_t>(n));
  }
  return v;
}

void encode(const std::vector<float>& v, const std::vector<int64_t>& dims, TensorType type, const std::string& name,
            std::vector<uint8_t>& out) {
  const int64_t cols = dims[0], rows = static_cast<int64_t>(v.size()) / cols;
  switch (type) {
    case TensorType::kF32:
      out.resize(v.size() * 4);
      std::memcpy(out.data(), v.data(), out.size());
      break;
    case TensorType::kF16: case TensorType::kBF16: {
      out.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = type == TensorType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
        HYMBA_CHECK(!std::isinf(type == TensorType::kF16 ? f16_to_f32(h) : bf16_to_f32(h)) || std::isinf(v[i]),
                    "export --format gguf: tensor '", name, "' has value ", v[i], " that F16 cannot hold (|x| >= ",
                    overflow_threshold(FloatFormat::kF16), "); export with --dtype f32");
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    }
    case TensorType::kQ8_0: {
      std::vector<cpu::BlockQ8> blocks(static_cast<size_t>(rows * cpu::q8_blocks_per_row(cols)));
      cpu::quantize_q8(blocks.data(), v.data(), rows, cols);
      out.resize(blocks.size() * sizeof(cpu::BlockQ8));
      std::memcpy(out.data(), blocks.data(), out.size());  // GGUF's block_q8_0, byte for byte
      break;
    }
    case TensorType::kQ4_0: {
      std::vector<cpu::BlockQ4> blocks(static_cast<size_t>(rows * cpu::q4_blocks_per_row(cols)));
      cpu::quantize_q4(blocks.data(), v.data(), rows, cols);
      out.resize(blocks.size() * sizeof(cpu::BlockQ4));
      std::memcpy(out.data(), blocks.data(), out.size());  // GGUF's block_q4_0, byte for byte
      break;
    }
  }
}

// A file tensor's values as float32 (blocks copied out first: the buffer
// need not be aligned for them).
void decode(const uint8_t* bytes, const TensorInfo& t, float* out) {
  const int64_t n = t.numel();
  switch (t.type) {
    case TensorType::kF32: std::memcpy(out, bytes, sizeof(float) * static_cast<size_t>(n)); break;
    case TensorType::kF16: case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = t.type == TensorType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    case TensorType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        cpu::BlockQ8 blk;
        std::memcpy(&blk, bytes + b * sizeof(blk), sizeof(blk));
        cpu::dequantize_q8(out + b * 32, &blk, 1, 32);
      }
      break;
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        cpu::BlockQ4 blk;
        std::memcpy(&blk, bytes + b * sizeof(blk), sizeof(blk));
        cpu::dequantize_q4(out + b * 32, &blk, 1, 32);
      }
      break;
  }
}

// A Q8_0 / Q4_0 linear weight as the model holds it: the file's blocks
// (GGUF's block layouts are the kernels'), mapped where they can be used in
// place, else copied (a borrowed buffer, a misaligned tensor, or llama's Q/K
// rows, which are reordered as whole rows of blocks).
HeldMatrix held_from_file(const File& f, const TensorInfo& t, const Mapping& m, const ModelConfig& cfg) {
  HeldMatrix h;
  h.format = t.type == TensorType::kQ4_0 ? BlockFormat::kQ4 : BlockFormat::kQ8;
  h.cols = t.dims[0];
  h.rows = t.numel() / h.cols;
  const int64_t row_bytes = block_row_bytes(h.format, h.cols), bytes = h.rows * row_bytes;
  const uint8_t* data = f.tensor_data(t);
  const bool permute = m.transform == Transform::kPermuteQ || m.transform == Transform::kPermuteK;
  if (!permute && f.mapping() && reinterpret_cast<uintptr_t>(data) % alignof(uint16_t) == 0) {
    h.blocks = data;
    h.owner = f.mapping();
    h.mapped = true;
    return h;
  }
  auto copy = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>((bytes + 1) / 2));
  auto* out = reinterpret_cast<uint8_t*>(copy->data());
  if (permute)
    permute_row_bytes(data, out, h.rows, row_bytes, cfg.qk_head_dim, false);
  else
    std::memcpy(out, data, static_cast<size_t>(bytes));
  // The copy is what the model holds: the file's pages it was read from
  // (TinyLlama's Q and K: 110 MB in Q8_0) need not stay resident.
  if (f.mapping()) release_mapped_pages(data, bytes);
  h.blocks = copy->data();
  h.owner = copy;
  return h;
}

// A tensor's values as float32 in buf. The file's pages they were read
// from then leave the resident set: the values live on in the model, and
// a float32 file's pages would otherwise double its weights in memory.
void decode_tensor(const File& f, const TensorInfo& t, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(t.numel()));
  decode(f.tensor_data(t), t, buf.data());
  if (f.mapping()) release_mapped_pages(f.tensor_data(t), t.bytes());
}

// A float tensor of a linear matrix in `format`'s blocks: its values decoded
// into buf (and permuted for llama's Q/K), checked finite and quantized as
// the decoder would quantize them.
HeldMatrix quantized_at_load(const File& f, const TensorInfo& t, const Mapping& m, const ModelConfig& cfg,
                             BlockFormat format, std::vector<float>& buf) {
  const int64_t n = t.numel(), cols = t.dims[0];
  decode_tensor(f, t, buf);
  check_finite(f.source(), m.file, buf.data(), n);
  if (m.transform == Transform::kPermuteQ || m.transform == Transform::kPermuteK) {
    std::vector<float> rows(static_cast<size_t>(n));
    permute_rows(buf.data(), rows.data(), n / cols, cols, cfg.qk_head_dim, false);
    buf.swap(rows);
  }
  return quantize_matrix(format, buf.data(), n / cols, cols);
}

// The block format a file's quantized tensors are held in (Model::held_format:
// q4 when any is Q4_0, a Q4_0 file keeping its head in Q8_0); none for a float file.
std::optional<BlockFormat> file_block_format(const File& f) {
  std::optional<BlockFormat> own;
  for (const TensorInfo& t : f.tensors()) {
    if (t.type == TensorType::kQ4_0) return BlockFormat::kQ4;
    if (t.type == TensorType::kQ8_0) own = BlockFormat::kQ8;
  }
  return own;
}

// Holds tensor t in blocks where the load keeps them: a Q8_0 / Q4_0 matrix
// as the file's blocks (keep_file_blocks), a float one quantized into
// float_target. False when it is to be widened into the float32 rows.
bool hold_tensor(const File& f, const TensorInfo& t, const Mapping& m, Model& model, bool keep_file_blocks,
                 std::optional<BlockFormat> float_target, std::vector<float>& buf) {
  const bool rows_as_stored = m.transform == Transform::kNone || m.transform == Transform::kPermuteQ ||
                              m.transform == Transform::kPermuteK;
  if (!rows_as_stored) return false;
  const bool quantized = t.type == TensorType::kQ8_0 || t.type == TensorType::kQ4_0;
  if (quantized && keep_file_blocks) {
    HeldMatrix h = held_from_file(f, t, m, model.config());
    const int64_t bad = first_nonfinite_scale(h);
    HYMBA_CHECK(bad < 0, f.source(), ": tensor '", m.file, "' block ", bad, " has a NaN or infinite scale");
    model.hold(m.engine, std::move(h));
    return true;
  }
  if (quantized || !float_target) return false;
  model.hold(m.engine, quantized_at_load(f, t, m, model.config(), *float_target, buf));
  return true;
}

}  // namespace

std::optional<ExportDtype> parse_export_dtype(std::string_view name) {
  if (name == "f32") return ExportDtype::kF32;
  if (name == "f16") return ExportDtype::kF16;
  if (name == "q8_0") return ExportDtype::kQ8_0;
  if (name == "q4_0") return ExportDtype::kQ4_0;
  return std::nullopt;
}

const char* to_string(ExportDtype d) {
  switch (d) {
    case ExportDtype::kF32: return "f32";
    case ExportDtype::kF16: return "f16";
    case ExportDtype::kQ8_0: return "q8_0";
    case ExportDtype::kQ4_0: return "q4_0";
  }
  return "?";
}

std::string architecture_for(const ModelConfig& c, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return std::string("hymba");
  };
  bool all_mamba = true, all_attention = true;
  for (MixerKind k : c.layer_types) {
    all_mamba = all_mamba && k == MixerKind::kMamba;
    all_attention = all_attention && k == MixerKind::kAttention;
  }
  if (c.num_memory_tokens > 0) return no("it has meta tokens (num_memory_tokens)");
  if (c.block_layers > 0 && c.block_link != BlockLink::kNull) return no("its sequential blocks are linked (block_link)");
  if (c.norm != NormKind::kRmsNorm) return no("its norms are LayerNorms");
  if (c.position_embedding == PositionEmbedding::kLearned) return no("it has learned positions");
  if (all_mamba) {
    if (c.intermediate_size > 0) return no("its Mamba layers have an FFN (intermediate_size)");
    if (c.mamba_inner_layernorms) return no("its Mamba layers have learned dt/B/C norms (mamba_inner_layernorms)");
    return "mamba";
  }
  if (!all_attention) return no("it mixes attention and Mamba (hybrid layers or a mixed stack)");
  if (c.intermediate_size <= 0 || c.mlp_activation != MlpActivation::kSwiGlu || c.mlp_bias)
    return no("its FFN is not a bias-free SwiGLU");
  if (!c.rope) return no("it has no rotary embedding");
  if (c.attention_scale != AttentionScale::kInvSqrtD) return no("its attention is unscaled");
  if (c.attention_out_bias) return no("its attention output projection has a bias");
  if (c.qk_head_dim != c.v_head_dim || c.qk_head_dim % 2 != 0) return no("its Q/K and V head sizes differ");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.window_of(l) != 0) return no("it has sliding-window layers");
    if (!c.is_kv_producer(l)) return no("its layers share K/V (kv_reuse_group)");
  }
  // Q/K/V biases and no other: llama.cpp's qwen2.
  return c.attention_qkv_bias ? "qwen2" : "llama";
}

TensorType storage_type(const std::string& name, int64_t rank, int64_t row_length, ExportDtype dtype,
                        bool is_output_head) {
  const bool keep_f32 = rank <= 1 || ends_with(name, "norm.weight") || name.find("conv1d") != std::string::npos ||
                        name.find("embed_positions") != std::string::npos || !ends_with(name, ".weight");
  if (keep_f32 || dtype == ExportDtype::kF32) return TensorType::kF32;
  if (dtype == ExportDtype::kF16 || row_length % 32 != 0) return TensorType::kF16;
  if (dtype == ExportDtype::kQ4_0 && !is_output_head) return TensorType::kQ4_0;
  return TensorType::kQ8_0;
}

ExportSummary export_gguf(const Model& model, const std::string& tokenizer_source, const std::string& path,
                          ExportDtype dtype) {
  const ModelConfig& cfg = model.config();
  const ParamTable& table = model.params();
  ExportSummary s;
  std::string why;
  s.architecture = architecture_for(cfg, &why);
  const std::string& arch = s.architecture;
  Writer w;
  w.set("general.architecture", Value::str(arch));
  w.set("general.name", Value::str("hymba.cpp export"));
  const uint32_t file_type = dtype == ExportDtype::kF32 ? 0 : dtype == ExportDtype::kF16 ? 1
                             : dtype == ExportDtype::kQ4_0 ? 2 : 7;
  w.set("general.file_type", Value::u32(file_type));
  if (dtype == ExportDtype::kQ8_0 || dtype == ExportDtype::kQ4_0) w.set("general.quantization_version", Value::u32(2));
  const auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  const int64_t context = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 4096;
  w.set(arch + ".block_count", u32(cfg.num_hidden_layers));
  w.set(arch + ".embedding_length", u32(cfg.hidden_size));
  w.set(arch + ".vocab_size", u32(cfg.vocab_size));
  if (arch == "mamba") {
    w.set("mamba.context_length", u32(context));
    w.set("mamba.feed_forward_length", u32(0));
    w.set("mamba.attention.head_count", u32(0));
    w.set("mamba.ssm.conv_kernel", u32(cfg.mamba_d_conv));
    w.set("mamba.ssm.inner_size", u32(cfg.d_inner()));
    w.set("mamba.ssm.state_size", u32(cfg.mamba_d_state));
    w.set("mamba.ssm.time_step_rank", u32(cfg.dt_rank()));
    w.set("mamba.attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(cfg.rms_norm_eps)));
    w.set("mamba.ssm.dt_b_c_rms", Value::boolean(false));
  } else if (arch == "llama" || arch == "qwen2") {
    w.set(arch + ".context_length", u32(context));
    w.set(arch + ".feed_forward_length", u32(cfg.intermediate_size));
    w.set(arch + ".attention.head_count", u32(cfg.num_attention_heads));
    w.set(arch + ".attention.head_count_kv", u32(cfg.num_key_value_heads));
    w.set(arch + ".attention.key_length", u32(cfg.qk_head_dim));
    w.set(arch + ".attention.value_length", u32(cfg.v_head_dim));
    w.set(arch + ".rope.dimension_count", u32(cfg.qk_head_dim));
    // The engine rotates with this base as a float; NTK scaling is folded into it.
    w.set(arch + ".rope.freq_base", Value::f32(static_cast<float>(cfg.rope_base())));
    w.set(arch + ".attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(cfg.rms_norm_eps)));
  } else {
    w.set("hymba.context_length", u32(context));
    w.set("hymba.config_json", Value::str(cfg.to_json().dump()));
  }
  const std::string tokenizer_note = add_tokenizer_metadata(tokenizer_source, w);
  // llama.cpp needs the key: without a vocabulary it makes vocab_size dummy tokens.
  if (!w.has("tokenizer.ggml.model")) w.set("tokenizer.ggml.model", Value::str("no_vocab"));

  int64_t widened = 0;
  for (Mapping& m : mappings(cfg, table, arch)) {
    const TensorType type = storage_type(m.file, static_cast<int64_t>(m.dims.size()), m.dims[0], dtype, m.output_head);
    s.quantized += type == TensorType::kQ8_0 || type == TensorType::kQ4_0;
    widened += (dtype == ExportDtype::kQ8_0 || dtype == ExportDtype::kQ4_0) && type == TensorType::kF16;
    const std::vector<int64_t> dims = m.dims;
    const std::string name = m.file;  // m moves into the producer below
    w.add_tensor(name, dims, type, [m = std::move(m), &table, &cfg, type](std::vector<uint8_t>& out) {
      encode(to_file_values(m, table, cfg), m.dims, type, m.file, out);
    });
    ++s.tensors;
  }
  w.write(path);
  if (arch == "hymba")
    s.note = "llama.cpp cannot run this file (arch hymba): " + why + "; the engine reads it back exactly";
  if (!tokenizer_note.empty()) s.note += std::string(s.note.empty() ? "" : "; ") + tokenizer_note;
  if (widened > 0)
    s.note += std::string(s.note.empty() ? "" : "; ") + std::to_string(widened) +
              " matrices with rows not a multiple of 32 are stored as F16, as llama.cpp's converter does";
  return s;
}

// ---- import

namespace {

// llama and qwen2 (the same keys under the arch's name; qwen2 adds Q/K/V biases).
json llama_config(const File& f, int64_t vocab, const std::string& arch) {
  const std::string& src = f.source();
  const auto key = [&arch](const char* k) { return arch + "." + k; };
  json j;
  j["vocab_size"] = vocab;
  j["hidden_size"] = f.get_uint(key("embedding_length"));
  const uint64_t layers = f.get_uint(key("block_count"));
  j["num_hidden_layers"] = layers;
  j["layer_types"] = "attention";
  const uint64_t heads = f.get_uint(key("attention.head_count"));
  HYMBA_CHECK(heads > 0, src, ": key '", key("attention.head_count"), "' must be > 0");
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = f.get_uint_or(key("attention.head_count_kv"), heads);
  const uint64_t head_dim = f.get_uint_or(key("attention.key_length"), j["hidden_size"].get<uint64_t>() / heads);
  j["qk_head_dim"] = head_dim;
  j["v_head_dim"] = f.get_uint_or(key("attention.value_length"), head_dim);
  HYMBA_CHECK(f.get_uint_or(key("rope.dimension_count"), head_dim) == head_dim, src,
              ": key '", key("rope.dimension_count"), "' rotates part of each head, which the engine does not support");
  if (f.has(key("rope.scaling.type")))
    HYMBA_CHECK(f.get_string(key("rope.scaling.type")) == "none", src, ": key '", key("rope.scaling.type"), "' is \"",
                excerpt(f.get_string(key("rope.scaling.type")), 40), "\"; the engine supports unscaled RoPE only");
  j["rope_theta"] = f.get_float_or(key("rope.freq_base"), 10000.0);
  j["rms_norm_eps"] = f.get_float(key("attention.layer_norm_rms_epsilon"));
  j["intermediate_size"] = f.get_uint(key("feed_forward_length"));
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  if (arch == "qwen2") j["attention_qkv_bias"] = true;
  return j;
}

json mamba_config(const File& f, int64_t vocab) {
  const std::string& src = f.source();
  json j;
  j["vocab_size"] = vocab;
  const uint64_t d = f.get_uint("mamba.embedding_length");
  j["hidden_size"] = d;
  j["num_hidden_layers"] = f.get_uint("mamba.block_count");
  j["layer_types"] = "mamba";
  j["intermediate_size"] = 0;
  const uint64_t inner = f.get_uint("mamba.ssm.inner_size");
  HYMBA_CHECK(d > 0 && inner % d == 0, src, ": key 'mamba.ssm.inner_size' (", inner,
              ") must be a multiple of mamba.embedding_length (", d, ")");
  j["mamba_expand"] = inner / d;
  j["mamba_d_state"] = f.get_uint("mamba.ssm.state_size");
  j["mamba_d_conv"] = f.get_uint("mamba.ssm.conv_kernel");
  j["mamba_dt_rank"] = f.get_uint("mamba.ssm.time_step_rank");
  HYMBA_CHECK(!f.get_bool_or("mamba.ssm.dt_b_c_rms", false), src,
              ": key 'mamba.ssm.dt_b_c_rms' is true (Falcon-Mamba's unweighted dt/B/C norms), which the engine does "
              "not support");
  j["rms_norm_eps"] = f.get_float("mamba.attention.layer_norm_rms_epsilon");
  j["mamba_conv_bias"] = true;
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  return j;
}

}  // namespace

std::vector<float> read_tensor_f32(const File& file, const TensorInfo& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.numel()));
  decode(file.tensor_data(tensor), tensor, out.data());
  return out;
}

ModelConfig config_from_gguf(const File& f) {
  const std::string& src = f.source();
  const std::string& arch = f.get_string("general.architecture");
  if (arch == "hymba") {
    const ModelConfig c =
        ModelConfig::from_json(parse_json(f.get_string("hymba.config_json"), src + ": key 'hymba.config_json'"),
                               src + ": key 'hymba.config_json'");
    HYMBA_CHECK(f.get_uint("hymba.block_count") == static_cast<uint64_t>(c.num_hidden_layers) &&
                    f.get_uint("hymba.embedding_length") == static_cast<uint64_t>(c.hidden_size),
                src, ": keys 'hymba.block_count' / 'hymba.embedding_length' disagree with 'hymba.config_json'");
    return c;
  }
  HYMBA_CHECK(arch == "llama" || arch == "qwen2" || arch == "mamba", src, ": key 'general.architecture' is \"",
              excerpt(arch, 40), "\"; the engine reads llama, qwen2, mamba and hymba");
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  HYMBA_CHECK(embd != nullptr && embd->dims.size() == 2, src, ": missing 2-D tensor 'token_embd.weight'");
  const int64_t vocab = embd->dims[1];
  if (f.has(arch + ".vocab_size"))
    HYMBA_CHECK(f.get_uint(arch + ".vocab_size") == static_cast<uint64_t>(vocab), src, ": key '", arch,
                ".vocab_size' disagrees with tensor 'token_embd.weight' (", vocab, " rows)");
  const json j = arch == "mamba" ? mamba_config(f, vocab) : llama_config(f, vocab, arch);
  return ModelConfig::from_json(j, src + " (" + arch + " metadata)");
}

std::string load_gguf_weights(const File& f, Model& model, bool keep_blocks,
                              std::optional<BlockFormat> hold_floats_as) {
  const ModelConfig& cfg = model.config();
  ParamTable& table = model.params();
  std::set<int64_t> held_offsets, linear_offsets;
  for (int64_t off : held_weight_offsets(model.plan())) held_offsets.insert(off);
  for (int64_t off : linear_weight_offsets(model.plan())) linear_offsets.insert(off);
  const ModelPlan& plan = model.plan();
  // A file holding blocks of another format than asked keeps its float
  // matrices float32: the decoder then refuses the mismatch by name
  // instead of running two formats.
  if (const std::optional<BlockFormat> own = file_block_format(f); own && own != hold_floats_as)
    hold_floats_as.reset();
  // The format a float matrix is held in at load: the linears' or the
  // head's (q8 under q4); none for the embedding, which stays float32 for
  // lookups (a tied head's copy is the decoder's).
  const auto float_target = [&](int64_t offset) -> std::optional<BlockFormat> {
    if (!keep_blocks || !hold_floats_as) return std::nullopt;
    if (linear_offsets.count(offset) != 0) return hold_floats_as;
    if (offset == plan.lm_head && plan.lm_head != plan.embed) return BlockFormat::kQ8;
    return std::nullopt;
  };
  const std::string& src = f.source();
  const std::string arch = architecture_for(cfg);
  const std::string file_arch = f.get_string("general.architecture");
  // A llama/qwen2/mamba file always maps; a hymba file may hold any config.
  const std::string used = file_arch == "hymba" ? "hymba" : arch;
  HYMBA_CHECK(used == file_arch, src, ": the ", file_arch, " metadata describes a model the engine maps to ", arch);
  std::vector<Mapping> maps = mappings(cfg, table, used);
  // Every tensor of the file is expected, with its shape; then values.
  std::map<std::string, const Mapping*> by_file;
  for (const Mapping& m : maps) by_file[m.file] = &m;
  for (const TensorInfo& t : f.tensors())
    HYMBA_CHECK(by_file.count(t.name) != 0, src, ": unexpected tensor '", excerpt(t.name, 80), "' for this ",
                file_arch, " model");
  for (const Mapping& m : maps) {
    const TensorInfo* t = f.find_tensor(m.file);
    HYMBA_CHECK(t != nullptr, src, ": missing tensor '", m.file, "'");
    HYMBA_CHECK(t->dims == m.dims, src, ": tensor '", m.file, "' has the wrong shape for the metadata's model");
  }
  int64_t widened = 0;
  std::vector<float> buf;
  for (const Mapping& m : maps) {
    if (m.transform == Transform::kZeros) continue;
    const TensorInfo& t = *f.find_tensor(m.file);
    const int64_t offset = table.info(m.engine).offset;
    if (hold_tensor(f, t, m, model, keep_blocks && held_offsets.count(offset) != 0, float_target(offset), buf))
      continue;
    widened += t.type == TensorType::kQ8_0 || t.type == TensorType::kQ4_0;
    Tensor dst = table.value(m.engine);
    const int64_t n = t.numel(), cols = t.dims[0];
    decode_tensor(f, t, buf);
    check_finite(src, m.file, buf.data(), n);
    switch (m.transform) {
      case Transform::kPermuteQ: case Transform::kPermuteK:
        permute_rows(buf.data(), dst.data, n / cols, cols, cfg.qk_head_dim, false);
        break;
      case Transform::kNegExp:
        for (int64_t i = 0; i < n; ++i) {
          HYMBA_CHECK(buf[static_cast<size_t>(i)] < 0, src, ": tensor '", m.file, "' must be negative (A = -exp(A_log))");
          dst.data[i] = static_cast<float>(std::log(-double{buf[static_cast<size_t>(i)]}));
        }
        break;
      default: std::memcpy(dst.data, buf.data(), sizeof(float) * static_cast<size_t>(n));
    }
  }
  if (widened == 0) return "";
  return std::to_string(widened) + " Q8_0/Q4_0 tensors of " + src +
         " were widened to float32 (" + (keep_blocks ? "tensors other than linear weight matrices"
                                                     : "this command needs float32 weights") + ")";
}

}  // namespace hymba::gguf
