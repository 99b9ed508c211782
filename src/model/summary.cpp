#include "model/summary.h"

#include <algorithm>

#include "core/checked.h"
#include "core/params.h"
#include "model/layout.h"

namespace hymba {

int64_t kv_positions(const ModelConfig& cfg, int64_t layer, int64_t context) {
  if (!cfg.has_attention(layer) || !cfg.is_kv_producer(layer)) return 0;
  const int64_t w = cfg.window_of(layer);
  const int64_t tokens = w > 0 ? std::min(context, w - 1) : context;
  return cfg.num_memory_tokens + tokens;
}

int64_t mamba_state_elements(const ModelConfig& cfg, int64_t layer) {
  if (!cfg.has_mamba(layer)) return 0;
  return cfg.d_inner() * (cfg.mamba_d_state + cfg.mamba_d_conv - 1);
}

ModelSummary summarize(const ModelConfig& cfg, int64_t context) {
  ModelSummary s;
  s.context = context;
  // Declaring without allocating gives every tensor's shape, even for 1.5B.
  ParamTable table;
  declare_parameters(cfg, table);
  for (const char* part : {"embedding", "attention", "mamba", "ffn", "norms", "meta", "fusion"})
    s.params_by_part[part] = 0;
  const ModelTensorNames names = tensor_names(cfg);
  for (const ParamInfo& p : table.rows()) {
    const int64_t n = p.shape.numel();
    s.total_params += n;
    if (p.group != "mixed_in_proj") {
      s.params_by_part[p.group] += n;
      continue;
    }
    // The fused in_proj's Q/K/V rows belong to attention, its x/z rows to Mamba.
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      if (names.layers[static_cast<size_t>(l)].in_proj != p.name) continue;
      const LayerDims d = layer_dims(cfg, l);
      const int64_t attn_rows = d.q_width + d.k_width + d.v_width;
      s.params_by_part["attention"] += attn_rows * cfg.hidden_size;
      s.params_by_part["mamba"] += (d.in_proj_rows - attn_rows) * cfg.hidden_size;
    }
  }
  const int64_t mamba_params = s.params_by_part["mamba"];
  s.attn_to_mamba = mamba_params > 0 ? static_cast<double>(s.params_by_part["attention"]) / mamba_params : 0.0;

  s.kv_bytes_per_position = cfg.num_key_value_heads * (cfg.qk_head_dim + cfg.v_head_dim);
  // Checked: a long --seq-len times wide K/V rows can pass 64 bits.
  const std::string what = "the cache at " + std::to_string(context) + " tokens (--seq-len)";
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    LayerSummary ls;
    ls.index = l;
    ls.kind = to_string(cfg.layer_types[static_cast<size_t>(l)]);
    if (cfg.has_attention(l)) {
      const int64_t w = cfg.window_of(l);
      ls.attention = w > 0 ? "local(" + std::to_string(w) + ")" : "global";
      const int64_t producer = cfg.kv_producer(l);
      if (producer == l) {
        bool shares = false;
        for (int64_t o = 0; o < cfg.num_hidden_layers; ++o) shares |= o != l && cfg.kv_producer(o) == l;
        ls.kv_role = shares ? "producer" : "own";
      } else {
        ls.kv_role = "consumer of " + std::to_string(producer);
      }
    }
    s.layers.push_back(ls);
    const int64_t pos = kv_positions(cfg, l, context);
    s.kv_cache_positions = checked_add(s.kv_cache_positions, pos, what);
    s.kv_cache_elements = checked_add(s.kv_cache_elements, checked_mul(pos, s.kv_bytes_per_position, what), what);
    s.mamba_state_elements = checked_add(s.mamba_state_elements, mamba_state_elements(cfg, l), what);
  }
  checked_mul(checked_add(s.kv_cache_elements, s.mamba_state_elements, what), 4, what);
  return s;
}

nlohmann::json to_json(const ModelSummary& s) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerSummary& l : s.layers)
    layers.push_back({{"index", l.index}, {"kind", l.kind}, {"attention", l.attention}, {"kv", l.kv_role}});
  return {{"total_params", s.total_params},
          {"params_by_part", s.params_by_part},
          {"attn_to_mamba_param_ratio", s.attn_to_mamba},
          {"layers", layers},
          {"context", s.context},
          {"kv_cache_positions", s.kv_cache_positions},
          {"kv_cache_bytes", {{"fp16", s.kv_cache_bytes(2)}, {"fp32", s.kv_cache_bytes(4)}}},
          {"mamba_state_bytes", {{"fp16", s.mamba_state_bytes(2)}, {"fp32", s.mamba_state_bytes(4)}}}};
}

}  // namespace hymba
