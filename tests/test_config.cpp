// Config parsing and validation: every rule gives a one-line error naming its field.
#include <gtest/gtest.h>

#include <string>

#include "formats/checkpoint.h"
#include "core/error.h"
#include "model/config.h"

namespace hymba {
namespace {

using nlohmann::json;

json valid() {
  return {{"vocab_size", 32},          {"hidden_size", 16},      {"num_hidden_layers", 4},
          {"layer_types", "hybrid"},   {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"global_attn_idx", {0, 3}}, {"sliding_window", 8},    {"kv_reuse_group", "auto"},
          {"num_memory_tokens", 2},    {"intermediate_size", 32}};
}

// Expects from_json to throw an error whose message contains every needle.
void expect_error(const json& j, std::initializer_list<const char*> needles) {
  try {
    ModelConfig::from_json(j, "cfg.json");
    FAIL() << "expected an error for " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error must be one line: " << msg;
    EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
}

json with(json j, const char* key, json value) {
  j[key] = std::move(value);
  return j;
}

TEST(Config, ValidConfigResolvesDerivedFields) {
  ModelConfig c = ModelConfig::from_json(valid());
  EXPECT_EQ(c.qk_head_dim, 4);
  EXPECT_EQ(c.v_head_dim, 8);  // fused norm_mean: d_inner (32) / heads (4)
  EXPECT_EQ(c.dt_rank(), 1);   // ceil(16 / 16)
  ASSERT_EQ(c.kv_reuse_group.size(), 1u);
  EXPECT_EQ(c.kv_reuse_group[0], (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.kv_producer(2), 1);
  EXPECT_TRUE(c.is_kv_producer(1));
  EXPECT_TRUE(c.is_global(0));
  EXPECT_EQ(c.window_of(1), 8);
  // Round trip through to_json.
  ModelConfig again = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(again.to_json(), c.to_json());
}

// The seeds' leaks and attention dropout: off by default and not written;
// set, they round-trip; future_leak names the one that acts on a layer.
TEST(Config, LeakTogglesAndAttentionDropout) {
  const ModelConfig plain = ModelConfig::from_json(valid());
  EXPECT_EQ(plain.future_leak(), nullptr);
  EXPECT_FALSE(plain.to_json().contains("sliding_window_symmetric"));
  EXPECT_FALSE(plain.to_json().contains("meta_tokens_see_all"));
  EXPECT_FALSE(plain.to_json().contains("attention_dropout"));
  json j = with(with(with(valid(), "sliding_window_symmetric", true), "meta_tokens_see_all", true),
                "attention_dropout", 0.1);
  j["num_memory_tokens"] = 2;
  const ModelConfig c = ModelConfig::from_json(j);
  EXPECT_STREQ(c.future_leak(), "sliding_window_symmetric");
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).to_json(), c.to_json());
  // Without a local layer the symmetric window acts nowhere; the meta leak then names itself.
  const json all_global = with(with(j, "sliding_window", 0), "global_attn_idx", json::array());
  EXPECT_STREQ(ModelConfig::from_json(all_global).future_leak(), "meta_tokens_see_all");
  EXPECT_EQ(ModelConfig::from_json(with(all_global, "num_memory_tokens", 0)).future_leak(), nullptr);
  expect_error(with(valid(), "attention_dropout", 1.0), {"attention_dropout", "[0, 1)"});
  expect_error(with(valid(), "attention_dropout", -0.1), {"attention_dropout"});
  expect_error(with(valid(), "sliding_window_symmetric", "yes"), {"sliding_window_symmetric"});
  expect_error(with(valid(), "meta_tokens_see_all", 1), {"meta_tokens_see_all"});
}

// "all_pairs" (seed 002's owner map): (0, 1), (2, 3), ... global layers
// included, pairs without two attention layers skipped; written back as
// "all_pairs"; a pair of two windows is refused by the decoder only.
TEST(Config, AllPairsKvGroupsPairEveryConsecutiveLayer) {
  json j = with(with(valid(), "num_hidden_layers", 7), "kv_reuse_group", "all_pairs");
  j["layer_types"] = {"hybrid", "hybrid", "hybrid", "hybrid", "mamba", "hybrid", "hybrid"};
  j["global_attn_idx"] = {0, 3, 6};
  const ModelConfig c = ModelConfig::from_json(j);
  const std::vector<std::vector<int64_t>> expect = {{0, 1}, {2, 3}};
  EXPECT_EQ(c.kv_reuse_group, expect);
  EXPECT_EQ(c.kv_producer(1), 0);
  EXPECT_EQ(c.to_json()["kv_reuse_group"], "all_pairs");
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).kv_reuse_group, expect);
  EXPECT_NE(c.decode_refusal().find("kv_reuse_group pairs layers 0 and 1"), std::string::npos) << c.decode_refusal();
  EXPECT_EQ(ModelConfig::from_json(with(with(j, "sliding_window", 0), "global_attn_idx", json::array()))
                .decode_refusal(),
            "");
  // Explicit groups still may not hold a global layer.
  expect_error(with(valid(), "kv_reuse_group", {{0, 1}}), {"kv_reuse_group", "global layer 0", "all_pairs"});
  expect_error(with(valid(), "kv_reuse_group", "pairs"), {"kv_reuse_group", "all_pairs"});
}

TEST(Config, AutoKvGroupsPairConsecutiveLocalLayers) {
  json j = with(with(valid(), "num_hidden_layers", 11), "global_attn_idx", {0, 5, 10});
  ModelConfig c = ModelConfig::from_json(j);
  std::vector<std::vector<int64_t>> expect = {{1, 2}, {3, 4}, {6, 7}, {8, 9}};
  EXPECT_EQ(c.kv_reuse_group, expect);
}

TEST(Config, UnknownFieldAndWrongTypes) {
  expect_error(with(valid(), "hiden_size", 3), {"unknown field", "hiden_size"});
  expect_error(with(valid(), "hidden_size", "big"), {"hidden_size", "integer"});
  expect_error(with(valid(), "rms_norm_eps", "tiny"), {"rms_norm_eps", "number"});
  expect_error(with(valid(), "tie_word_embeddings", 1), {"tie_word_embeddings"});
  expect_error(with(valid(), "global_attn_idx", {0, "x"}), {"global_attn_idx"});
  expect_error(with(valid(), "layer_types", 3), {"layer_types"});
  expect_error(with(valid(), "layer_types", "transformer"), {"layer_types", "transformer"});
  expect_error(with(valid(), "layer_types", {"hybrid", "hybrid"}), {"layer_types", "num_hidden_layers"});
  expect_error(with(valid(), "proj_style", "split"), {"proj_style"});
  expect_error(with(valid(), "fusion", "sum"), {"fusion"});
  expect_error(with(valid(), "mamba_dt_rank", "big"), {"mamba_dt_rank"});
  expect_error(with(valid(), "kv_reuse_group", "pairs"), {"kv_reuse_group"});
  expect_error(with(valid(), "attn_mamba_ratio", {1}), {"attn_mamba_ratio"});
  expect_error(json::array(), {"object"});
}

TEST(Config, SizesMustBePositive) {
  expect_error(with(valid(), "vocab_size", 0), {"vocab_size"});
  expect_error(with(valid(), "hidden_size", -1), {"hidden_size"});
  expect_error(with(valid(), "num_hidden_layers", 0), {"num_hidden_layers"});
  expect_error(with(valid(), "dropout", 1.0), {"dropout"});
  expect_error(with(valid(), "intermediate_size", -5), {"intermediate_size"});
  expect_error(with(valid(), "num_memory_tokens", -1), {"num_memory_tokens"});
  expect_error(with(valid(), "mamba_d_state", 0), {"mamba_d_state"});
  expect_error(with(valid(), "mamba_dt_rank", 0), {"mamba_dt_rank"});
  expect_error(with(valid(), "rms_norm_eps", 0.0), {"rms_norm_eps"});
}

TEST(Config, HeadsMustDivideWidths) {
  expect_error(with(with(valid(), "num_attention_heads", 3), "num_key_value_heads", 1),
               {"num_attention_heads", "hidden_size"});
  expect_error(with(valid(), "num_key_value_heads", 3), {"num_key_value_heads", "divide"});
  expect_error(with(valid(), "qk_head_dim", 5), {"qk_head_dim", "even"});
  // norm_mean needs the attention output width to match the Mamba inner width.
  expect_error(with(valid(), "v_head_dim", 4), {"norm_mean", "v_head_dim"});
}

TEST(Config, KvGroupRules) {
  expect_error(with(valid(), "kv_reuse_group", {{0, 1}}), {"kv_reuse_group", "global layer 0"});
  expect_error(with(valid(), "kv_reuse_group", {{1, 9}}), {"kv_reuse_group", "9", "outside"});
  expect_error(with(valid(), "kv_reuse_group", {{1}}), {"kv_reuse_group", "fewer than 2"});
  expect_error(with(valid(), "kv_reuse_group", {{1, 2}, {2, 1}}), {"kv_reuse_group", "more than once"});
  json mixed = with(valid(), "layer_types", {"hybrid", "mamba", "hybrid", "hybrid"});
  expect_error(with(mixed, "kv_reuse_group", {{1, 2}}), {"kv_reuse_group", "layer 1", "no attention"});
}

TEST(Config, WindowAndGlobalRules) {
  expect_error(with(valid(), "sliding_window", 0), {"sliding_window"});
  expect_error(with(valid(), "sliding_window", -3), {"sliding_window"});
  expect_error(with(valid(), "global_attn_idx", {0, 7}), {"global_attn_idx", "7"});
  expect_error(with(valid(), "global_attn_idx", {0, 0}), {"global_attn_idx", "twice"});
  json mamba = with(with(valid(), "layer_types", "mamba"), "kv_reuse_group", json::array());
  expect_error(mamba, {"global_attn_idx", "no layer has attention"});
}

TEST(Config, RatioRules) {
  json sep = with(with(valid(), "proj_style", "separate"), "fusion", "mean");
  // Fused projections fix both widths, so a ratio needs the separate style.
  expect_error(with(valid(), "attn_mamba_ratio", {1, 3}), {"attn_mamba_ratio", "separate"});
  expect_error(with(sep, "attn_mamba_ratio", {0, 1}), {"attn_mamba_ratio", "attention branch empty"});
  expect_error(with(sep, "attn_mamba_ratio", {1, 0}), {"attn_mamba_ratio", "Mamba branch empty"});
  expect_error(with(sep, "attn_mamba_ratio", {0, 0}), {"attn_mamba_ratio"});
  expect_error(with(sep, "attn_mamba_ratio", {-1, 2}), {"attn_mamba_ratio"});
  ModelConfig c = ModelConfig::from_json(with(sep, "attn_mamba_ratio", {1, 3}));
  // 16 * 1/4 = 4 attention channels, rounded to a multiple of 2 x heads = 8.
  EXPECT_EQ(c.qk_head_dim * c.num_attention_heads, 8);
  EXPECT_EQ(c.mamba_width(), 8);
}

TEST(Config, FusionNeedsMatchingStyle) {
  expect_error(with(valid(), "fusion", "mean"), {"fusion", "separate"});
  expect_error(with(valid(), "fusion", "learned_beta"), {"fusion", "separate"});
  EXPECT_NO_THROW(ModelConfig::from_json(with(valid(), "fusion", "concat")));
}

TEST(Config, LoadFileErrorsNameTheFile) {
  try {
    load_config_file("/nonexistent/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/config.json"), std::string::npos);
  }
}

TEST(Config, SequentialBlocksRoundTripAndRules) {
  json j = with(with(valid(), "block_layers", 2), "block_link", "gated");
  ModelConfig c = ModelConfig::from_json(j);
  EXPECT_EQ(c.block_layers, 2);
  EXPECT_EQ(c.block_link, BlockLink::kGated);
  EXPECT_FALSE(c.closes_linked_block(0));
  EXPECT_TRUE(c.closes_linked_block(1));
  EXPECT_TRUE(c.closes_linked_block(3));
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).to_json(), c.to_json());
  // A model without blocks writes no block fields (older readers keep working).
  EXPECT_FALSE(ModelConfig::from_json(valid()).to_json().contains("block_layers"));
  expect_error(with(valid(), "block_layers", 3), {"block_layers", "divide", "num_hidden_layers"});
  expect_error(with(valid(), "block_layers", -1), {"block_layers", ">= 0"});
  expect_error(with(valid(), "block_link", "residual"), {"block_link", "block_layers"});
  expect_error(with(with(valid(), "block_layers", 2), "block_link", "highway"), {"block_link", "null, residual, gated"});
}

}  // namespace
}  // namespace hymba
