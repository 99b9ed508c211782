// Whole-model gradient checks: the float32 backward against central finite
// differences of the same graph run in float64 on the reference kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/model.h"
#include "test_util.h"

namespace hymba {
namespace {

using nlohmann::json;

// Relative tolerance: float32 analytic gradients vs float64 differences.
constexpr double kGradTol = 3e-3;
// Float32 fast forward vs float64 reference forward, on the mean loss.
constexpr double kLossTol = 1e-5;
constexpr int kSamplesPerTensor = 12;

struct Family {
  const char* name;
  json config;
  int64_t B, T;
  double label_smoothing;
};

json base(json over) {
  json j = {{"vocab_size", 11}, {"hidden_size", 8},        {"num_hidden_layers", 2}, {"num_attention_heads", 2},
            {"num_key_value_heads", 1}, {"mamba_d_state", 4}, {"mamba_d_conv", 3},   {"mamba_expand", 2},
            {"intermediate_size", 12}, {"initializer_range", 0.3}, {"tie_word_embeddings", true}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::vector<Family> families() {
  return {
      {"attention_global", base({{"layer_types", "attention"}, {"tie_word_embeddings", false}}), 2, 6, 0.0},
      // Weight rows of 6 * 6 and 13 * 6 floats are not whole 64-byte lines, so
      // q/k/v and gate/up are not back to back: the separate-GEMM path.
      {"attention_unstacked", base({{"layer_types", "attention"}, {"hidden_size", 6}, {"num_attention_heads", 1},
                                    {"intermediate_size", 13}}), 2, 5, 0.0},
      {"attention_swa_meta", base({{"layer_types", "attention"}, {"num_hidden_layers", 3}, {"sliding_window", 3},
                                   {"global_attn_idx", {0}}, {"num_memory_tokens", 2}}), 2, 7, 0.1},
      {"mamba_hf", base({{"layer_types", "mamba"}, {"intermediate_size", 0}}), 2, 7, 0.0},
      {"hybrid_fused_norm_mean_kvshare_meta",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 4}, {"global_attn_idx", {0, 3}}, {"sliding_window", 3},
             {"kv_reuse_group", "auto"}, {"num_memory_tokens", 2}, {"mamba_inner_layernorms", true}}),
       2, 6, 0.0},
      {"hybrid_separate_learned_beta",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 3}, {"proj_style", "separate"},
             {"fusion", "learned_beta"}, {"global_attn_idx", {0}}, {"sliding_window", 2},
             {"kv_reuse_group", "auto"}, {"num_memory_tokens", 1}}),
       2, 5, 0.0},
      {"hybrid_fused_concat", base({{"layer_types", "hybrid"}, {"fusion", "concat"}}), 2, 5, 0.0},
      // The released Hymba's conventions (hymba import): NTK RoPE, W + 1 keys; and RoPE off.
      {"hybrid_released_ntk_inclusive_window",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 3}, {"global_attn_idx", {0}}, {"sliding_window", 2},
             {"sliding_window_inclusive", true}, {"rope_type", "ntk"}, {"max_position_embeddings", 64},
             {"orig_max_position_embeddings", 16}, {"qk_head_dim", 4}, {"num_memory_tokens", 1}}),
       2, 6, 0.0},
      {"attention_rope_off", base({{"layer_types", "attention"}, {"rope", false}}), 2, 5, 0.0},
      {"hybrid_separate_mean_ratio",
       base({{"layer_types", "hybrid"}, {"proj_style", "separate"}, {"fusion", "mean"},
             {"attn_mamba_ratio", {1, 1}}, {"sliding_window", 2}}),
       2, 5, 0.0},
      // Seed 004's sequential hybrids: blocks of attention then Mamba layers.
      {"sequential_residual_link",
       base({{"layer_types", {"attention", "mamba", "attention", "mamba"}}, {"num_hidden_layers", 4},
             {"block_layers", 2}, {"block_link", "residual"}}),
       2, 6, 0.0},
      {"sequential_gated_link_meta",
       base({{"layer_types", {"attention", "attention", "mamba", "mamba"}}, {"num_hidden_layers", 4},
             {"block_layers", 4}, {"block_link", "gated"}, {"num_memory_tokens", 1}}),
       2, 5, 0.0},
      // GPT-style (seed 003's baseline): LayerNorm with bias, GELU MLP with
      // biases, learned absolute positions; and the same pieces in a hybrid
      // with meta tokens (which take the first learned positions).
      {"gpt_layernorm_gelu_learned_positions",
       base({{"layer_types", "attention"}, {"norm", "layernorm"}, {"mlp_activation", "gelu"}, {"mlp_bias", true},
             {"position_embedding", "learned"}, {"max_position_embeddings", 9}, {"tie_word_embeddings", false}}),
       2, 6, 0.0},
      {"gpt_pieces_hybrid_meta_gelu_erf",
       base({{"layer_types", "hybrid"}, {"norm", "layernorm"}, {"mlp_activation", "gelu_erf"},
             {"position_embedding", "learned"}, {"max_position_embeddings", 7}, {"num_memory_tokens", 2},
             {"sliding_window", 3}, {"global_attn_idx", {0}}}),
       2, 5, 0.0},
      // GPT-Neo: q.k unscaled, a bias on o_proj, global and local layers in
      // turn; and the same two options on separate mean-fusion hybrids.
      {"gpt_neo_unscaled_out_bias_global_local",
       base({{"layer_types", "attention"}, {"num_hidden_layers", 4}, {"norm", "layernorm"},
             {"mlp_activation", "gelu"}, {"mlp_bias", true}, {"position_embedding", "learned"},
             {"max_position_embeddings", 9}, {"attention_out_bias", true}, {"attention_scale", "none"},
             {"global_attn_idx", {0, 2}}, {"sliding_window", 2}}),
       2, 6, 0.0},
      {"hybrid_separate_mean_out_bias_unscaled",
       base({{"layer_types", "hybrid"}, {"proj_style", "separate"}, {"fusion", "mean"},
             {"attention_out_bias", true}, {"attention_scale", "none"}, {"sliding_window", 2},
             {"global_attn_idx", {1}}}),
       2, 5, 0.0},
      // GPT-2's c_attn bias (attention_qkv_bias, torch init: non-zero) with
      // KV sharing (the consumer has a q bias only), RoPE, a window; and on
      // separate hybrids. hidden 6: q/k/v not back to back (the unstacked path).
      {"qkv_bias_kvshare_torch_init",
       base({{"layer_types", "attention"}, {"num_hidden_layers", 3}, {"attention_qkv_bias", true},
             {"attention_out_bias", true}, {"init_scheme", "torch"}, {"sliding_window", 2}, {"global_attn_idx", {0}},
             {"kv_reuse_group", {{1, 2}}}}),
       2, 6, 0.0},
      {"qkv_bias_unstacked_hybrid_separate_meta",
       base({{"layer_types", "hybrid"}, {"hidden_size", 6}, {"num_attention_heads", 1}, {"proj_style", "separate"},
             {"fusion", "learned_beta"}, {"attention_qkv_bias", true}, {"init_scheme", "torch"},
             {"num_memory_tokens", 2}}),
       2, 5, 0.0},
      // The seeds' leaks (issue 38): a symmetric window (seed 000) and meta
      // tokens that see the whole sequence (seed 002), with KV sharing; and
      // attention dropout (seed 001), whose fixed mask the float64 forward
      // draws again from the same dropout stream (a family with
      // attention_dropout runs with dropout_rng, residual dropout included).
      {"attention_symmetric_window_meta",
       base({{"layer_types", "attention"}, {"num_hidden_layers", 3}, {"sliding_window", 3}, {"global_attn_idx", {0}},
             {"num_memory_tokens", 2}, {"sliding_window_symmetric", true}}),
       2, 7, 0.0},
      {"hybrid_meta_sees_all_kvshare",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 4}, {"global_attn_idx", {0, 3}}, {"sliding_window", 2},
             {"kv_reuse_group", "auto"}, {"num_memory_tokens", 2}, {"meta_tokens_see_all", true}}),
       2, 6, 0.0},
      {"hybrid_attention_dropout_window_meta",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 3}, {"global_attn_idx", {0}}, {"sliding_window", 3},
             {"kv_reuse_group", {{1, 2}}}, {"num_memory_tokens", 2}, {"attention_dropout", 0.3}, {"dropout", 0.1}}),
       2, 6, 0.0},
      // Seed 002's KV sharing over every consecutive pair: a global producer
      // with a local consumer (0, 1) and a local producer with a global consumer (2, 3).
      {"hybrid_kv_all_pairs_mixed_windows",
       base({{"layer_types", "hybrid"}, {"num_hidden_layers", 4}, {"global_attn_idx", {0, 3}}, {"sliding_window", 2},
             {"kv_reuse_group", "all_pairs"}, {"num_memory_tokens", 1}}),
       2, 6, 0.0},
      {"sequential_gated_one_layer_blocks",
       base({{"layer_types", {"attention", "mamba"}}, {"block_layers", 1}, {"block_link", "gated"},
             {"intermediate_size", 0}}),
       2, 5, 0.0},
  };
}

class ModelGradTest : public ::testing::TestWithParam<Family> {};

// n random input ids and targets below vocab (the same every call).
void random_tokens(int64_t vocab, int64_t n, std::vector<int32_t>* ids, std::vector<int32_t>* targets) {
  Rng data(3);
  ids->resize(static_cast<size_t>(n));
  targets->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    (*ids)[static_cast<size_t>(i)] = static_cast<int32_t>(data.below(vocab));
    (*targets)[static_cast<size_t>(i)] = static_cast<int32_t>(data.below(vocab));
  }
}

TEST_P(ModelGradTest, BackwardMatchesFloat64FiniteDifferences) {
  const Family& fam = GetParam();
  const ModelConfig cfg = ModelConfig::from_json(fam.config, fam.name);
  Model model(cfg, /*training=*/true);
  model.set_activation_poison(true);
  model.init(7);
  // Perturb every parameter so norms, betas and D are not at their
  // symmetric initial values (random, never all-equal or zero).
  Rng noise(99);
  model.params().for_each([&](ParamSlot& s) {
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] += 0.1f * noise.normal();
  });

  const int64_t B = fam.B, T = fam.T, n = B * T;
  std::vector<int32_t> ids, targets;
  random_tokens(cfg.vocab_size, n, &ids, &targets);
  targets[1] = cpu::kIgnoreIndex;  // an ignored position must not contribute

  ForwardOptions opt;
  opt.label_smoothing = fam.label_smoothing;
  const Rng drop(23);
  if (cfg.attention_dropout > 0) opt.dropout_rng = &drop;
  model.params().zero_grad();
  const LossStats fl = model.forward(ids.data(), targets.data(), B, T, opt);
  model.backward();
  ASSERT_EQ(fl.scored, n - 1);

  const ParamTable& table = model.params();
  std::vector<double> P(table.values_block(), table.values_block() + table.total_floats());
  BasicArena<double> arena;
  Activations<double> acts;
  auto loss = [&] {
    arena.reset();
    LossStats s = model_forward(model.plan(), P.data(), ids.data(), targets.data(), B, T, opt, arena, acts);
    return s.loss_sum / static_cast<double>(s.scored);
  };
  const double ref_loss = loss();
  EXPECT_NEAR(fl.loss_sum / fl.scored, ref_loss, kLossTol * std::max(1.0, std::abs(ref_loss)));

  Rng pick(5);
  for (const ParamInfo& info : table.rows()) {
    const test::SampledGradError e = test::sampled_grad_error(loss, P.data() + info.offset,
                                                              table.grads_block() + info.offset, info.shape.numel(),
                                                              kSamplesPerTensor, pick);
    EXPECT_LE(e.relative(), kGradTol) << fam.name << ": " << info.name << " max |analytic - numeric| = " << e.max_err
                                      << " vs max |numeric| = " << e.max_num;
  }
}

// Recomputed activations (ForwardOptions::recompute) give the same loss and
// bit-identical gradients on every family, dropout included, while the
// forward keeps only layer inputs.
TEST_P(ModelGradTest, RecomputedActivationsGiveBitIdenticalGradients) {
  const Family& fam = GetParam();
  json config = fam.config;
  config["dropout"] = 0.1;
  config["attention_dropout"] = 0.2;
  const ModelConfig cfg = ModelConfig::from_json(config, fam.name);
  const int64_t B = fam.B, T = fam.T;
  std::vector<int32_t> ids, targets;
  random_tokens(cfg.vocab_size, B * T, &ids, &targets);
  const Rng drop(17);
  auto run = [&](bool recompute, double* loss, size_t* activation_bytes) {
    Model model(cfg, /*training=*/true);
    model.init(7);
    ForwardOptions opt;
    opt.label_smoothing = fam.label_smoothing;
    opt.dropout_rng = &drop;
    opt.recompute = recompute;
    model.params().zero_grad();
    *loss = model.forward(ids.data(), targets.data(), B, T, opt).loss_sum;
    model.backward();
    *activation_bytes = model.activation_bytes();
    const ParamTable& t = model.params();
    return std::vector<float>(t.grads_block(), t.grads_block() + t.total_floats());
  };
  double kept_loss = 0, recomputed_loss = 0;
  size_t kept_bytes = 0, recomputed_bytes = 0;
  const std::vector<float> kept = run(false, &kept_loss, &kept_bytes);
  const std::vector<float> recomputed = run(true, &recomputed_loss, &recomputed_bytes);
  EXPECT_EQ(recomputed_loss, kept_loss);
  ASSERT_EQ(recomputed.size(), kept.size());
  EXPECT_EQ(std::memcmp(recomputed.data(), kept.data(), kept.size() * sizeof(float)), 0) << fam.name;
  EXPECT_GT(kept_bytes, 0u);
}

// The point of recomputing: the activation peak of a deeper model falls to
// the layer inputs plus about one layer.
TEST(ModelRecompute, ActivationPeakFallsToAboutOneLayer) {
  json config = base({{"layer_types", "hybrid"}, {"num_hidden_layers", 8}, {"hidden_size", 32},
                      {"intermediate_size", 64}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}});
  const ModelConfig cfg = ModelConfig::from_json(config, "deep");
  const int64_t B = 2, T = 64;
  std::vector<int32_t> ids(B * T, 3), targets(B * T, 4);
  auto peak = [&](bool recompute) {
    Model model(cfg, /*training=*/true);
    model.init(1);
    ForwardOptions opt;
    opt.recompute = recompute;
    model.forward(ids.data(), targets.data(), B, T, opt);
    model.backward();
    return model.activation_bytes();
  };
  const size_t kept = peak(false), recomputed = peak(true);
  EXPECT_LT(recomputed * 2, kept) << "kept " << kept << " bytes, recomputed " << recomputed;
}

TEST(ModelPlan, StacksBackToBackProjections) {
  for (const Family& fam : families()) {
    if (fam.name != std::string("attention_global") && fam.name != std::string("attention_unstacked")) continue;
    const Model model(ModelConfig::from_json(fam.config, fam.name), /*training=*/false);
    const bool stacked = fam.name == std::string("attention_global");
    for (const LayerPlan& lp : model.plan().layers) {
      EXPECT_EQ(lp.qkv_stacked, stacked) << fam.name;
      EXPECT_EQ(lp.gate_up_stacked, stacked) << fam.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelGradTest, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hymba
