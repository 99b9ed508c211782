#include "model/plan.h"

namespace hymba {

ModelPlan make_plan(const ModelConfig& cfg, const ParamTable& table) {
  ModelPlan plan;
  plan.cfg = cfg;
  const ModelTensorNames names = tensor_names(cfg);
  auto off = [&](const std::string& name) -> int64_t { return name.empty() ? -1 : table.info(name).offset; };
  plan.embed = off(names.embed);
  plan.memory = off(names.memory_tokens);
  plan.final_norm = off(names.final_norm);
  plan.final_norm_b = off(names.final_norm_bias);
  plan.positions = off(names.position_embed);
  plan.lm_head = names.lm_head.empty() ? plan.embed : off(names.lm_head);

  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerTensorNames& t = names.layers[static_cast<size_t>(l)];
    LayerPlan p;
    p.index = l;
    p.attn = cfg.has_attention(l);
    p.mamba = cfg.has_mamba(l);
    p.hybrid = p.attn && p.mamba;
    p.fused = p.hybrid && cfg.proj_style == ProjStyle::kFused;
    p.producer = p.attn && cfg.is_kv_producer(l);
    p.producer_layer = cfg.kv_producer(l);
    p.window = p.attn ? cfg.window_of(l) : 0;
    p.dims = layer_dims(cfg, l);

    int64_t col = 0;
    if (p.attn) {
      p.q_col = col;
      col += p.dims.q_width;
      if (p.producer) {
        p.k_col = col;
        col += p.dims.k_width;
        p.v_col = col;
        col += p.dims.v_width;
      }
    }
    if (p.mamba) {
      p.x_col = col;
      col += p.dims.d_inner;
      p.z_col = col;
      col += p.dims.d_inner;
    }
    p.proj_width = col;

    p.input_norm = off(t.input_norm);
    p.in_proj = off(t.in_proj);
    p.q_proj = off(t.q_proj);
    p.k_proj = off(t.k_proj);
    p.v_proj = off(t.v_proj);
    p.o_proj = off(t.o_proj);
    p.o_proj_b = off(t.o_proj_bias);
    p.q_proj_b = off(t.q_proj_bias);
    p.k_proj_b = off(t.k_proj_bias);
    p.v_proj_b = off(t.v_proj_bias);
    p.mamba_in_proj = off(t.mamba_in_proj);
    p.conv_w = off(t.conv_weight);
    p.conv_b = off(t.conv_bias);
    p.x_proj = off(t.x_proj);
    p.dt_w = off(t.dt_proj_weight);
    p.dt_b = off(t.dt_proj_bias);
    p.a_log = off(t.a_log);
    p.d_skip = off(t.d_skip);
    p.dt_norm = off(t.dt_norm);
    p.b_norm = off(t.b_norm);
    p.c_norm = off(t.c_norm);
    p.mamba_out_proj = off(t.mamba_out_proj);
    p.attn_fnorm = off(t.attn_fusion_norm);
    p.mamba_fnorm = off(t.mamba_fusion_norm);
    p.beta_a = off(t.beta_attn);
    p.beta_m = off(t.beta_mamba);
    p.fused_out = off(t.fused_out_proj);
    p.ffn_norm = off(t.ffn_norm);
    p.ffn_gate = off(t.ffn_gate);
    p.ffn_up = off(t.ffn_up);
    p.ffn_down = off(t.ffn_down);
    p.input_norm_b = off(t.input_norm_bias);
    p.ffn_norm_b = off(t.ffn_norm_bias);
    p.ffn_up_b = off(t.ffn_up_bias);
    p.ffn_down_b = off(t.ffn_down_bias);
    if (cfg.closes_linked_block(l)) p.block_first = l + 1 - cfg.block_layers;
    p.link_w = off(t.link_gate_weight);
    p.link_b = off(t.link_gate_bias);
    const int64_t d = cfg.hidden_size;
    p.qkv_stacked = p.attn && !p.fused && p.producer && p.k_col == p.q_col + p.dims.q_width &&
                    p.v_col == p.k_col + p.dims.k_width && p.k_proj == p.q_proj + p.dims.q_width * d &&
                    p.v_proj == p.k_proj + p.dims.k_width * d;
    p.gate_up_stacked = p.ffn_gate >= 0 && p.ffn_up == p.ffn_gate + cfg.intermediate_size * d;
    plan.layers.push_back(p);
  }
  return plan;
}

std::vector<int64_t> linear_weight_offsets(const ModelPlan& plan) {
  std::vector<int64_t> out;
  for (const LayerPlan& lp : plan.layers)
    for (int64_t off : {lp.in_proj, lp.q_proj, lp.k_proj, lp.v_proj, lp.mamba_in_proj, lp.x_proj, lp.dt_w, lp.o_proj,
                        lp.mamba_out_proj, lp.fused_out, lp.ffn_gate, lp.ffn_up, lp.ffn_down, lp.link_w})
      if (off >= 0) out.push_back(off);
  return out;
}

std::vector<int64_t> held_weight_offsets(const ModelPlan& plan) {
  std::vector<int64_t> out = linear_weight_offsets(plan);
  out.push_back(plan.embed);
  if (plan.lm_head != plan.embed) out.push_back(plan.lm_head);
  return out;
}

}  // namespace hymba
