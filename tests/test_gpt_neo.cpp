// GPT-Neo (seed 004's backbone): the attention options it needs
// (attention_out_bias, attention_scale), a Hugging Face GPTNeoForCausalLM
// directory loaded unchanged (tests/fixtures/import/hf_gpt_neo*, written by
// tools/make_import_fixtures.py with an independent float64 reference), its
// GPT-2 tokenizer.json, cached decode with local layers, import refusals, and
// the gpt-neo-125m preset's published parameter count.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/safetensors.h"
#include "tokenizer/tokenizer_files.h"
#include "infer/decoder.h"
#include "formats/checkpoint.h"
#include "formats/hf_export.h"
#include "formats/hf_import.h"
#include "model/layout.h"
#include "model/memory_estimate.h"
#include "model/presets.h"
#include "model/summary.h"
#include "import_reference.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
const std::string kRoot = std::string(HYMBA_FIXTURES_DIR) + "/import";

using test::expected;
using test::Logits;
using test::rel_err;
using test::run;

fs::path copy_fixture(const std::string& layout, const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_gpt_neo_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kRoot + "/" + layout)) fs::copy(e.path(), d / e.path().filename());
  return d;
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json j = read_json_file((dir / "config.json").string());
  edit(j);
  write_text_atomic((dir / "config.json").string(), j.dump(2));
}

std::string load_error(const fs::path& dir) {
  try {
    load_model(dir.string(), false);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

// ---------------------------------------------------------------- config

json gpt_neo_like(json over = json::object()) {
  json j = {{"vocab_size", 13},          {"hidden_size", 8},           {"num_hidden_layers", 4},
            {"layer_types", "attention"}, {"num_attention_heads", 2},   {"num_key_value_heads", 2},
            {"intermediate_size", 12},   {"norm", "layernorm"},        {"mlp_activation", "gelu"},
            {"mlp_bias", true},          {"position_embedding", "learned"}, {"max_position_embeddings", 10},
            {"attention_out_bias", true}, {"attention_scale", "none"}, {"global_attn_idx", {0, 2}},
            {"sliding_window", 3}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  try {
    ModelConfig::from_json(j, "config.json");
    FAIL() << "accepted: " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(GptNeoConfig, AttentionOptionsRoundTripAndStayOutOfOtherConfigs) {
  const ModelConfig c = ModelConfig::from_json(gpt_neo_like());
  EXPECT_TRUE(c.attention_out_bias);
  EXPECT_EQ(c.attention_scale, AttentionScale::kNone);
  EXPECT_DOUBLE_EQ(c.query_prescale(), 2.0);  // sqrt(head dim 4)
  EXPECT_TRUE(c.is_global(0));
  EXPECT_FALSE(c.is_global(1));
  EXPECT_EQ(c.window_of(3), 3);
  const json j = c.to_json();
  EXPECT_EQ(j.at("attention_out_bias"), true);
  EXPECT_EQ(j.at("attention_scale"), "none");
  EXPECT_EQ(ModelConfig::from_json(j).to_json(), j);
  const json plain = ModelConfig::from_json(gpt_neo_like({{"attention_out_bias", false}, {"attention_scale",
                                                                                          "inv_sqrt_d"}}))
                         .to_json();
  EXPECT_FALSE(plain.contains("attention_out_bias"));
  EXPECT_FALSE(plain.contains("attention_scale"));
  EXPECT_DOUBLE_EQ(ModelConfig::from_json(gpt_neo_like({{"attention_scale", "inv_sqrt_d"}})).query_prescale(), 1.0);
}

TEST(GptNeoConfig, RefusalsNameTheField) {
  expect_config_error(gpt_neo_like({{"attention_scale", "half"}}), {"'attention_scale'", "half"});
  expect_config_error(gpt_neo_like({{"attention_out_bias", 1}}), {"'attention_out_bias'"});
  // Fused hybrids mix the branches in one output projection: no o_proj to carry the bias.
  expect_config_error(gpt_neo_like({{"layer_types", "hybrid"}, {"mlp_bias", false}, {"mlp_activation", "swiglu"}}),
                      {"'attention_out_bias'", "o_proj"});
  expect_config_error(gpt_neo_like({{"layer_types", "mamba"}, {"global_attn_idx", json::array()}}),
                      {"'attention_out_bias'", "no layer has attention"});
}

TEST(GptNeoConfig, OutBiasIsInTheTableAndTheEstimate) {
  const ModelConfig c = ModelConfig::from_json(gpt_neo_like());
  const Model m(c, false);
  EXPECT_EQ(m.params().info("model.layers.3.self_attn.o_proj.bias").shape.numel(), 8);
  EXPECT_FALSE(m.params().contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_EQ(static_cast<double>(m.params().num_params()), parameter_floats(c));
  const Model without(ModelConfig::from_json(gpt_neo_like({{"attention_out_bias", false}})), false);
  EXPECT_EQ(m.params().num_params() - without.params().num_params(), 4 * 8);
}

TEST(GptNeoConfig, UnscaledAttentionIsTheScaledOneWithQueriesTimesSqrtD) {
  // attention_scale none on weights W equals inv_sqrt_d with q_proj x sqrt(head dim):
  // the option changes exactly the logit scale, nothing else.
  const ModelConfig none = ModelConfig::from_json(gpt_neo_like());
  const ModelConfig scaled = ModelConfig::from_json(gpt_neo_like({{"attention_scale", "inv_sqrt_d"}}));
  Model a(none, false), b(scaled, false);
  a.init(3);
  b.init(3);
  Rng noise(5);
  a.params().for_each([&](ParamSlot& s) {
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] += 0.3f * noise.normal();
  });
  b.params().for_each([&](ParamSlot& s) {
    const Tensor src = a.params().value(s.info.name);
    const bool q = s.info.name.find("q_proj") != std::string::npos;
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] = src.data[i] * (q ? 2.0f : 1.0f);
  });
  const std::vector<int32_t> ids = {1, 5, 2, 7, 3, 9, 4};
  a.forward(ids.data(), nullptr, 1, 7);
  b.forward(ids.data(), nullptr, 1, 7);
  const std::vector<float> la(a.logits(), a.logits() + 7 * 13), lb(b.logits(), b.logits() + 7 * 13);
  EXPECT_LE(rel_err(la, lb), 1e-5);
  // ...and differs from leaving q_proj as it was.
  b.params().for_each([&](ParamSlot& s) {
    const Tensor src = a.params().value(s.info.name);
    std::copy(src.data, src.data + s.numel(), s.value);
  });
  b.forward(ids.data(), nullptr, 1, 7);
  EXPECT_GT(rel_err(std::vector<float>(b.logits(), b.logits() + 7 * 13), la), 1e-3);
}

// ---------------------------------------------------------------- import

class GptNeoImport : public ::testing::TestWithParam<const char*> {};

TEST_P(GptNeoImport, LogitsMatchTheFloat64Reference) {
  const std::string dir = kRoot + "/" + GetParam();
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const std::vector<float> got = run(*model, l);
  ASSERT_EQ(got.size(), l.want.size());
  const double rel = rel_err(got, l.want);
  std::printf("[%s] logits max error relative to max |logit| %.3g\n", GetParam(), rel);
  EXPECT_LE(rel, 2e-5);
}

TEST_P(GptNeoImport, PrefillAndCachedStepsMatchTheForward) {
  const std::string dir = kRoot + "/" + GetParam();
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const int64_t V = model->config().vocab_size, T = l.T;
  const std::vector<int32_t> ids(l.ids.begin(), l.ids.begin() + T);
  const std::vector<float> want(l.want.begin(), l.want.begin() + T * V);
  infer::Decoder dec(*model);
  infer::SequenceCache cache = dec.new_cache(T);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 2);
  std::vector<float> prompt_logits;
  dec.prefill(cache, prompt, &prompt_logits);
  EXPECT_LE(rel_err(prompt_logits, std::vector<float>(want.begin(), want.begin() + 2 * V)), 2e-5);
  std::vector<float> step(static_cast<size_t>(V));
  for (int64_t t = 2; t < T; ++t) {  // past the window (3): the local layers' ring wraps
    infer::SequenceCache* one[] = {&cache};
    const int32_t token[] = {ids[static_cast<size_t>(t)]};
    dec.step(one, token, step.data());
    EXPECT_LE(rel_err(step, std::vector<float>(want.begin() + t * V, want.begin() + (t + 1) * V)), 2e-5)
        << "position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GptNeoImport, ::testing::Values("hf_gpt_neo", "hf_gpt_neo_bin"));

TEST(GptNeoImportConfig, MapsEveryPublishedKey) {
  const std::string path = kRoot + "/hf_gpt_neo/config.json";
  const json j = read_json_file(path);
  ASSERT_EQ(detect_layout(j, path), CheckpointLayout::kHfGptNeo);
  const ModelConfig c = config_from_published(j, CheckpointLayout::kHfGptNeo, path);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.global_attn_idx, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.sliding_window, 3);
  EXPECT_FALSE(c.sliding_window_inclusive);
  EXPECT_EQ(c.intermediate_size, 4 * c.hidden_size);  // null: 4 x hidden_size
  EXPECT_EQ(c.mlp_activation, MlpActivation::kGelu);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(c.attention_scale, AttentionScale::kNone);
  EXPECT_TRUE(c.attention_out_bias && c.mlp_bias && c.tie_word_embeddings);
  // Without model_type or architectures it is an engine config, not GPT-Neo.
  EXPECT_EQ(detect_layout(json{{"model_type", "gpt_neo"}}, "x"), CheckpointLayout::kHfGptNeo);
}

TEST(GptNeoImportConfig, TheWindowAndTheLayerPatternChangeTheLogits) {
  const std::string dir = kRoot + "/hf_gpt_neo";
  const Logits l = expected(dir);
  auto model = load_model(dir, false);
  const std::vector<float> base = run(*model, l);
  for (const auto& change : std::vector<std::pair<std::string, json>>{
           {"window_size", 12},
           {"attention_types", json::parse(R"([[["global"], 4]])")},
           {"attention_types", json::parse(R"([[["local", "global"], 2]])")}}) {
    SCOPED_TRACE(change.first + " " + change.second.dump());
    const fs::path d = copy_fixture("hf_gpt_neo", "pattern");
    edit_config(d, [&](json& j) {  // (a pair, not a binding: clang 14 cannot capture bindings)
      j[change.first] = change.second;
      j.erase("attention_layers");
    });
    auto other = load_model(d.string(), false);
    EXPECT_GT(rel_err(run(*other, l), base), 1e-3);
    fs::remove_all(d);
  }
}

TEST(GptNeoImportConfig, RefusalsNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"activation_function", "relu", "activation_function"},
      {"attention_types", json::parse(R"([[["global", "sparse"], 2]])"), "attention_types"},
      {"attention_types", json::parse(R"([[["global", "local"], 3]])"), "attention_types"},
      {"attention_types", json::parse(R"([[["global", "local"], 1]])"), "attention_types"},
      {"attention_types", json::parse(R"([[[], 9223372036854775807]])"), "attention_types"},
      {"attention_layers", json::parse(R"(["local", "global", "local", "global"])"), "attention_layers"},
      {"num_heads", 3, "num_heads"},
      {"window_size", 0, "window_size"},
      {"layer_norm_epsilon", 0.0, "layer_norm_epsilon"},
      {"vocab_parallel_embedding", true, "vocab_parallel_embedding"},
      {"rotary", true, "rotary"},
      {"num_layers", "four", "num_layers"},
      {"model_type", "gpt2", "model_type"},
      {"hidden_size", 24, "transformer.wte.weight"},  // the weights no longer match the config
      {"max_position_embeddings", 8, "transformer.wpe.weight"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " = " + c.value.dump());
    const fs::path d = copy_fixture("hf_gpt_neo", "bad");
    edit_config(d, [&](json& j) { j[c.field] = c.value; });
    const std::string msg = load_error(d);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
    fs::remove_all(d);
  }
}

TEST(GptNeoImportConfig, ExtraTensorsAreRefusedButMaskBuffersAreNot) {
  // hf_gpt_neo_bin carries every layer's attn.attention.bias / masked_bias and
  // loads (LogitsMatchTheFloat64Reference); a tensor that is neither is an error.
  const fs::path d = copy_fixture("hf_gpt_neo", "extra");
  const SafetensorsFile f = SafetensorsFile::open((d / "model.safetensors").string());
  std::vector<std::pair<std::string, std::vector<float>>> tensors;
  for (const SafetensorsEntry& e : f.entries()) tensors.emplace_back(e.name, f.read_f32(e.name));
  tensors.emplace_back("transformer.h.0.attn.attention.q_proj.bias", std::vector<float>(16, 0.5f));
  std::vector<NamedTensor> out;
  for (const auto& [name, values] : tensors) {
    const SafetensorsEntry* e = f.find(name);
    Shape shape{16};
    if (e != nullptr) {
      shape = Shape{};
      for (int64_t dim : e->shape) shape.dims[static_cast<size_t>(shape.rank++)] = dim;
    }
    out.push_back({name, shape, values.data()});
  }
  save_safetensors((d / "model.safetensors").string(), out);
  const std::string msg = load_error(d);
  EXPECT_NE(msg.find("q_proj.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected tensor"), std::string::npos) << msg;
  fs::remove_all(d);
}

TEST(GptNeoImportConfig, NativeSaveLoadsBackWithTheSameLogits) {
  const std::string dir = kRoot + "/hf_gpt_neo";
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const fs::path out = fs::temp_directory_path() / ("hymba_gpt_neo_native_" + std::to_string(::getpid()));
  save_model(out.string(), *model);
  EXPECT_EQ(detect_layout(read_json_file((out / "config.json").string()), "saved"), CheckpointLayout::kNative);
  auto again = load_model(out.string(), false);
  EXPECT_EQ(run(*again, l), run(*model, l));
  fs::remove_all(out);
}

TEST(GptNeoImportConfig, HfExportRefusesWhatHymbaOrMambaCannotExpress) {
  auto expect_refusal = [](const ModelConfig& c, const std::string& field) {
    try {
      hf_config_json(c, 1, 2, 0);
      ADD_FAILURE() << "exported; expected a refusal naming " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_refusal(load_config_file(kRoot + "/hf_gpt_neo/config.json"), "'layer_types'");
  // A released-style Hymba with unscaled attention has no HymbaForCausalLM equivalent.
  ModelConfig h = load_config_file(kRoot + "/hf_hymba/config.json");
  h.attention_scale = AttentionScale::kNone;
  h.resolve();
  expect_refusal(h, "'attention_scale'");
}

TEST(GptNeoTokenizer, Gpt2TokenizerJsonLoadsWithHandDerivedIds) {
  const CheckpointTokenizer t = load_checkpoint_tokenizer(kRoot + "/hf_gpt_neo");
  auto model = load_model(kRoot + "/hf_gpt_neo", false);
  EXPECT_EQ(t.tokenizer->vocab_size(), model->config().vocab_size);
  EXPECT_FALSE(t.add_bos);
  // GPT-2's byte order puts '!' at 0, so 'o' is 111 - 33; merges from 256:
  // "h e" 257, "l l" 259 ("e ll" then no longer applies), "Ġwor ld" 267.
  EXPECT_EQ(t.tokenizer->encode("hello world"), (std::vector<int32_t>{257, 259, 'o' - 33, 267}));
  EXPECT_EQ(t.tokenizer->decode({257, 259, 'o' - 33, 267}), "hello world");
  EXPECT_EQ(t.tokenizer->eos_id(), 268);  // <|endoftext|>, last as in GPT-2
}

// ---------------------------------------------------------------- preset

TEST(GptNeoPreset, PublishedShapeAndParameterCount) {
  const ModelConfig c = preset_config("gpt-neo-125m");
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.sliding_window, 256);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.global_attn_idx, (std::vector<int64_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(c.attention_scale, AttentionScale::kNone);
  // EleutherAI/gpt-neo-125M: 125,198,592 parameters, wte counted once (tied).
  const int64_t d = 768, I = 3072;
  const int64_t layer = 4 * d + 4 * d * d + d + (I * d + I) + (d * I + d);
  EXPECT_EQ(50257 * d + 2048 * d + 12 * layer + 2 * d, 125198592);
  EXPECT_EQ(summarize(c, 256).total_params, 125198592);
  EXPECT_EQ(parameter_floats(c), 125198592.0);
  // The smaller scales keep global/local layers in turn.
  const ModelConfig tiny = preset_config("gpt-neo-125m", Scale::kTiny);
  EXPECT_EQ(tiny.num_hidden_layers, 6);
  EXPECT_EQ(tiny.global_attn_idx, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_TRUE(tiny.attention_out_bias);
}

TEST(GptNeoPreset, ThePresetMatchesTheImportedPublishedConfig) {
  // gpt-neo-125M's config.json (the fixture's keys at the published sizes)
  // maps to exactly the preset.
  json j = read_json_file(kRoot + "/hf_gpt_neo/config.json");
  j["hidden_size"] = 768;
  j["num_heads"] = 12;
  j["num_layers"] = 12;
  j["attention_types"] = json::parse(R"([[["global", "local"], 6]])");
  j["attention_layers"] = json::array();
  for (int i = 0; i < 6; ++i) j["attention_layers"].push_back("global"), j["attention_layers"].push_back("local");
  j["window_size"] = 256;
  j["vocab_size"] = 50257;
  j["max_position_embeddings"] = 2048;
  const ModelConfig imported = config_from_published(j, CheckpointLayout::kHfGptNeo, "gpt-neo-125M");
  EXPECT_EQ(imported.to_json(), preset_config("gpt-neo-125m").to_json());
}

}  // namespace
}  // namespace hymba
