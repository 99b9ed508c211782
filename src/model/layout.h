// The model's tensors: names, shapes, init rules and groups for every layer,
// declared once into the parameter table. Names follow the official Hymba
// checkpoint for hybrid models and the HF Mamba names for pure-Mamba models
// (see docs/checkpoint-format.md).
#pragma once

#include <string>
#include <vector>

#include "core/params.h"
#include "model/config.h"

namespace hymba {

// Names of one layer's tensors; empty when the layer has no such tensor.
struct LayerTensorNames {
  std::string input_norm, input_norm_bias;  // bias: norm "layernorm" only
  // attention branch
  std::string in_proj;  // fused: rows [Q | K | V | x | z] (consumers: [Q | x | z])
  std::string q_proj, k_proj, v_proj, o_proj;
  std::string o_proj_bias;  // attention_out_bias
  std::string q_proj_bias, k_proj_bias, v_proj_bias;  // attention_qkv_bias (k/v: producers only)
  // Mamba branch
  std::string mamba_in_proj;  // separate / mamba layers: rows [x | z]
  std::string conv_weight, conv_bias, x_proj, dt_proj_weight, dt_proj_bias, a_log, d_skip;
  std::string dt_norm, b_norm, c_norm;
  std::string mamba_out_proj;  // Mamba-only layers and separate mean / learned_beta
  // fusion
  std::string attn_fusion_norm, mamba_fusion_norm;  // norm_mean: pre_avg_layernorm1 / 2
  std::string beta_attn, beta_mamba;                // learned_beta
  std::string fused_out_proj;                       // norm_mean / concat: output projection of the mix
  // FFN
  std::string ffn_norm, ffn_gate, ffn_up, ffn_down;  // ffn_gate: SwiGLU only
  std::string ffn_norm_bias, ffn_up_bias, ffn_down_bias;  // layernorm; GELU MLP with mlp_bias
  // gated block link (on the layer that closes a sequential block)
  std::string link_gate_weight, link_gate_bias;
};

struct ModelTensorNames {
  bool hf_mamba = false;  // pure-Mamba model using the HF MambaForCausalLM names
  std::string embed, memory_tokens, final_norm, lm_head;
  std::string final_norm_bias;  // norm "layernorm"
  std::string position_embed;   // position_embedding "learned": [max_position_embeddings, d]
  std::vector<LayerTensorNames> layers;
};

// Whether a config is saved with the HF Mamba names (all layers Mamba, no FFN,
// no meta tokens, no inner norms).
bool uses_hf_mamba_names(const ModelConfig& cfg);

ModelTensorNames tensor_names(const ModelConfig& cfg);

// Declares every tensor of the model into `table` (in checkpoint order), each
// with the init rule of cfg.init_scheme.
void declare_parameters(const ModelConfig& cfg, ParamTable& table);

// One line saying how cfg's parameters are initialised (`hymba info`).
std::string describe_init(const ModelConfig& cfg);

// Per-layer widths used by the graph, derived once from the config.
struct LayerDims {
  int64_t q_width = 0, k_width = 0, v_width = 0;  // attention projections (k/v 0 for consumers)
  int64_t attn_out = 0;                           // Hq * v_head_dim
  int64_t d_inner = 0;                            // Mamba inner width (0: no Mamba)
  int64_t x_proj_out = 0;                         // dt_rank + 2 * d_state
  int64_t in_proj_rows = 0;                       // fused in_proj rows (0: not fused)
};
LayerDims layer_dims(const ModelConfig& cfg, int64_t layer);

}  // namespace hymba
