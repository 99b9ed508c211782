// Published checkpoints (official Hymba, HF and state-spaces Mamba) load
// unchanged: tiny checkpoints in each exact layout (tests/fixtures/import,
// written by tools/make_import_fixtures.py) give the logits of an independent
// float64 reference; imports and HF exports round-trip; the released
// conventions (NTK RoPE, W + 1 keys) hold in cached decode too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <span>
#include <unistd.h>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "core/safetensors.h"
#include "infer/decoder.h"
#include "formats/checkpoint.h"
#include "formats/hf_export.h"
#include "formats/hf_import.h"
#include "model/presets.h"
#include "model/summary.h"
#include "import_reference.h"
#include "formats/torch_checkpoint.h"
#include "test_util.h"

namespace hymba {

// Parameterized test names print the dtype, not its bytes.
void PrintTo(FloatFormat f, std::ostream* os) { *os << to_string(f); }

namespace {

namespace fs = std::filesystem;
const std::string kRoot = std::string(HYMBA_FIXTURES_DIR) + "/import";

using test::expected;
using test::Logits;
using test::rel_err;
using test::run;

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_import_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Copies a fixture so a test can alter it.
fs::path copy_fixture(const std::string& layout, const std::string& name) {
  const fs::path d = temp_dir(name);
  for (const auto& e : fs::directory_iterator(kRoot + "/" + layout)) fs::copy(e.path(), d / e.path().filename());
  return d;
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit,
                 const char* file = "config.json") {
  nlohmann::json j = read_json_file((dir / file).string());
  edit(j);
  write_text_atomic((dir / file).string(), j.dump(2));
}

std::string load_error(const fs::path& dir) {
  try {
    load_model(dir.string(), false);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

class PublishedLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(PublishedLayout, LogitsMatchTheFloat64Reference) {
  const std::string dir = kRoot + "/" + GetParam();
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const std::vector<float> got = run(*model, l);
  ASSERT_EQ(got.size(), l.want.size());
  double abs_err = 0;
  for (size_t i = 0; i < got.size(); ++i) abs_err = std::max(abs_err, std::abs(double(got[i]) - l.want[i]));
  const double rel = rel_err(got, l.want);
  std::printf("[%s] logits max abs error %.3g, relative to max |logit| %.3g\n", GetParam(), abs_err, rel);
  EXPECT_LE(rel, 2e-5);
}

TEST_P(PublishedLayout, ImportThenLoadGivesTheSameLogits) {
  const std::string dir = kRoot + "/" + GetParam();
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const std::vector<float> before = run(*model, l);
  const fs::path out = temp_dir(std::string("native_") + GetParam());
  save_model(out.string(), *model);
  const nlohmann::json saved = read_json_file((out / "config.json").string());
  EXPECT_EQ(detect_layout(saved, "saved"), CheckpointLayout::kNative);
  auto again = load_model(out.string(), false);
  EXPECT_EQ(run(*again, l), before);
  fs::remove_all(out);
}

TEST_P(PublishedLayout, HfExportLoadsBackWithTheSameLogits) {
  const std::string dir = kRoot + "/" + GetParam();
  auto model = load_model(dir, false);
  const Logits l = expected(dir);
  const fs::path out = temp_dir(std::string("export_") + GetParam());
  export_hf(*model, dir, out.string());
  const nlohmann::json cfg = read_json_file((out / "config.json").string());
  ASSERT_TRUE(cfg.contains("architectures"));
  const CheckpointLayout layout = detect_layout(cfg, "exported");
  EXPECT_TRUE(layout == CheckpointLayout::kHfHymba || layout == CheckpointLayout::kHfMamba);
  auto again = load_model(out.string(), false);
  EXPECT_EQ(run(*again, l), run(*model, l));
  fs::remove_all(out);
}

// Rounds to nearest even with `fraction_bits` mantissa bits, subnormals
// spaced like the smallest normal binade (2^min_exp): plain double arithmetic
// (nearbyint ties to even), independent of the bit tricks in
// core/float_formats.cpp.
float reference_round(float x, int fraction_bits, int min_exp) {
  if (x == 0.0f) return x;
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(x), min_exp) - fraction_bits);
  return static_cast<float>(std::nearbyint(static_cast<double>(x) / ulp) * ulp);
}

float reference_round(FloatFormat f, float x) {
  return f == FloatFormat::kBF16 ? reference_round(x, 7, -126) : reference_round(x, 10, -14);
}

// Every tensor's first elements become exact ties of `f` (half-way between
// two neighbours), so ties away from zero or truncation change the logits.
void plant_ties(Model& m, FloatFormat f) {
  const uint32_t keep = f == FloatFormat::kBF16 ? 0xFFFF0000u : 0xFFFFE000u;
  const uint32_t half = f == FloatFormat::kBF16 ? 0x8000u : 0x1000u;
  m.params().for_each([&](ParamSlot& slot) {
    for (int64_t i = 0; i < std::min<int64_t>(slot.numel(), 4); ++i)
      slot.value[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(slot.value[i]) & keep) | half);
  });
}

uint64_t data_bytes(const fs::path& file) {
  const SafetensorsFile st = SafetensorsFile::open(file.string());
  uint64_t n = 0;
  for (const SafetensorsEntry& e : st.entries()) n += e.end - e.begin;
  return n;
}

// `export --dtype bf16 / f16`: the export loads back with exactly the logits
// of the float32 model whose weights were rounded the same way in memory, in
// half the bytes.
class HalfPrecisionExport : public ::testing::TestWithParam<FloatFormat> {};

TEST_P(HalfPrecisionExport, LoadsBackAsTheModelRoundedInMemory) {
  const FloatFormat format = GetParam();
  for (const std::string layout : {"state_spaces_mamba", "hf_hymba"}) {
    const std::string dir = kRoot + "/" + layout;
    auto model = load_model(dir, false);
    plant_ties(*model, format);
    const Logits l = expected(dir);
    const std::vector<float> unrounded = run(*model, l);
    const fs::path out = temp_dir(std::string("half_") + to_string(format) + "_" + layout);
    const fs::path f32 = temp_dir(std::string("half_f32_") + layout);
    export_hf(*model, dir, out.string(), format);
    export_hf(*model, dir, f32.string(), FloatFormat::kF32);
    EXPECT_EQ(read_json_file((out / "config.json").string())["torch_dtype"], torch_dtype_name(format));
    EXPECT_EQ(read_json_file((f32 / "config.json").string())["torch_dtype"], "float32");
    EXPECT_EQ(SafetensorsFile::open((out / "model.safetensors").string()).entries()[0].dtype,
              safetensors_dtype(format));
    EXPECT_EQ(2 * data_bytes(out / "model.safetensors"), data_bytes(f32 / "model.safetensors"));

    model->params().for_each([&](ParamSlot& slot) {
      for (int64_t i = 0; i < slot.numel(); ++i) slot.value[i] = reference_round(format, slot.value[i]);
    });
    const std::vector<float> rounded = run(*model, l);
    EXPECT_NE(rounded, unrounded) << layout << ": rounding should change the logits";
    auto again = load_model(out.string(), false);
    EXPECT_EQ(run(*again, l), rounded) << layout << " " << to_string(format);
    fs::remove_all(out);
    fs::remove_all(f32);
  }
}

INSTANTIATE_TEST_SUITE_P(Export, HalfPrecisionExport, ::testing::Values(FloatFormat::kBF16, FloatFormat::kF16),
                         [](const auto& param_info) { return std::string(to_string(param_info.param)); });

INSTANTIATE_TEST_SUITE_P(Import, PublishedLayout, ::testing::Values("hf_hymba", "hf_mamba", "state_spaces_mamba",
                                                                           "state_spaces_mamba_bin",
                                                                           "torch_save_wrapped"));

TEST(Import, DetectsEachLayout) {
  auto layout_of = [](const std::string& name) {
    return detect_layout(read_json_file(kRoot + "/" + name + "/config.json"), name);
  };
  EXPECT_EQ(layout_of("hf_hymba"), CheckpointLayout::kHfHymba);
  EXPECT_EQ(layout_of("hf_mamba"), CheckpointLayout::kHfMamba);
  EXPECT_EQ(layout_of("state_spaces_mamba"), CheckpointLayout::kStateSpacesMamba);
  EXPECT_EQ(layout_of("hymba_1_5b_config"), CheckpointLayout::kHfHymba);
  EXPECT_EQ(detect_layout(nlohmann::json::parse(R"({"model_type": "hymba", "hidden_size": 8})"), "ours"),
            CheckpointLayout::kNative);
}

TEST(Import, Published15BConfigMatchesThePreset) {
  const std::string path = kRoot + "/hymba_1_5b_config/config.json";
  const ModelConfig c = load_config_file(path);
  EXPECT_EQ(summarize(c, 8192).total_params, 1522797824);
  // rope_type "ntk": 10000 * (2 * 8192 / 2048 - 1)^(64 / 62)
  EXPECT_NEAR(c.rope_base(), 10000.0 * std::pow(7.0, 64.0 / 62.0), 1e-6);
  EXPECT_NEAR(c.rope_base(), 74534.8, 0.1);
  EXPECT_TRUE(c.sliding_window_inclusive);
  EXPECT_EQ(c.window_of(1), 1025);  // q - k <= 1024
  EXPECT_EQ(c.window_of(0), 0);
  EXPECT_EQ(c.kv_producer(18), 16);
  EXPECT_EQ(c.qk_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.mamba_dt_rank, 100);
  // The hymba-1.5b preset is the released model.
  EXPECT_EQ(preset_config("hymba-1.5b", Scale::kSeed).to_json(), c.to_json());
}

TEST(Import, NullMeansTheDefault) {
  const fs::path d = copy_fixture("hf_hymba", "null");
  // HymbaConfig defaults: mamba_d_conv 4, rope true, kq_head_dim -1 (hidden / heads).
  edit_config(d, [](nlohmann::json& j) {
    j["mamba_d_conv"] = nullptr;
    j["rope"] = nullptr;
    j["kq_head_dim"] = nullptr;
    j["attention_dropout"] = nullptr;
  });
  auto a = load_model(d.string(), false);
  auto b = load_model(kRoot + "/hf_hymba", false);
  const Logits l = expected(kRoot + "/hf_hymba");
  EXPECT_EQ(run(*a, l), run(*b, l));
  fs::remove_all(d);
}

// The released code reads sliding_window, global_attn_idx and kv_reuse_group
// written as null as "no window", "no layer singled out" and "no KV reuse"
// (HymbaModel: inter_layer_kv_reuse is false when kv_reuse_group is None):
// every layer global, each owning its K/V. The default groups would pair
// global layers, which the engine refuses.
TEST(Import, NullWindowGlobalsAndGroupsMakeEveryLayerGlobalWithoutReuse) {
  nlohmann::json j = read_json_file(kRoot + "/hymba_1_5b_config/config.json");
  j["sliding_window"] = nullptr;
  j["global_attn_idx"] = nullptr;
  j["kv_reuse_group"] = nullptr;
  const ModelConfig c = config_from_published(j, CheckpointLayout::kHfHymba, "null.json");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_TRUE(c.global_attn_idx.empty());
  EXPECT_TRUE(c.kv_reuse_group.empty());
  const ModelSummary s = summarize(c, 1024);
  const ModelSummary s_shared = summarize(config_from_published(
      read_json_file(kRoot + "/hymba_1_5b_config/config.json"), CheckpointLayout::kHfHymba, "x"), 1024);
  EXPECT_GT(s.kv_cache_elements, s_shared.kv_cache_elements);  // every layer caches its own K/V for all 1024
}

TEST(Import, CachedDecodeMatchesTheForwardUnderTheReleasedConventions) {
  // hf_hymba: NTK RoPE, W + 1 keys (window 3 -> 4 keys), meta tokens, KV sharing.
  auto model = load_model(kRoot + "/hf_hymba", false);
  const Logits l = expected(kRoot + "/hf_hymba");
  const int64_t V = model->config().vocab_size, T = l.T;
  const std::vector<int32_t> seq(l.ids.begin(), l.ids.begin() + T);
  infer::Decoder dec(*model);
  infer::SequenceCache cache = dec.new_cache(T);
  const std::vector<int32_t> prompt(seq.begin(), seq.begin() + 2);
  std::vector<float> logits = dec.prefill(cache, prompt);
  double worst = 0;
  for (int64_t t = 1; t < T; ++t) {
    const std::vector<float> want(l.want.begin() + t * V, l.want.begin() + (t + 1) * V);
    if (t >= 2) {
      infer::SequenceCache* one[] = {&cache};
      const int32_t token = seq[static_cast<size_t>(t)];
      dec.step(one, std::span<const int32_t>(&token, 1), logits.data());
    }
    worst = std::max(worst, rel_err(logits, want));
  }
  EXPECT_LE(worst, 2e-5);
}

TEST(Import, InclusiveWindowIsTheExclusiveWindowPlusOne) {
  ModelConfig inc = load_config_file(kRoot + "/hf_hymba/config.json");
  ModelConfig exc = inc;
  exc.sliding_window_inclusive = false;
  exc.sliding_window = inc.sliding_window + 1;
  exc.resolve();
  Model a(inc, false), b(exc, false);
  a.init(3);
  b.init(3);
  const Logits l = expected(kRoot + "/hf_hymba");
  EXPECT_EQ(run(a, l), run(b, l));
  exc.sliding_window = inc.sliding_window;  // a window one key narrower differs
  exc.resolve();
  Model c(exc, false);
  c.init(3);
  EXPECT_NE(run(a, l), run(c, l));
}

TEST(Import, RopeFalseMakesGlobalAttentionBlindToOrder) {
  ModelConfig c;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.layer_types = {MixerKind::kAttention};
  c.num_attention_heads = 2;
  c.num_key_value_heads = 2;
  c.intermediate_size = 8;
  c.initializer_range = 0.5;
  c.rope = false;
  c.resolve();
  Model m(c, false);
  m.init(5);
  auto last = [&](std::vector<int32_t> ids) {
    m.forward(ids.data(), nullptr, 1, 3);
    return std::vector<float>(m.logits() + 2 * 16, m.logits() + 3 * 16);
  };
  const std::vector<float> a = last({3, 7, 9}), b = last({7, 3, 9});
  EXPECT_LE(rel_err(a, b), 1e-6);  // no positions: the last query sees the same set of keys
  c.rope = true;
  Model r(c, false);
  r.init(5);
  std::vector<int32_t> x = {3, 7, 9}, y = {7, 3, 9};
  r.forward(x.data(), nullptr, 1, 3);
  const std::vector<float> ra(r.logits() + 32, r.logits() + 48);
  r.forward(y.data(), nullptr, 1, 3);
  const std::vector<float> rb(r.logits() + 32, r.logits() + 48);
  EXPECT_GT(rel_err(ra, rb), 1e-4);
}

// ------------------------------------------------------------ refusals

void expect_error(const fs::path& dir, const std::string& file, const std::string& field) {
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
  EXPECT_NE(msg.find(field), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ImportErrors, ConfigFieldsTheEngineCannotExpress) {
  struct Case {
    const char* layout;
    const char* field;
    nlohmann::json value;
  };
  const std::vector<Case> cases = {
      {"hf_hymba", "rope_type", "dynamic_ntk"},
      {"hf_hymba", "kq_norm", "rms"},
      {"hf_hymba", "num_experts", 2},
      {"hf_hymba", "mamba_proj_bias", true},
      {"hf_hymba", "attn_hidden_size", 12},
      {"hf_hymba", "layer_type", {"h", "a", "h", "h"}},
      {"hf_hymba", "conv_dim", {{"0", 7}}},
      {"hf_hymba", "memory_tokens_interspersed_every", 4},
      {"hf_hymba", "kv_reuse_every_i_layer", 2},
      {"hf_hymba", "unknown_knob", 1},
      {"hf_hymba", "hidden_size", "eight"},
      {"hf_hymba", "architectures", {"LlamaForCausalLM"}},
      {"hf_mamba", "use_bias", true},
      {"hf_mamba", "rms_norm", false},
      {"hf_mamba", "d_model", 16},
      {"hf_mamba", "ssm_cfg", {{"d_state", 8}}},
      {"state_spaces_mamba", "d_intermediate", 64},
      {"state_spaces_mamba", "attn_layer_idx", {1}},
      {"state_spaces_mamba", "rms_norm", false},
  };
  for (const Case& c : cases) {
    const fs::path d = copy_fixture(c.layout, "bad");
    edit_config(d, [&](nlohmann::json& j) { j[c.field] = c.value; });
    SCOPED_TRACE(std::string(c.layout) + " " + c.field);
    expect_error(d, (d / "config.json").string(), c.field);
    fs::remove_all(d);
  }
  const fs::path d = copy_fixture("state_spaces_mamba", "mamba2");
  edit_config(d, [](nlohmann::json& j) { j["ssm_cfg"]["layer"] = "Mamba2"; });
  expect_error(d, (d / "config.json").string(), "ssm_cfg");
  fs::remove_all(d);
}

TEST(ImportErrors, WeightFiles) {
  {  // a shard listed in the index is missing
    const fs::path d = copy_fixture("hf_mamba", "shard");
    fs::remove(d / "model-00002-of-00002.safetensors");
    expect_error(d, "model-00002-of-00002.safetensors", "missing");
    fs::remove_all(d);
  }
  {  // the index names a tensor its shard lacks
    const fs::path d = copy_fixture("hf_mamba", "index");
    edit_config(d, [](nlohmann::json& j) { j["weight_map"]["backbone.extra.weight"] = "model-00001-of-00002.safetensors"; },
                "model.safetensors.index.json");
    expect_error(d, "model-00001-of-00002.safetensors", "backbone.extra.weight");
    fs::remove_all(d);
  }
  {  // the config says untied but the file has no lm_head
    const fs::path d = copy_fixture("hf_hymba", "untied");
    edit_config(d, [](nlohmann::json& j) { j["tie_word_embeddings"] = false; });
    expect_error(d, "model.safetensors", "lm_head.weight");
    fs::remove_all(d);
  }
  {  // a shape that disagrees with the config
    const fs::path d = copy_fixture("hf_hymba", "shape");
    edit_config(d, [](nlohmann::json& j) { j["intermediate_size"] = 12; });
    expect_error(d, "model.safetensors", "gate_proj.weight");
    fs::remove_all(d);
  }
  {  // state-spaces vocabulary padding: 45 rounded to a multiple of 32 is 64 rows, the file has 48
    const fs::path d = copy_fixture("state_spaces_mamba", "pad");
    edit_config(d, [](nlohmann::json& j) { j["pad_vocab_size_multiple"] = 32; });
    expect_error(d, "model.safetensors", "backbone.embedding.weight");
    fs::remove_all(d);
  }
  {  // a truncated pytorch_model.bin
    const fs::path d = copy_fixture("state_spaces_mamba_bin", "truncated");
    fs::resize_file(d / "pytorch_model.bin", fs::file_size(d / "pytorch_model.bin") / 2);
    expect_error(d, "pytorch_model.bin", "zip");
    fs::remove_all(d);
  }
}

TEST(ImportErrors, PickleThatWouldRunCodeIsRefused) {
  // {"weight": tensor, "hook": os.system}: unpickling would import os.system.
  const std::string path = kRoot + "/pickle_with_code/pytorch_model.bin";
  try {
    TorchCheckpoint::open(path);
    FAIL() << "opened a pickle that refers to os.system";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("system"), std::string::npos) << msg;
  }
}

TEST(Import, TorchCheckpointTensorsShareStorage) {
  const TorchCheckpoint c = TorchCheckpoint::open(kRoot + "/state_spaces_mamba_bin/pytorch_model.bin");
  const SafetensorsEntry* head = c.find("lm_head.weight");
  const SafetensorsEntry* emb = c.find("backbone.embedding.weight");
  ASSERT_NE(head, nullptr);
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(head->begin, emb->begin);  // tied: one storage, two names
  EXPECT_EQ(emb->dtype, "F32");
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{56, 8}));
  EXPECT_EQ(c.read_f32("lm_head.weight"), c.read_f32("backbone.embedding.weight"));
}

// torch.save({'state_dict': sd, 'epoch': 3}): the reader once freed the outer dict
// while iterating over it (a use-after-free on ordinary files; ASan catches it).
TEST(Import, TorchCheckpointUnwrapsAStateDictInsideADict) {
  const TorchCheckpoint plain = TorchCheckpoint::open(kRoot + "/state_spaces_mamba_bin/pytorch_model.bin");
  const TorchCheckpoint wrapped = TorchCheckpoint::open(kRoot + "/torch_save_wrapped/pytorch_model.bin");
  ASSERT_EQ(wrapped.entries().size(), plain.entries().size());
  for (const SafetensorsEntry& e : plain.entries()) {
    const SafetensorsEntry* w = wrapped.find(e.name);
    ASSERT_NE(w, nullptr) << e.name;
    EXPECT_EQ(w->shape, e.shape) << e.name;
    EXPECT_EQ(wrapped.read_f32(e.name), plain.read_f32(e.name)) << e.name;
  }
}

TEST(ImportErrors, CorruptTorchFilesAreErrorsNeverCrashes) {
  const std::string good = read_file(kRoot + "/state_spaces_mamba_bin/pytorch_model.bin");
  const fs::path d = temp_dir("corrupt_bin");
  const std::string path = (d / "pytorch_model.bin").string();
  int refused = 0, opened = 0;
  for (size_t at = 0; at < good.size(); at += 61) {
    for (const bool cut : {true, false}) {
      std::string bad = good;
      if (cut) bad.resize(at);
      else bad[at] = static_cast<char>(bad[at] ^ 0x5A);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;  // no fsync: fast
      try {
        const TorchCheckpoint c = TorchCheckpoint::open(path);
        for (const SafetensorsEntry& e : c.entries()) c.read_f32(e.name);
        ++opened;  // a flipped byte inside tensor data is still a valid file
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(opened, 0);
  fs::remove_all(d);
}

// Rewrites a safetensors file in F32, letting `edit` change any tensor's values.
void rewrite_weights(const fs::path& file, const std::function<void(const std::string&, std::vector<float>&)>& edit) {
  const SafetensorsFile f = SafetensorsFile::open(file.string());
  std::vector<std::vector<float>> data;
  std::vector<NamedTensor> tensors;
  for (const SafetensorsEntry& e : f.entries()) data.push_back(f.read_f32(e.name));
  size_t i = 0;
  for (const SafetensorsEntry& e : f.entries()) {
    edit(e.name, data[i]);
    Shape s;
    s.rank = static_cast<int>(e.shape.size());
    for (int k = 0; k < s.rank; ++k) s.dims[k] = e.shape[static_cast<size_t>(k)];
    tensors.push_back({e.name, s, data[i].data()});
    ++i;
  }
  save_safetensors(file.string(), tensors);
}

TEST(ImportErrors, NonFiniteWeightsNameTheTensor) {
  const fs::path d = copy_fixture("hf_hymba", "nan");
  const std::string bad = "model.final_layernorm.weight";
  rewrite_weights(d / "model.safetensors", [&](const std::string& name, std::vector<float>& v) {
    if (name == bad) v[1] = std::numeric_limits<float>::infinity();
  });
  expect_error(d, "model.safetensors", bad);
  fs::remove_all(d);
}

TEST(ImportErrors, TiedHeadThatDiffersFromTheEmbedding) {
  // Rewrite the state-spaces file with an lm_head that is not the embedding.
  const fs::path d = copy_fixture("state_spaces_mamba", "tied");
  rewrite_weights(d / "model.safetensors", [](const std::string& name, std::vector<float>& v) {
    if (name == "lm_head.weight") v[5] += 1.0f;
  });
  expect_error(d, "model.safetensors", "lm_head.weight");
  edit_config(d, [](nlohmann::json& j) { j["tie_embeddings"] = false; });  // untied: loads
  EXPECT_EQ(load_error(d), "(loaded)");
  fs::remove_all(d);
}

TEST(ImportErrors, ExportRefusesWhatHfCannotExpress) {
  ModelConfig c = load_config_file(kRoot + "/hf_hymba/config.json");
  c.fusion = Fusion::kConcat;
  c.resolve();
  try {
    hf_config_json(c, 1, 2, 0);
    FAIL() << "exported a concat-fusion model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fusion'"), std::string::npos) << e.what();
  }
  ModelConfig w = load_config_file(kRoot + "/hf_hymba/config.json");
  w.sliding_window_inclusive = false;
  w.sliding_window = 1;
  w.resolve();
  EXPECT_THROW(hf_config_json(w, 1, 2, 0), Error);
  w.sliding_window = 4;  // ours with 4 keys is theirs with W = 3
  w.resolve();
  EXPECT_EQ(hf_config_json(w, 1, 2, 0)["sliding_window"], 3);
  // The seeds' leaks have no released form: refused naming the field.
  for (const char* leak : {"sliding_window_symmetric", "meta_tokens_see_all"}) {
    ModelConfig l = load_config_file(kRoot + "/hf_hymba/config.json");
    (leak == std::string("sliding_window_symmetric") ? l.sliding_window_symmetric : l.meta_tokens_see_all) = true;
    l.resolve();
    try {
      hf_config_json(l, 1, 2, 0);
      FAIL() << "exported " << leak;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(leak), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hymba
