#include "formats/hf_export.h"

#include <filesystem>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "tokenizer/tokenizer_files.h"
#include "model/layout.h"

namespace hymba {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void cannot(const char* field, const std::string& why) {
  fail("export --format hf: config field '", field, "' ", why);
}

json hymba_json(const ModelConfig& c) {
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_types[static_cast<size_t>(l)] != MixerKind::kHybrid)
      cannot("layer_types", "has a " + std::string(to_string(c.layer_types[static_cast<size_t>(l)])) + " layer " +
                                std::to_string(l) + "; HymbaForCausalLM has only hybrid layers (or export a pure "
                                "Mamba model as MambaForCausalLM)");
  if (const char* leak = c.future_leak())
    cannot(leak, "reads later tokens (a seed's leak), which the released Hymba code has no way to express");
  if (c.proj_style != ProjStyle::kFused) cannot("proj_style", "must be \"fused\" (one in_proj, as released)");
  if (c.fusion != Fusion::kNormMean) cannot("fusion", "must be \"norm_mean\" (the released fusion)");
  if (!c.attn_mamba_ratio.empty()) cannot("attn_mamba_ratio", "must be unset");
  if (c.intermediate_size <= 0) cannot("intermediate_size", "must be > 0 (the released block has an FFN)");
  if (c.norm != NormKind::kRmsNorm) cannot("norm", "must be \"rmsnorm\" (the released block has RMSNorms)");
  if (c.mlp_activation != MlpActivation::kSwiGlu)
    cannot("mlp_activation", "must be \"swiglu\" (the released FFN is SwiGLU)");
  if (c.position_embedding == PositionEmbedding::kLearned)
    cannot("position_embedding", "must be \"rope\" or \"none\" (the released model has no learned positions)");
  if (c.attention_scale != AttentionScale::kInvSqrtD)
    cannot("attention_scale", "must be \"inv_sqrt_d\" (the released attention divides q.k by sqrt(d))");
  if (c.hidden_size % c.num_attention_heads != 0)
    cannot("num_attention_heads", "must divide hidden_size (the released attention requires it)");
  if (c.rope && c.rope_ntk && (c.max_position_embeddings < 1 || c.orig_max_position_embeddings < 1))
    cannot("rope_type", "\"ntk\" needs max_position_embeddings and orig_max_position_embeddings");

  json j;
  j["architectures"] = {"HymbaForCausalLM"};
  j["model_type"] = "hymba";
  // Loading needs the released configuration_hymba.py / modeling_hymba.py beside
  // these files (trust_remote_code); see docs/import.md.
  j["auto_map"] = {{"AutoConfig", "configuration_hymba.HymbaConfig"},
                   {"AutoModelForCausalLM", "modeling_hymba.HymbaForCausalLM"}};
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["attn_hidden_size"] = -1;
  j["kq_head_dim"] = c.qk_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["kq_norm"] = "none";
  j["hidden_act"] = "silu";
  j["mlp_hidden_act"] = "silu";
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["rope"] = c.rope;
  j["rope_theta"] = c.rope_theta;
  j["rope_type"] = c.rope_ntk ? "ntk" : "default";
  j["max_position_embeddings"] = c.max_position_embeddings > 0 ? c.max_position_embeddings : 8192;
  j["orig_max_position_embeddings"] = c.orig_max_position_embeddings > 0 ? c.orig_max_position_embeddings : 2048;
  j["seq_length"] = j["max_position_embeddings"];
  // The released forward shows a local query W + 1 keys: ours with W keys is theirs with W - 1.
  std::vector<int64_t> globals = c.global_attn_idx;
  int64_t window = c.sliding_window;
  if (c.sliding_window <= 0) {
    globals.clear();
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) globals.push_back(l);
    window = 0;
  } else if (!c.sliding_window_inclusive) {
    if (c.sliding_window < 2)
      cannot("sliding_window", "is 1; the released code counts W + 1 keys, so its smallest window is 2 keys");
    window = c.sliding_window - 1;
  }
  j["sliding_window"] = window;
  j["global_attn_idx"] = globals;
  j["num_memory_tokens"] = c.num_memory_tokens;
  j["memory_tokens_interspersed_every"] = 0;
  j["kv_reuse_group"] = c.kv_reuse_group;
  j["kv_reuse_every_i_layer"] = -1;
  j["kv_weight_reuse"] = false;
  j["layer_type"] = std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "h");
  json conv = json::object();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) conv[std::to_string(l)] = c.d_inner();
  j["conv_dim"] = conv;
  j["mamba_d_state"] = c.mamba_d_state;
  j["mamba_d_conv"] = c.mamba_d_conv;
  j["mamba_expand"] = c.mamba_expand;
  j["mamba_dt_rank"] = c.mamba_dt_rank;
  j["mamba_conv_bias"] = c.mamba_conv_bias;
  j["mamba_proj_bias"] = false;
  j["mamba_inner_layernorms"] = c.mamba_inner_layernorms;
  j["num_mamba"] = 1;
  j["num_experts"] = 1;
  j["num_experts_per_tok"] = 1;
  j["attention_dropout"] = 0.0;
  j["use_cache"] = false;
  return j;
}

json mamba_json(const ModelConfig& c) {
  json j;
  j["architectures"] = {"MambaForCausalLM"};
  j["model_type"] = "mamba";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["state_size"] = c.mamba_d_state;
  j["conv_kernel"] = c.mamba_d_conv;
  j["expand"] = c.mamba_expand;
  j["intermediate_size"] = c.d_inner();
  j["time_step_rank"] = c.mamba_dt_rank;
  j["time_step_min"] = c.mamba_dt_min;
  j["time_step_max"] = c.mamba_dt_max;
  j["layer_norm_epsilon"] = c.rms_norm_eps;
  j["use_bias"] = false;
  j["use_conv_bias"] = c.mamba_conv_bias;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["residual_in_fp32"] = true;
  j["initializer_range"] = c.initializer_range;
  j["use_cache"] = true;
  return j;
}

void copy_atomic(const fs::path& from, const fs::path& to) { write_text_atomic(to.string(), read_file(from.string())); }

}  // namespace

json hf_config_json(const ModelConfig& cfg, int bos_id, int eos_id, int pad_id, FloatFormat dtype) {
  bool all_mamba = true;
  for (MixerKind k : cfg.layer_types) all_mamba = all_mamba && k == MixerKind::kMamba;
  json j;
  if (all_mamba) {
    if (cfg.intermediate_size > 0) cannot("intermediate_size", "must be 0 for MambaForCausalLM (no FFN)");
    if (cfg.num_memory_tokens > 0) cannot("num_memory_tokens", "must be 0 for MambaForCausalLM");
    if (cfg.mamba_inner_layernorms) cannot("mamba_inner_layernorms", "must be false for MambaForCausalLM");
    if (cfg.norm != NormKind::kRmsNorm) cannot("norm", "must be \"rmsnorm\" for MambaForCausalLM");
    if (cfg.position_embedding == PositionEmbedding::kLearned)
      cannot("position_embedding", "must not be \"learned\" for MambaForCausalLM");
    j = mamba_json(cfg);
  } else {
    j = hymba_json(cfg);
  }
  j["bos_token_id"] = bos_id;
  j["eos_token_id"] = eos_id;
  j["pad_token_id"] = pad_id;
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j;
}

std::string export_hf(const Model& model, const std::string& tokenizer_dir, const std::string& out_dir,
                      FloatFormat dtype) {
  const ModelConfig& cfg = model.config();
  std::unique_ptr<Tokenizer> tok;
  std::string tok_path;
  if (!tokenizer_dir.empty()) {
    tok_path = checkpoint_tokenizer_path(tokenizer_dir);
    if (!tok_path.empty()) tok = load_tokenizer(tok_path);
  }
  // HF configs name special ids; without a tokenizer, the released Hymba's.
  const json config =
      hf_config_json(cfg, tok ? tok->bos_id() : 1, tok ? tok->eos_id() : 2, tok ? tok->pad_id() : 0, dtype);

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  HYMBA_CHECK(!ec, out_dir, ": cannot create the export directory (", ec.message(), ")");
  const fs::path out(out_dir);
  // Our tensor names are the HF names of both classes (model/layout.cpp).
  // Weights first: a value the dtype cannot hold stops the export before
  // config.json claims that dtype.
  save_params((out / "model.safetensors").string(), model.params(), {{"format", "pt"}}, dtype);
  write_text_atomic((out / "config.json").string(), config.dump(2) + "\n");

  if (!tok) return "no tokenizer exported (none beside the checkpoint)";
  const fs::path src(tokenizer_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    if (fs::exists(src / f)) copy_atomic(src / f, out / f);
  if (fs::path(tok_path).filename() == "tokenizer.json") return "";
  if (tok->kind() == TokenizerKind::kByte)
    return "the hymba byte tokenizer has no HF equivalent; tokenizer files not written";
  copy_atomic(tok_path, out / "tokenizer.model");  // a sentencepiece model, as Llama's
  if (!fs::exists(src / "tokenizer_config.json")) {
    // Our sentencepiece models use the default piece names <unk> <s> </s> <pad>.
    const json tc = {{"tokenizer_class", "LlamaTokenizer"}, {"add_bos_token", false}, {"add_eos_token", false},
                     {"bos_token", "<s>"},  {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"},
                     {"legacy", false},     {"add_prefix_space", false}};
    write_text_atomic((out / "tokenizer_config.json").string(), tc.dump(2) + "\n");
  }
  return "";
}

}  // namespace hymba
