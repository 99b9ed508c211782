// Tiny model configs of every family the decoder must reproduce (shared by
// the decode tests and the held-weights tests).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"

namespace hymba::test {

using nlohmann::json;

inline json tiny(const json& over) {
  json j = {{"vocab_size", 29},          {"hidden_size", 16},        {"num_hidden_layers", 4},
            {"layer_types", "hybrid"},   {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"mamba_d_state", 4},        {"intermediate_size", 24},  {"initializer_range", 0.2}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

struct Family {
  const char* name;
  json over;
};

// Every family the decoder must reproduce. Windows are short so prompts and
// generation run well past them (the ring buffers wrap several times).
inline std::vector<Family> families() {
  return {
      {"global_attention", {{"layer_types", "attention"}, {"sliding_window", 0}}},
      {"sliding_window", {{"layer_types", "attention"}, {"sliding_window", 3}, {"global_attn_idx", {0}}}},
      {"window_of_one", {{"layer_types", "attention"}, {"sliding_window", 1}, {"global_attn_idx", {2}}}},
      {"meta_tokens",
       {{"num_memory_tokens", 3}, {"sliding_window", 4}, {"global_attn_idx", {0}}, {"mamba_conv_bias", false}}},
      {"kv_sharing",
       {{"num_hidden_layers", 5}, {"sliding_window", 4}, {"global_attn_idx", {0, 4}},
        {"kv_reuse_group", {{1, 2, 3}}}}},
      {"pure_mamba_hf", {{"layer_types", "mamba"}, {"intermediate_size", 0}, {"mamba_d_conv", 3}}},
      {"hybrid_norm_mean_everything",
       {{"proj_style", "fused"}, {"fusion", "norm_mean"}, {"mamba_inner_layernorms", true},
        {"num_memory_tokens", 2}, {"sliding_window", 3}, {"global_attn_idx", {0, 3}}, {"kv_reuse_group", "auto"}}},
      {"hybrid_separate_learned_beta",
       {{"proj_style", "separate"}, {"fusion", "learned_beta"}, {"num_memory_tokens", 2}, {"sliding_window", 3},
        {"global_attn_idx", {0}}, {"kv_reuse_group", "auto"}}},
      {"hybrid_separate_mean_ratio",
       {{"proj_style", "separate"}, {"fusion", "mean"}, {"attn_mamba_ratio", {1, 1}}, {"sliding_window", 5},
        {"global_attn_idx", {3}}}},
      // The released Hymba's conventions (hymba import): W + 1 keys, NTK RoPE; and RoPE off.
      {"released_inclusive_window_ntk",
       {{"num_memory_tokens", 2}, {"sliding_window", 3}, {"sliding_window_inclusive", true},
        {"global_attn_idx", {0}}, {"kv_reuse_group", "auto"}, {"mamba_inner_layernorms", true},
        {"rope_type", "ntk"}, {"max_position_embeddings", 64}, {"orig_max_position_embeddings", 16}}},
      {"inclusive_window_of_one",
       {{"layer_types", "attention"}, {"sliding_window", 1}, {"sliding_window_inclusive", true},
        {"global_attn_idx", {2}}}},
      // Attention dropout is training-only: decoding equals the forward without it.
      {"attention_dropout_off_when_decoding",
       {{"attention_dropout", 0.3}, {"dropout", 0.1}, {"num_memory_tokens", 2}, {"sliding_window", 3},
        {"global_attn_idx", {0}}}},
      // Seed 002's "all_pairs" sharing where both layers of a pair are global.
      {"kv_all_pairs_global", {{"layer_types", "attention"}, {"sliding_window", 0}, {"kv_reuse_group", "all_pairs"}}},
      {"rope_off", {{"layer_types", "attention"}, {"rope", false}, {"sliding_window", 3}, {"global_attn_idx", {1}}}},
      {"hybrid_concat",
       {{"proj_style", "fused"}, {"fusion", "concat"}, {"num_memory_tokens", 1}, {"sliding_window", 5},
        {"global_attn_idx", {1}}, {"mamba_d_conv", 2}}},
      // GPT-style pieces: learned positions at the decode step's absolute
      // position (after the meta tokens), LayerNorm with bias, GELU MLP.
      {"gpt_layernorm_gelu_learned",
       {{"layer_types", "attention"}, {"norm", "layernorm"}, {"mlp_activation", "gelu"}, {"mlp_bias", true},
        {"position_embedding", "learned"}, {"max_position_embeddings", 18}, {"sliding_window", 0}}},
      {"gpt_pieces_hybrid_meta",
       {{"norm", "layernorm"}, {"mlp_activation", "gelu_erf"}, {"position_embedding", "learned"},
        {"max_position_embeddings", 21}, {"num_memory_tokens", 3}, {"sliding_window", 4}, {"global_attn_idx", {0}}}},
      // GPT-Neo: unscaled attention, out_proj bias (torch init: non-zero),
      // alternating global and local layers with a window shorter than the run.
      {"gpt_neo_global_local_unscaled_out_bias",
       {{"layer_types", "attention"}, {"num_hidden_layers", 4}, {"norm", "layernorm"}, {"mlp_activation", "gelu"},
        {"mlp_bias", true}, {"position_embedding", "learned"}, {"max_position_embeddings", 18},
        {"attention_out_bias", true}, {"attention_scale", "none"}, {"global_attn_idx", {0, 2}},
        {"sliding_window", 3}, {"init_scheme", "torch"}}},
      // GPT-2's c_attn bias (attention_qkv_bias, torch init: non-zero) with
      // RoPE, a window and KV sharing (the consumer reuses biased K/V).
      {"qkv_bias_kvshare_window",
       {{"layer_types", "attention"}, {"num_hidden_layers", 4}, {"attention_qkv_bias", true},
        {"init_scheme", "torch"}, {"sliding_window", 3}, {"global_attn_idx", {0}}, {"kv_reuse_group", "auto"}}},
      {"qkv_bias_hybrid_separate_meta",
       {{"layer_types", "hybrid"}, {"proj_style", "separate"}, {"fusion", "mean"}, {"attention_qkv_bias", true},
        {"init_scheme", "torch"}, {"num_memory_tokens", 2}, {"sliding_window", 4}, {"global_attn_idx", {0}}}},
      {"sequential_gated_blocks",
       {{"layer_types", {"attention", "attention", "mamba", "mamba"}}, {"block_layers", 2}, {"block_link", "gated"},
        {"sliding_window", 3}, {"global_attn_idx", {0}}}},
      {"sequential_residual_blocks",
       {{"layer_types", {"attention", "mamba", "attention", "mamba"}}, {"block_layers", 2},
        {"block_link", "residual"}, {"num_memory_tokens", 2}}},
  };
}

// n token ids drawn uniformly from [0, vocab).
inline std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = static_cast<int32_t>(r.below(static_cast<uint64_t>(vocab)));
  return ids;
}

}  // namespace hymba::test
