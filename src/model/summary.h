// What `hymba info` reports about a model: parameters by part, each layer's
// role, and the inference cache sizes at a given context length.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace hymba {

struct LayerSummary {
  int64_t index = 0;
  std::string kind;       // attention / mamba / hybrid
  std::string attention;  // "global", "local(w)" or "" when the layer has none
  std::string kv_role;    // "producer", "consumer of N" or ""
};

struct ModelSummary {
  int64_t total_params = 0;
  // embedding, attention, mamba, ffn, norms, meta, fusion
  std::map<std::string, int64_t> params_by_part;
  double attn_to_mamba = 0.0;  // attention params / Mamba params (0 when no Mamba)
  std::vector<LayerSummary> layers;
  int64_t context = 0;              // tokens the cache figures are for
  int64_t kv_cache_positions = 0;   // summed over producer layers
  int64_t kv_bytes_per_position = 0;  // per layer, at 1 byte per element
  int64_t kv_cache_elements = 0;
  int64_t mamba_state_elements = 0;
  int64_t kv_cache_bytes(int bytes_per_element) const { return kv_cache_elements * bytes_per_element; }
  int64_t mamba_state_bytes(int bytes_per_element) const { return mamba_state_elements * bytes_per_element; }
};

// K/V positions one producer layer holds after `context` tokens: meta tokens
// plus all tokens (global) or the last window - 1 tokens (sliding window).
int64_t kv_positions(const ModelConfig& cfg, int64_t layer, int64_t context);
// Elements of one layer's Mamba state: SSM [d_inner, d_state] + conv [d_inner, d_conv - 1].
int64_t mamba_state_elements(const ModelConfig& cfg, int64_t layer);

ModelSummary summarize(const ModelConfig& cfg, int64_t context);
nlohmann::json to_json(const ModelSummary& s);

}  // namespace hymba
