#include "model/layout.h"

#include <cmath>
#include <sstream>

namespace hymba {

bool uses_hf_mamba_names(const ModelConfig& cfg) {
  for (MixerKind k : cfg.layer_types)
    if (k != MixerKind::kMamba) return false;
  return cfg.intermediate_size == 0 && cfg.num_memory_tokens == 0 && !cfg.mamba_inner_layernorms &&
         cfg.block_link == BlockLink::kNull && cfg.norm == NormKind::kRmsNorm &&
         cfg.position_embedding != PositionEmbedding::kLearned;
}

LayerDims layer_dims(const ModelConfig& cfg, int64_t l) {
  LayerDims d;
  const bool attn = cfg.has_attention(l), mamba = cfg.has_mamba(l);
  if (attn) {
    d.q_width = cfg.num_attention_heads * cfg.qk_head_dim;
    if (cfg.is_kv_producer(l)) {
      d.k_width = cfg.num_key_value_heads * cfg.qk_head_dim;
      d.v_width = cfg.num_key_value_heads * cfg.v_head_dim;
    }
    d.attn_out = cfg.attn_out_width();
  }
  if (mamba) {
    d.d_inner = cfg.d_inner();
    d.x_proj_out = cfg.dt_rank() + 2 * cfg.mamba_d_state;
  }
  if (attn && mamba && cfg.proj_style == ProjStyle::kFused)
    d.in_proj_rows = d.q_width + d.k_width + d.v_width + 2 * d.d_inner;
  return d;
}

ModelTensorNames tensor_names(const ModelConfig& cfg) {
  ModelTensorNames n;
  n.hf_mamba = uses_hf_mamba_names(cfg);
  const std::string root = n.hf_mamba ? "backbone." : "model.";
  n.embed = n.hf_mamba ? "backbone.embeddings.weight" : "model.embed_tokens.weight";
  n.final_norm = n.hf_mamba ? "backbone.norm_f.weight" : "model.final_layernorm.weight";
  if (cfg.num_memory_tokens > 0) n.memory_tokens = "model.memory_tokens";
  if (!cfg.tie_word_embeddings) n.lm_head = "lm_head.weight";
  const bool layernorm = cfg.norm == NormKind::kLayerNorm;
  if (layernorm) n.final_norm_bias = "model.final_layernorm.bias";
  if (cfg.position_embedding == PositionEmbedding::kLearned) n.position_embed = "model.embed_positions.weight";

  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    LayerTensorNames t;
    const std::string p = root + "layers." + std::to_string(l) + ".";
    const bool attn = cfg.has_attention(l), mamba = cfg.has_mamba(l);
    const bool hybrid = attn && mamba;
    const bool fused = hybrid && cfg.proj_style == ProjStyle::kFused;
    const bool producer = attn && cfg.is_kv_producer(l);

    if (n.hf_mamba) {
      // HF MambaForCausalLM: one norm and one mixer per layer.
      const std::string m = p + "mixer.";
      t.input_norm = p + "norm.weight";
      t.mamba_in_proj = m + "in_proj.weight";
      t.conv_weight = m + "conv1d.weight";
      if (cfg.mamba_conv_bias) t.conv_bias = m + "conv1d.bias";
      t.x_proj = m + "x_proj.weight";
      t.dt_proj_weight = m + "dt_proj.weight";
      t.dt_proj_bias = m + "dt_proj.bias";
      t.a_log = m + "A_log";
      t.d_skip = m + "D";
      t.mamba_out_proj = m + "out_proj.weight";
      n.layers.push_back(t);
      continue;
    }

    t.input_norm = p + "input_layernorm.weight";
    if (layernorm) t.input_norm_bias = p + "input_layernorm.bias";
    if (attn) {
      if (fused) {
        t.in_proj = p + "mamba.in_proj.weight";
      } else {
        t.q_proj = p + "self_attn.q_proj.weight";
        if (producer) {
          t.k_proj = p + "self_attn.k_proj.weight";
          t.v_proj = p + "self_attn.v_proj.weight";
        }
      }
    }
    if (mamba) {
      const std::string m = p + "mamba.";
      if (!fused) t.mamba_in_proj = m + "in_proj.weight";
      t.conv_weight = m + "conv1d.weight";
      if (cfg.mamba_conv_bias) t.conv_bias = m + "conv1d.bias";
      t.x_proj = m + "x_proj.0.weight";
      t.dt_proj_weight = m + "dt_proj.0.weight";
      t.dt_proj_bias = m + "dt_proj.0.bias";
      t.a_log = m + "A_log.0";
      t.d_skip = m + "D.0";
      if (cfg.mamba_inner_layernorms) {
        t.dt_norm = m + "dt_layernorm.weight";
        t.b_norm = m + "B_layernorm.weight";
        t.c_norm = m + "C_layernorm.weight";
      }
    }
    if (hybrid) {
      switch (cfg.fusion) {
        case Fusion::kNormMean:
          t.attn_fusion_norm = p + "mamba.pre_avg_layernorm1.weight";
          t.mamba_fusion_norm = p + "mamba.pre_avg_layernorm2.weight";
          t.fused_out_proj = p + "mamba.out_proj.weight";
          break;
        case Fusion::kConcat:
          t.fused_out_proj = p + "mamba.out_proj.weight";
          break;
        case Fusion::kLearnedBeta:
          t.beta_attn = p + "fusion.beta_attn";
          t.beta_mamba = p + "fusion.beta_mamba";
          [[fallthrough]];
        case Fusion::kMean:
          t.o_proj = p + "self_attn.o_proj.weight";
          t.mamba_out_proj = p + "mamba.out_proj.weight";
          break;
      }
    } else if (attn) {
      t.o_proj = p + "self_attn.o_proj.weight";
    } else if (mamba) {
      t.mamba_out_proj = p + "mamba.out_proj.weight";
    }
    if (cfg.intermediate_size > 0) {
      const std::string e = p + "moe.experts.0.";
      t.ffn_norm = p + "pre_moe_layernorm.weight";
      if (layernorm) t.ffn_norm_bias = p + "pre_moe_layernorm.bias";
      if (cfg.mlp_activation == MlpActivation::kSwiGlu) t.ffn_gate = e + "gate_proj.weight";
      t.ffn_up = e + "up_proj.weight";
      t.ffn_down = e + "down_proj.weight";
      if (cfg.mlp_bias) {
        t.ffn_up_bias = e + "up_proj.bias";
        t.ffn_down_bias = e + "down_proj.bias";
      }
    }
    if (cfg.block_link == BlockLink::kGated && cfg.closes_linked_block(l)) {
      const std::string g = "model.blocks." + std::to_string(l / cfg.block_layers) + ".link_gate.";
      t.link_gate_weight = g + "weight";
      t.link_gate_bias = g + "bias";
    }
    if (cfg.attention_out_bias && !t.o_proj.empty()) t.o_proj_bias = p + "self_attn.o_proj.bias";
    if (cfg.attention_qkv_bias) {
      if (!t.q_proj.empty()) t.q_proj_bias = p + "self_attn.q_proj.bias";
      if (!t.k_proj.empty()) t.k_proj_bias = p + "self_attn.k_proj.bias";
      if (!t.v_proj.empty()) t.v_proj_bias = p + "self_attn.v_proj.bias";
    }
    n.layers.push_back(t);
  }
  return n;
}

namespace {

// mamba_ssm's n_residuals_per_layer: one residual per mixer and one per MLP.
int mamba_ssm_residuals_per_layer(const ModelConfig& cfg) { return cfg.intermediate_size > 0 ? 2 : 1; }

// One init scheme's rule for each kind of tensor (docs/model-config.md,
// "Initialisation"). Mamba's own tensors (conv, dt_proj, A_log, D) and the
// norms are drawn the same way under every scheme: mamba_ssm's Mamba module
// and PyTorch's Conv1d set them in their constructors.
class SchemeRules {
 public:
  explicit SchemeRules(const ModelConfig& cfg) : cfg_(cfg), scheme_(cfg.init_scheme) {}

  // Token and meta-token embeddings (and so the tied LM head).
  InitRule embedding() const { return scheme_ == InitScheme::kTorch ? InitRule::normal(1.0f) : range(); }

  // Projections read inside a layer (q/k/v, in_proj, x_proj, FFN gate/up,
  // link gate) and the untied LM head: nn.Linear weights kept at their default
  // by torch and mamba_ssm.
  InitRule dense(int64_t fan_in) const {
    return scheme_ == InitScheme::kNormal ? range() : InitRule::kaiming_uniform(fan_in);
  }

  // Output projections adding into the residual stream, scaled down with
  // depth (GPT-2's prenorm rescaling) by normal and mamba_ssm so the stream's
  // variance stays bounded as layers are added.
  InitRule residual_out(int64_t fan_in) const {
    const double layers = static_cast<double>(cfg_.num_hidden_layers);
    switch (scheme_) {
      case InitScheme::kNormal:
        return InitRule::normal(static_cast<float>(cfg_.initializer_range / std::sqrt(2.0 * layers)));
      case InitScheme::kTorch:
        return InitRule::kaiming_uniform(fan_in);
      case InitScheme::kMambaSsm: {
        const double bound =
            1.0 / std::sqrt(static_cast<double>(fan_in) * mamba_ssm_residuals_per_layer(cfg_) * layers);
        return InitRule::uniform(static_cast<float>(bound));
      }
    }
    return range();
  }

  // Biases of plain Linear layers (the block-link gate): PyTorch draws them
  // like the weights; normal and mamba_ssm start them at 0.
  InitRule linear_bias(int64_t fan_in) const {
    return scheme_ == InitScheme::kTorch ? InitRule::kaiming_uniform(fan_in) : InitRule::zeros();
  }

 private:
  InitRule range() const { return InitRule::normal(static_cast<float>(cfg_.initializer_range)); }

  const ModelConfig& cfg_;
  InitScheme scheme_;
};

}  // namespace

std::string describe_init(const ModelConfig& cfg) {
  std::ostringstream s;
  s << to_string(cfg.init_scheme) << ": ";
  const double L = static_cast<double>(cfg.num_hidden_layers);
  switch (cfg.init_scheme) {
    case InitScheme::kNormal:
      s << "embeddings and projections N(0, " << cfg.initializer_range << "), residual output projections N(0, "
        << cfg.initializer_range / std::sqrt(2.0 * L) << ") (/ sqrt(2 x " << cfg.num_hidden_layers << " layers))";
      break;
    case InitScheme::kTorch:
      s << "PyTorch module defaults: embeddings N(0, 1), Linear weights and biases U(+-1/sqrt(fan_in))";
      break;
    case InitScheme::kMambaSsm: {
      s << "MambaLMHeadModel: embeddings N(0, " << cfg.initializer_range
        << "), Linear weights U(+-1/sqrt(fan_in)), residual output projections that / sqrt("
        << mamba_ssm_residuals_per_layer(cfg) << " x "
        << cfg.num_hidden_layers << " layers), Linear biases 0";
      break;
    }
  }
  bool any_mamba = false;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) any_mamba = any_mamba || cfg.has_mamba(l);
  if (any_mamba)
    s << "; Mamba conv U(+-1/sqrt(d_conv)), dt_proj U(+-dt_rank^-0.5), dt bias inverse-softplus of logU(dt_min, "
         "dt_max), A_log log(1..d_state), D 1";
  return s.str();
}

void declare_parameters(const ModelConfig& cfg, ParamTable& table) {
  const ModelTensorNames names = tensor_names(cfg);
  const int64_t d = cfg.hidden_size;
  const SchemeRules rule(cfg);
  auto add = [&](const std::string& name, Shape shape, InitRule init, bool decay, const char* group) {
    if (!name.empty()) table.add(name, shape, init, decay, group);
  };

  add(names.embed, {cfg.vocab_size, d}, rule.embedding(), true, "embedding");
  add(names.memory_tokens, {cfg.num_memory_tokens, d}, rule.embedding(), false, "meta");
  add(names.position_embed, {cfg.max_position_embeddings, d}, rule.embedding(), true, "embedding");

  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerTensorNames& t = names.layers[static_cast<size_t>(l)];
    const LayerDims ld = layer_dims(cfg, l);
    add(t.input_norm, {d}, InitRule::ones(), false, "norms");
    add(t.input_norm_bias, {d}, InitRule::zeros(), false, "norms");
    add(t.in_proj, {ld.in_proj_rows, d}, rule.dense(d), true, "mixed_in_proj");
    add(t.q_proj, {ld.q_width, d}, rule.dense(d), true, "attention");
    add(t.k_proj, {ld.k_width, d}, rule.dense(d), true, "attention");
    add(t.v_proj, {ld.v_width, d}, rule.dense(d), true, "attention");
    // After the weights, which stay back to back for the stacked q/k/v GEMM.
    add(t.q_proj_bias, {ld.q_width}, rule.linear_bias(d), false, "attention");
    add(t.k_proj_bias, {ld.k_width}, rule.linear_bias(d), false, "attention");
    add(t.v_proj_bias, {ld.v_width}, rule.linear_bias(d), false, "attention");
    add(t.mamba_in_proj, {2 * ld.d_inner, d}, rule.dense(d), true, "mamba");
    if (ld.d_inner > 0) {
      const int64_t di = ld.d_inner, K = cfg.mamba_d_conv, N = cfg.mamba_d_state, R = cfg.dt_rank();
      const float conv_bound = 1.0f / std::sqrt(static_cast<float>(K));
      add(t.conv_weight, {di, 1, K}, InitRule::uniform(conv_bound), true, "mamba");
      add(t.conv_bias, {di}, InitRule::uniform(conv_bound), false, "mamba");
      add(t.x_proj, {R + 2 * N, di}, rule.dense(di), true, "mamba");
      // dt_proj as in the Mamba reference: weights U(+-dt_rank^-0.5), bias the
      // inverse softplus of a log-uniform dt.
      add(t.dt_proj_weight, {di, R}, InitRule::uniform(1.0f / std::sqrt(static_cast<float>(R))), true, "mamba");
      add(t.dt_proj_bias, {di},
          InitRule::mamba_dt_bias(static_cast<float>(cfg.mamba_dt_min), static_cast<float>(cfg.mamba_dt_max)), false,
          "mamba");
      add(t.a_log, {di, N}, InitRule::mamba_a_log(), false, "mamba");
      add(t.d_skip, {di}, InitRule::ones(), false, "mamba");
      add(t.dt_norm, {R}, InitRule::ones(), false, "norms");
      add(t.b_norm, {N}, InitRule::ones(), false, "norms");
      add(t.c_norm, {N}, InitRule::ones(), false, "norms");
    }
    add(t.attn_fusion_norm, {ld.attn_out}, InitRule::ones(), false, "norms");
    add(t.mamba_fusion_norm, {ld.d_inner}, InitRule::ones(), false, "norms");
    add(t.beta_attn, {d}, InitRule::constant(0.5f), false, "fusion");
    add(t.beta_mamba, {d}, InitRule::constant(0.5f), false, "fusion");
    add(t.o_proj, {d, ld.attn_out}, rule.residual_out(ld.attn_out), true, "attention");
    add(t.o_proj_bias, {d}, rule.linear_bias(ld.attn_out), false, "attention");
    add(t.mamba_out_proj, {d, ld.d_inner}, rule.residual_out(ld.d_inner), true, "mamba");
    if (!t.fused_out_proj.empty()) {
      const int64_t width = cfg.fusion == Fusion::kConcat ? ld.attn_out + ld.d_inner : ld.d_inner;
      add(t.fused_out_proj, {d, width}, rule.residual_out(width), true, "fusion");
    }
    if (cfg.intermediate_size > 0) {
      const int64_t I = cfg.intermediate_size;
      add(t.ffn_norm, {d}, InitRule::ones(), false, "norms");
      add(t.ffn_norm_bias, {d}, InitRule::zeros(), false, "norms");
      add(t.ffn_gate, {I, d}, rule.dense(d), true, "ffn");
      add(t.ffn_up, {I, d}, rule.dense(d), true, "ffn");
      add(t.ffn_down, {d, I}, rule.residual_out(I), true, "ffn");
      add(t.ffn_up_bias, {I}, rule.linear_bias(d), false, "ffn");
      add(t.ffn_down_bias, {d}, rule.linear_bias(I), false, "ffn");
    }
    // Gate bias 0 (normal, mamba_ssm): g = sigmoid(W x) begins near 1/2, an even mix of the block and its input.
    add(t.link_gate_weight, {d, d}, rule.dense(d), true, "link");
    add(t.link_gate_bias, {d}, rule.linear_bias(d), false, "link");
  }
  add(names.final_norm, {d}, InitRule::ones(), false, "norms");
  add(names.final_norm_bias, {d}, InitRule::zeros(), false, "norms");
  add(names.lm_head, {cfg.vocab_size, d}, rule.dense(d), true, "embedding");
}

}  // namespace hymba
