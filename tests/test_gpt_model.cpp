// The GPT-style options (norm, mlp_activation, mlp_bias, position_embedding):
// config round trip and refusals, the tensor table they add, learned
// positions at generation time, and seed 003's gpt-baseline preset.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "formats/checkpoint.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/summary.h"

namespace hymba {
namespace {

using nlohmann::json;

json gpt(json over = json::object()) {
  json j = {{"vocab_size", 13},         {"hidden_size", 8},          {"num_hidden_layers", 2},
            {"layer_types", "attention"}, {"num_attention_heads", 2}, {"num_key_value_heads", 2},
            {"intermediate_size", 12},  {"norm", "layernorm"},       {"mlp_activation", "gelu"},
            {"mlp_bias", true},         {"position_embedding", "learned"}, {"max_position_embeddings", 10},
            {"sliding_window", 0}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

void expect_error(const json& j, const std::vector<std::string>& parts) {
  try {
    ModelConfig::from_json(j, "config.json");
    FAIL() << "accepted: " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(GptConfig, RoundTripsThroughJson) {
  const ModelConfig c = ModelConfig::from_json(gpt({{"layer_norm_eps", 1e-4}}));
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.mlp_activation, MlpActivation::kGelu);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.position_embedding, PositionEmbedding::kLearned);
  EXPECT_FALSE(c.rope);
  EXPECT_DOUBLE_EQ(c.norm_eps(), 1e-4);
  const json j = c.to_json();
  EXPECT_EQ(j.at("norm"), "layernorm");
  EXPECT_EQ(j.at("mlp_activation"), "gelu");
  EXPECT_EQ(j.at("position_embedding"), "learned");
  const ModelConfig back = ModelConfig::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  // Defaults stay out of the JSON, so existing configs are unchanged.
  const json plain = ModelConfig::from_json(gpt({{"norm", "rmsnorm"}, {"mlp_activation", "swiglu"},
                                                 {"mlp_bias", false}, {"position_embedding", "rope"}}))
                         .to_json();
  for (const char* f : {"norm", "layer_norm_eps", "mlp_activation", "mlp_bias", "position_embedding", "rope"})
    EXPECT_FALSE(plain.contains(f)) << f;
  // "rope": false alone still means no positions; gelu_erf parses.
  json no_pe = gpt({{"rope", false}});
  no_pe.erase("position_embedding");
  EXPECT_EQ(ModelConfig::from_json(no_pe).position_embedding, PositionEmbedding::kNone);
  EXPECT_EQ(ModelConfig::from_json(gpt({{"mlp_activation", "gelu_erf"}})).mlp_activation, MlpActivation::kGeluErf);
}

TEST(GptConfig, RefusesImpossibleCombinationsNamingTheField) {
  expect_error(gpt({{"norm", "batchnorm"}}), {"'norm'", "batchnorm"});
  expect_error(gpt({{"mlp_activation", "relu"}}), {"'mlp_activation'", "relu"});
  expect_error(gpt({{"position_embedding", "alibi"}}), {"'position_embedding'", "alibi"});
  expect_error(gpt({{"max_position_embeddings", 0}}), {"'max_position_embeddings'", "learned"});
  expect_error(gpt({{"num_memory_tokens", 10}}), {"'max_position_embeddings'", "num_memory_tokens"});
  expect_error(gpt({{"mlp_activation", "swiglu"}}), {"'mlp_bias'", "gelu"});
  expect_error(gpt({{"rope", true}}), {"'rope'", "learned"});
  expect_error(gpt({{"rope_type", "ntk"}, {"orig_max_position_embeddings", 4}}), {"'rope_type'", "rope"});
  expect_error(gpt({{"layer_norm_eps", 0.0}}), {"'layer_norm_eps'"});
}

TEST(GptConfig, TensorTableHasBiasesAndThePositionTable) {
  const ModelConfig c = ModelConfig::from_json(gpt());
  EXPECT_FALSE(uses_hf_mamba_names(c));
  const Model m(c, false);
  const ParamTable& t = m.params();
  EXPECT_EQ(t.info("model.embed_positions.weight").shape.numel(), 10 * 8);
  EXPECT_EQ(t.info("model.final_layernorm.bias").shape.numel(), 8);
  EXPECT_EQ(t.info("model.layers.1.input_layernorm.bias").shape.numel(), 8);
  EXPECT_EQ(t.info("model.layers.1.pre_moe_layernorm.bias").shape.numel(), 8);
  EXPECT_EQ(t.info("model.layers.0.moe.experts.0.up_proj.bias").shape.numel(), 12);
  EXPECT_EQ(t.info("model.layers.0.moe.experts.0.down_proj.bias").shape.numel(), 8);
  for (const ParamInfo& info : t.rows()) EXPECT_EQ(info.name.find("gate_proj"), std::string::npos) << info.name;
  // embed + positions + per layer (2 LayerNorms with bias, q/k/v/o, up/down with biases) + final LayerNorm.
  const int64_t d = 8, I = 12, V = 13, P = 10;
  const int64_t layer = 4 * d + 4 * d * d + (I * d + I) + (d * I + d);
  EXPECT_EQ(t.num_params(), V * d + P * d + 2 * layer + 2 * d);
}

TEST(GptConfig, SaveAndLoadKeepEveryTensorAndTheLogits) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hymba_gpt_" + std::to_string(::getpid()));
  const ModelConfig c = ModelConfig::from_json(gpt({{"num_memory_tokens", 1}, {"mlp_activation", "gelu_erf"}}));
  Model m(c, false);
  m.init(4);
  const std::vector<int32_t> ids = {1, 5, 2, 7, 3};
  m.forward(ids.data(), nullptr, 1, 5);
  const std::vector<float> want(m.logits(), m.logits() + 5 * c.vocab_size);
  save_model(dir.string(), m);
  const std::unique_ptr<Model> back = load_model(dir.string(), false);
  EXPECT_EQ(back->config().to_json(), c.to_json());
  back->forward(ids.data(), nullptr, 1, 5);
  EXPECT_EQ(std::vector<float>(back->logits(), back->logits() + 5 * c.vocab_size), want);
  fs::remove_all(dir);
}

TEST(GptConfig, LongerSequencesThanTheTableAreRefused) {
  const ModelConfig c = ModelConfig::from_json(gpt({{"num_memory_tokens", 2}}));
  Model m(c, false);
  m.init(1);
  std::vector<int32_t> ids(9, 1);  // 2 meta + 9 tokens = 11 > 10 positions
  try {
    m.forward(ids.data(), nullptr, 1, 9);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings (10)"), std::string::npos) << e.what();
  }
  // Generation: a prompt of 7 fills positions 0..8; one step reaches position 9, the next would need 10.
  infer::Decoder dec(m);
  infer::SequenceCache cache = dec.new_cache(12);
  const std::vector<int32_t> prompt(7, 3);
  dec.prefill(cache, prompt);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  infer::SequenceCache* one[] = {&cache};
  const int32_t token[] = {4};
  dec.step(one, token, logits.data());
  try {
    dec.step(one, token, logits.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("position 10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_position_embeddings"), std::string::npos) << msg;
  }
}

TEST(GptConfig, GenerationBeyondTheTableIsRefusedUpFront) {
  const ModelConfig c = ModelConfig::from_json(gpt({{"num_memory_tokens", 2}}));
  Model m(c, false);
  m.init(1);
  infer::Decoder dec(m);
  infer::GenerateOptions opt;
  opt.max_new_tokens = 6;  // 2 meta + 3 prompt + 6 new - 1 fed back = 10 positions: fits
  EXPECT_NO_THROW(infer::SequenceRun(dec, {1, 2, 3}, opt, 0));
  opt.max_new_tokens = 7;
  try {
    infer::SequenceRun run(dec, {1, 2, 3}, opt, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--max-new-tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_position_embeddings (10)"), std::string::npos) << msg;
  }
}

TEST(GptPreset, Seed003GptBaselineAsTheSeedDescribesIt) {
  const ModelConfig c = preset_config("gpt-baseline");
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 8);
  EXPECT_EQ(c.num_attention_heads, 6);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.mlp_activation, MlpActivation::kGelu);
  EXPECT_EQ(c.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(c.max_position_embeddings, 256);
  // embed 50,257 x 384 (GPT-2's vocabulary, tied) + positions 256 x 384 + 8 x
  // (2 LayerNorms 4 x 384, q/k/v/o 4 x 384^2, up 1536 x 384 + 1536, down
  // 384 x 1536 + 384) + final LayerNorm.
  const int64_t d = 384, I = 1536;
  const int64_t layer = 4 * d + 4 * d * d + (I * d + I) + (d * I + d);
  const int64_t expected = 50257 * d + 256 * d + 8 * layer + 2 * d;
  EXPECT_EQ(expected, 33581184);
  EXPECT_EQ(summarize(c, 256).total_params, expected);
  // Smaller scales keep the GPT pieces.
  const ModelConfig tiny = preset_config("gpt-baseline", Scale::kTiny);
  EXPECT_EQ(tiny.norm, NormKind::kLayerNorm);
  EXPECT_EQ(tiny.position_embedding, PositionEmbedding::kLearned);
}

}  // namespace
}  // namespace hymba
