// The model graph's view of the parameter table: for every layer, where each
// tensor lives in the parameter block (offset, -1 when absent) and how the
// projection buffer's columns are laid out. Built once from the names in
// model/layout.h, so the graph never looks tensors up by string.
#pragma once

#include <cstdint>
#include <vector>

#include "core/params.h"
#include "model/config.h"
#include "model/layout.h"

namespace hymba {

struct LayerPlan {
  int64_t index = 0;
  bool attn = false, mamba = false, hybrid = false, fused = false, producer = false;
  int64_t producer_layer = 0;
  int64_t window = 0;  // 0: global
  LayerDims dims;
  // Projection buffer [rows, proj_width]: columns [Q | K | V | x | z]
  // (K/V only for producers, x/z only with Mamba); -1 when absent.
  int64_t proj_width = 0, q_col = -1, k_col = -1, v_col = -1, x_col = -1, z_col = -1;

  // Parameter offsets in floats (-1: absent).
  int64_t input_norm = -1, in_proj = -1, q_proj = -1, k_proj = -1, v_proj = -1, o_proj = -1;
  int64_t mamba_in_proj = -1, conv_w = -1, conv_b = -1, x_proj = -1, dt_w = -1, dt_b = -1, a_log = -1, d_skip = -1;
  int64_t dt_norm = -1, b_norm = -1, c_norm = -1, mamba_out_proj = -1;
  int64_t attn_fnorm = -1, mamba_fnorm = -1, beta_a = -1, beta_m = -1, fused_out = -1;
  int64_t ffn_norm = -1, ffn_gate = -1, ffn_up = -1, ffn_down = -1;
  // LayerNorm biases (norm "layernorm") and GELU MLP biases (mlp_bias); -1: absent.
  int64_t input_norm_b = -1, ffn_norm_b = -1, ffn_up_b = -1, ffn_down_b = -1;
  int64_t o_proj_b = -1;  // attention_out_bias
  int64_t q_proj_b = -1, k_proj_b = -1, v_proj_b = -1;  // attention_qkv_bias
  // Sequential blocks: on a layer closing a block with a residual or gated
  // link, the block's first layer (whose x_in the link adds back); else -1.
  int64_t block_first = -1;
  int64_t link_w = -1, link_b = -1;  // gated link: gate weight [d, d] and bias [d]

  // Separate q/k/v (producer) or gate/up weights that sit back to back in the
  // parameter block, as their output columns do in proj / gu: one stacked
  // [q; k; v] or [gate; up] matrix, so each is a single GEMM forward and
  // backward (fewer, larger GEMMs: less packing and one pass over dh).
  bool qkv_stacked = false, gate_up_stacked = false;
};

struct ModelPlan {
  ModelConfig cfg;
  std::vector<LayerPlan> layers;
  int64_t embed = -1, memory = -1, final_norm = -1;
  int64_t final_norm_b = -1;  // LayerNorm bias
  int64_t positions = -1;     // learned position table [max_position_embeddings, d]
  int64_t lm_head = -1;  // the embedding's offset when tied
};

ModelPlan make_plan(const ModelConfig& cfg, const ParamTable& table);

// Offsets of the weight matrices the graph's row-wise pieces multiply by
// through their LinearFn (projections, fusion output, FFN, gated links): the
// matrices a decoder may hold in a block format instead of float32. The
// embedding, the LM head, norms, conv and the Mamba A/D/dt bias are not.
std::vector<int64_t> linear_weight_offsets(const ModelPlan& plan);
// The matrices a model may hold in blocks (model/held_weights.h): the linear
// layers' weights, the token embedding (rows widened on lookup) and the
// output head (the embedding's offset when tied).
std::vector<int64_t> held_weight_offsets(const ModelPlan& plan);

}  // namespace hymba
