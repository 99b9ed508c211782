// attention_qkv_bias: biases on the q/k/v projections (GPT-2's c_attn bias).
// The config field and its refusals, the tensors in the one parameter table
// (so init, save/load and the optimizer follow) and the size estimate, and
// that zero biases give the model without them. The gradient and the cached
// decode are checked with the other families in test_model_grad / test_infer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/checkpoint.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// 4 attention layers, layers 1-2 sharing K/V (layer 2 a consumer: no k/v).
json gpt2_like(json over = json::object()) {
  json j = {{"vocab_size", 13},          {"hidden_size", 8},         {"num_hidden_layers", 4},
            {"layer_types", "attention"}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
            {"intermediate_size", 12},   {"sliding_window", 3},      {"global_attn_idx", {0, 3}},
            {"kv_reuse_group", {{1, 2}}}, {"attention_qkv_bias", true}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  test::expect_error([&j] { ModelConfig::from_json(j, "config.json"); }, parts);
}

TEST(QkvBias, ConfigRoundTripsAndIsWrittenOnlyWhenSet) {
  const ModelConfig c = ModelConfig::from_json(gpt2_like());
  EXPECT_TRUE(c.attention_qkv_bias);
  const json j = c.to_json();
  EXPECT_EQ(j.at("attention_qkv_bias"), true);
  EXPECT_EQ(ModelConfig::from_json(j).to_json(), j);
  EXPECT_FALSE(ModelConfig::from_json(gpt2_like({{"attention_qkv_bias", false}})).to_json().contains("attention_qkv_bias"));
  // Separate hybrids own q/k/v weights, so they take the biases too.
  EXPECT_NO_THROW(ModelConfig::from_json(gpt2_like({{"layer_types", "hybrid"}, {"proj_style", "separate"},
                                                    {"fusion", "learned_beta"}})));
}

TEST(QkvBias, RefusalsNameTheField) {
  expect_config_error(gpt2_like({{"attention_qkv_bias", "yes"}}), {"'attention_qkv_bias'"});
  // A fused hybrid projects Q, K, V, x and z with one in_proj: no q/k/v weights to carry a bias.
  expect_config_error(gpt2_like({{"layer_types", "hybrid"}, {"proj_style", "fused"}}),
                      {"'attention_qkv_bias'", "proj_style \"fused\""});
  expect_config_error(gpt2_like({{"layer_types", "mamba"}, {"global_attn_idx", json::array()},
                                 {"kv_reuse_group", json::array()}, {"sliding_window", 0},
                                 {"num_attention_heads", 0}, {"num_key_value_heads", 0}}),
                      {"'attention_qkv_bias'", "no layer has attention"});
}

TEST(QkvBias, BiasesAreInTheTableAndTheEstimate) {
  const ModelConfig c = ModelConfig::from_json(gpt2_like());
  const Model m(c, false);
  const ParamTable& t = m.params();
  // q: 2 heads x 4; k/v: 1 KV head x 4; the consumer (layer 2) has a q bias only.
  EXPECT_EQ(t.info("model.layers.0.self_attn.q_proj.bias").shape.numel(), 8);
  EXPECT_EQ(t.info("model.layers.0.self_attn.k_proj.bias").shape.numel(), 4);
  EXPECT_EQ(t.info("model.layers.1.self_attn.v_proj.bias").shape.numel(), 4);
  EXPECT_TRUE(t.contains("model.layers.2.self_attn.q_proj.bias"));
  EXPECT_FALSE(t.contains("model.layers.2.self_attn.k_proj.bias"));
  EXPECT_FALSE(t.contains("model.layers.2.self_attn.v_proj.bias"));
  EXPECT_FALSE(t.contains("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_EQ(static_cast<double>(t.num_params()), parameter_floats(c));
  const Model without(ModelConfig::from_json(gpt2_like({{"attention_qkv_bias", false}})), false);
  EXPECT_EQ(t.num_params() - without.params().num_params(), 3 * (8 + 4 + 4) + 8);
  // The biases are plain Linear biases: no weight decay; 0 under normal init.
  EXPECT_FALSE(t.info("model.layers.0.self_attn.q_proj.bias").weight_decay);
}

// Logits of ids under the model's current weights.
std::vector<float> logits_of(Model& m, const std::vector<int32_t>& ids) {
  m.forward(ids.data(), nullptr, 1, static_cast<int64_t>(ids.size()));
  const int64_t n = static_cast<int64_t>(ids.size()) * m.config().vocab_size;
  return {m.logits(), m.logits() + n};
}

TEST(QkvBias, ZeroBiasesGiveTheModelWithoutThemAndNonZeroOnesChangeIt) {
  for (const json& over : {json::object(), json{{"layer_types", "hybrid"}, {"proj_style", "separate"},
                                               {"fusion", "mean"}, {"num_memory_tokens", 2}}}) {
    Model with(ModelConfig::from_json(gpt2_like(over)), false);
    json plain = gpt2_like(over);
    plain["attention_qkv_bias"] = false;
    Model without(ModelConfig::from_json(plain), false);
    with.init(3);
    // Copy every shared tensor; the biases stay 0 (their init under "normal").
    without.params().for_each([&](ParamSlot& s) {
      const ParamInfo& w = with.params().info(s.info.name);
      std::copy_n(with.params().values_block() + w.offset, s.numel(), s.value);
    });
    const std::vector<int32_t> ids = {1, 5, 2, 7, 3, 3, 9};
    EXPECT_EQ(logits_of(with, ids), logits_of(without, ids)) << over.dump();
    // A v bias moves every later logit.
    with.params().for_each([&](ParamSlot& s) {
      if (s.info.name.ends_with("v_proj.bias"))
        for (int64_t i = 0; i < s.numel(); ++i) s.value[i] = 0.5f;
    });
    EXPECT_NE(logits_of(with, ids), logits_of(without, ids)) << over.dump();
  }
}

TEST(QkvBias, SaveAndLoadKeepTheBiases) {
  json j = gpt2_like();
  j["init_scheme"] = "torch";  // non-zero biases
  Model m(ModelConfig::from_json(j), false);
  m.init(4);
  const fs::path dir = fs::temp_directory_path() / ("hymba_qkv_bias_" + std::to_string(::getpid()));
  save_model(dir.string(), m);
  const auto back = load_model(dir.string(), false);
  const ParamInfo& b = back->params().info("model.layers.1.self_attn.k_proj.bias");
  const ParamInfo& a = m.params().info("model.layers.1.self_attn.k_proj.bias");
  const std::vector<float> got(back->params().values_block() + b.offset,
                               back->params().values_block() + b.offset + 4);
  const std::vector<float> want(m.params().values_block() + a.offset, m.params().values_block() + a.offset + 4);
  EXPECT_EQ(got, want);
  EXPECT_NE(want, std::vector<float>(4, 0.0f));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hymba
