// Hostile input at the library level: size products that overflow, JSON with
// duplicate keys or out-of-range numbers, typed train_state fields,
// overlapping or non-finite safetensors, memory estimates, stale temporary
// files. Each refusal must be one line naming the field, file or tensor.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "formats/checkpoint.h"
#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/params.h"
#include "core/safetensors.h"
#include "core/system_memory.h"
#include "data/corpus.h"
#include "model/config.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/presets.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::expect_error;

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_bad_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  fs::path dir_;
};

json small_attention_config() {
  return {{"vocab_size", 64}, {"hidden_size", 16}, {"num_hidden_layers", 1}, {"layer_types", "attention"},
          {"num_attention_heads", 2}, {"num_key_value_heads", 2}};
}

TEST(Checked, ArithmeticRefusesWraparound) {
  EXPECT_EQ(checked_mul(1 << 20, 1 << 20, "x"), int64_t{1} << 40);
  EXPECT_EQ(checked_product({3, 5, 7}, "x"), 105);
  expect_error([] { checked_mul(int64_t{1} << 62, 4, "fields a x b"); }, {"fields a x b", "overflows"});
  expect_error([] { checked_add(std::numeric_limits<int64_t>::max(), 1, "sum"); }, {"sum", "overflows"});
  expect_error([] { checked_product({1 << 30, 1 << 30, 1 << 30}, "volume"); }, {"volume", "overflows"});
}

// Sizes whose products would overflow are above the dimension bounds
// (config.h, docs/security.md): refused naming the field and the bound.
TEST(ConfigSizes, OverflowingSizesNameTheFields) {
  struct Case {
    json patch;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{{"vocab_size", std::numeric_limits<int64_t>::max()}}, {"'vocab_size'", "<= 16777216"}},
      {{{"vocab_size", int64_t{1} << 62}, {"hidden_size", 4}}, {"'vocab_size'", "<="}},
      {{{"num_memory_tokens", int64_t{1} << 61}}, {"'num_memory_tokens'", "<="}},
      {{{"intermediate_size", int64_t{1} << 60}}, {"'intermediate_size'", "<="}},
      {{{"qk_head_dim", int64_t{1} << 62}}, {"'qk_head_dim'", "<="}},
      {{{"layer_types", "mamba"}, {"num_attention_heads", 0}, {"mamba_expand", int64_t{1} << 60}},
       {"'mamba_expand'", "<="}},
      {{{"layer_types", "mamba"}, {"num_attention_heads", 0}, {"mamba_d_state", int64_t{1} << 62}},
       {"'mamba_d_state'", "<="}},
      {{{"num_hidden_layers", int64_t{1} << 40}}, {"num_hidden_layers", "<="}},
  };
  for (const Case& c : cases) {
    json j = small_attention_config();
    j.update(c.patch);
    SCOPED_TRACE(j.dump());
    expect_error([&] { ModelConfig::from_json(j, "cfg.json"); }, c.parts);
    expect_error([&] { ModelConfig::from_json(j, "cfg.json"); }, {"cfg.json"});
  }
}

TEST(ConfigSizes, ErrorsNameTheFieldTheUserWrote) {
  // mamba_expand 0 used to be reported as the derived v_head_dim.
  json j = {{"hidden_size", 32}, {"num_hidden_layers", 1}, {"mamba_expand", 0}, {"num_attention_heads", 4},
            {"num_key_value_heads", 4}};
  expect_error([&] { ModelConfig::from_json(j, "me.json"); }, {"me.json", "'mamba_expand'", ">= 1"});
}

TEST(ConfigSizes, ParamTableRefusesTotalsThatOverflow) {
  ParamTable t;
  t.add("a", Shape{int64_t{1} << 31, int64_t{1} << 31}, InitRule::zeros());
  expect_error([&] { t.add("b", Shape{int64_t{1} << 62, 4}, InitRule::zeros()); }, {"'b'", "overflows"});
  expect_error([&] { t.add("c", Shape{int64_t{1} << 62, 2}, InitRule::zeros()); }, {"'c'", "overflows"});
  // Each row fits, the sum does not.
  ParamTable u;
  u.add("d", Shape{int64_t{1} << 61, 2}, InitRule::zeros());
  u.add("e", Shape{int64_t{1} << 61, 1}, InitRule::zeros());
  expect_error([&] { u.add("f", Shape{int64_t{1} << 61, 1}, InitRule::zeros()); },
               {"parameter count", "num_hidden_layers", "'f'", "overflows"});
}

TEST_F(BadInput, JsonDuplicateKeysAtAnyDepthAreRefused) {
  expect_error([&] { read_json_file(write("a.json", R"({"vocab_size": 1, "vocab_size": 2})")); },
               {"a.json", "key 'vocab_size' twice"});
  expect_error([&] { read_json_file(write("b.json", R"({"run": {"lr": 1, "batch": 2, "lr": 3}})")); },
               {"b.json", "field 'run'", "key 'lr' twice"});
  // The same key in two different objects is fine.
  const json ok = read_json_file(write("c.json", R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})"));
  EXPECT_EQ(ok["b"]["x"], 2);
}

TEST_F(BadInput, JsonParseProblemsAreOneLineNamingFileAndField) {
  expect_error([&] { read_json_file(write("big.json", R"({"hidden_size": 16, "rms_norm_eps": 1e400})")); },
               {"big.json", "field 'rms_norm_eps'", "1e400"});
  expect_error([&] { read_json_file(write("deep.json", R"({"run": {"list": [1, 2, 1e999]}})")); },
               {"deep.json", "field 'run.list[2]'", "1e999"});
  expect_error([&] { read_json_file(write("cut.json", R"({"hidden_size": )")); }, {"cut.json", "not valid JSON"});
  // No raw "[json.exception...]" tags reach the user.
  try {
    read_json_file(path("big.json"));
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("[json.exception"), std::string::npos) << e.what();
  }
  expect_error([&] { load_config_file(path("big.json")); }, {"big.json", "rms_norm_eps"});
}

TEST_F(BadInput, JsonlLinesGoThroughTheSameReader) {
  const std::string big = write("big.jsonl", "{\"text\": \"a b c\"}\n{\"text\": \"d\", \"score\": 1e400}\n");
  expect_error([&] { read_documents(big); }, {"big.jsonl:2", "field 'score'", "1e400"});
  const std::string dup = write("dup.jsonl", "{\"text\": \"a\", \"text\": \"b\"}\n");
  expect_error([&] { read_documents(dup); }, {"dup.jsonl:1", "key 'text' twice"});
}

TEST(JsonFieldsTest, TypedGettersNameTheField) {
  const json j = json::parse(R"({"step": "ten", "tokens": 5, "loss": null, "run": {"lr": "high"}, "flag": 1})");
  const JsonFields f(j, "state.json");
  EXPECT_EQ(f.i64("tokens"), 5);
  EXPECT_EQ(f.f64_or_null("loss", -1.0), -1.0);
  expect_error([&] { f.i64("step"); }, {"state.json", "field 'step'", "an integer", "\"ten\""});
  expect_error([&] { f.f64("missing"); }, {"state.json", "field 'missing'", "is missing"});
  expect_error([&] { f.object("run").f64("lr"); }, {"field 'run.lr'", "a number"});
  expect_error([&] { f.object("tokens"); }, {"field 'tokens'", "an object"});
  expect_error([&] { f.boolean("flag"); }, {"field 'flag'", "true or false"});
  expect_error([&] { f.str("tokens"); }, {"field 'tokens'", "a string"});
}

// A safetensors file from a header and raw data (header padded to 8 bytes).
void write_safetensors(const std::string& p, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  std::ofstream(p, std::ios::binary) << bytes << header << data;
}

TEST_F(BadInput, OverlappingTensorsAreRefusedNamingBoth) {
  const std::string data(32, '\0');
  write_safetensors(path("o.safetensors"),
                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                    data);
  expect_error([&] { SafetensorsFile::open(path("o.safetensors")); }, {"o.safetensors", "'a'", "'b'", "overlap"});
  // Same range twice, and a tensor nested inside another.
  write_safetensors(path("same.safetensors"),
                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                    data);
  expect_error([&] { SafetensorsFile::open(path("same.safetensors")); }, {"'a'", "'b'", "overlap"});
  write_safetensors(path("inner.safetensors"),
                    R"({"big":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                    R"("small":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    data);
  expect_error([&] { SafetensorsFile::open(path("inner.safetensors")); }, {"'big'", "'small'", "overlap"});
  // Adjacent tensors and empty ones anywhere are fine.
  write_safetensors(path("ok.safetensors"),
                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})",
                    data);
  EXPECT_EQ(SafetensorsFile::open(path("ok.safetensors")).entries().size(), 3u);
}

// The offsets must cover the data buffer exactly: a header length shorter
// than its padded JSON still parses, and would read every tensor from the
// wrong place; so would a gap between tensors.
TEST_F(BadInput, DataOffsetsMustCoverTheBufferExactly) {
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append(16, ' ');  // the padding a writer may add
  const std::string data(8, '\x11');
  auto write_with_length = [&](const std::string& name, uint64_t length) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(length >> (8 * i));
    std::ofstream(path(name), std::ios::binary) << bytes << header << data;
  };
  write_with_length("exact.safetensors", header.size());
  EXPECT_EQ(SafetensorsFile::open(path("exact.safetensors")).entries().size(), 1u);
  write_with_length("short.safetensors", header.size() - 8);  // the JSON still parses
  expect_error([&] { SafetensorsFile::open(path("short.safetensors")); },
               {"short.safetensors", "cover 8 bytes of a 16-byte data buffer", "header length"});
  write_safetensors(path("gap.safetensors"),
                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                    std::string(24, '\0'));
  expect_error([&] { SafetensorsFile::open(path("gap.safetensors")); },
               {"gap.safetensors", "bytes [8,16)", "belong to no tensor", "'b'"});
  write_safetensors(path("late.safetensors"), R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    std::string(16, '\0'));
  expect_error([&] { SafetensorsFile::open(path("late.safetensors")); }, {"bytes [0,8)", "'a'"});
}

TEST_F(BadInput, NonFiniteWeightsAreRefusedNamingTensorAndIndex) {
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    ParamTable t;
    t.add("w", Shape{2, 3}, InitRule::normal(1.0f));
    t.add("v", Shape{5}, InitRule::ones());
    t.allocate(false, false);
    t.init(Rng(1));
    t.value("v").data[3] = bad;
    save_params(path("m.safetensors"), t);
    ParamTable u;
    u.add("w", Shape{2, 3}, InitRule::zeros());
    u.add("v", Shape{5}, InitRule::zeros());
    u.allocate(false, false);
    expect_error([&] { load_params(path("m.safetensors"), u); }, {"m.safetensors", "tensor 'v'", "index 3"});
  }
}

// The arena's high-water mark after one forward (and backward, when
// training) of B x T ids: what the activation estimate must match.
double arena_peak_after_a_step(const ModelConfig& cfg, int64_t B, int64_t T, bool training, bool recompute,
                               bool keep_final_ssm_state) {
  Model model(cfg, training);
  model.init(3);
  std::vector<int32_t> ids(B * T), targets(B * T);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>(i * 7 % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(i * 5 % cfg.vocab_size);
  }
  const Rng drop(5);
  ForwardOptions fo;
  if (training) fo.dropout_rng = &drop;
  fo.recompute = recompute;
  fo.keep_final_ssm_state = keep_final_ssm_state;
  model.forward(ids.data(), targets.data(), B, T, fo);
  if (training) model.backward();
  return static_cast<double>(model.activation_bytes());
}

// The estimate is close to what a real forward and backward use, for every
// mixer kind, fusion and option that allocates (inference here without the
// final SSM state the estimate counts for the decoder's prefill).
TEST(MemoryEstimateTest, ActivationEstimateMatchesTheArena) {
  const std::vector<std::string> presets = {"hybrid-official", "hybrid-mine", "mamba-only", "transformer-local",
                                            "roadmap-05", "official-nometa", "gpt-baseline"};
  for (const std::string& name : presets) {
    for (const int mode : {0, 1, 2}) {  // training, inference, training with recompute
      const bool training = mode != 1, recompute = mode == 2;
      SCOPED_TRACE(name + (recompute ? " recompute" : training ? " training" : " inference"));
      json j = preset_config(name, Scale::kTiny).to_json();
      j["dropout"] = training ? 0.1 : 0.0;
      const ModelConfig cfg = ModelConfig::from_json(j, name);
      const int64_t B = 3, T = 37;
      const double actual = arena_peak_after_a_step(cfg, B, T, training, recompute, false);
      const double estimate = activation_bytes(cfg, B, T, training, recompute);
      std::printf("%s %s: estimate/actual %.4f\n", name.c_str(), recompute ? "recompute" : training ? "train" : "infer",
                  estimate / actual);
      EXPECT_GE(estimate, 0.99 * actual) << "estimate " << estimate << " actual " << actual;
      EXPECT_LE(estimate, 1.05 * actual) << "estimate " << estimate << " actual " << actual;
    }
  }
}

// The estimate runs the arena's own plan (model/arena_plan.h) through a
// sizing arena, so it equals the arena's high-water mark exactly: for every
// mixer kind, fusion, block link, norm, FFN or none, dropout, training,
// inference and recompute. A buffer the forward or the backward took from the
// arena outside the plan breaks the equality.
TEST(MemoryEstimateTest, ActivationEstimateEqualsTheArenaExactly) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"hybrid-official", json::object()},  // fused, norm_mean, inner norms, meta tokens, KV sharing
      {"hybrid-mine", json::object()},      // separate projections, learned beta
      {"mamba-only", json::object()},
      {"transformer-local", json::object()},
      {"roadmap-05", json::object()},
      {"official-nometa", json::object()},
      {"gpt-baseline", json::object()},  // LayerNorm, GELU MLP
      {"hybrid-mine", {{"fusion", "mean"}}},
      {"hybrid-mine", {{"fusion", "concat"}, {"block_layers", 2}, {"block_link", "gated"}}},
      {"hybrid-official", {{"block_layers", 3}, {"block_link", "residual"}}},
      {"mamba-only", {{"intermediate_size", 0}}},  // no FFN: x_out is x_mid
  };
  for (const auto& [name, overrides] : cases) {
    for (const int mode : {0, 1, 2, 3}) {  // training, inference, recompute, training without dropout
      const bool training = mode != 1, recompute = mode == 2;
      SCOPED_TRACE(name + " " + overrides.dump() + " mode " + std::to_string(mode));
      json j = preset_config(name, Scale::kTiny).to_json();
      j.update(overrides);
      j["dropout"] = training && mode != 3 ? 0.1 : 0.0;
      const ModelConfig cfg = ModelConfig::from_json(j, name);
      const int64_t B = 2, T = 45;
      // The estimate's inference is the decoder's prefill, which keeps the final SSM state.
      EXPECT_EQ(activation_bytes(cfg, B, T, training, recompute),
                arena_peak_after_a_step(cfg, B, T, training, recompute, !training));
    }
  }
}

TEST(MemoryEstimateTest, RefusalNamesTheFigureAndWhatToLower) {
  const ModelConfig cfg = preset_config("hybrid-official", Scale::kTiny);
  const MemoryEstimate m = model_run_memory(cfg, 1 << 20, 1 << 20, true);
  EXPECT_GT(m.total(), 1e15);
  expect_error([&] { m.require_available("training"); }, {"training needs about", "PiB", "available", "--batch"});
  // The parameters alone: the config field to lower.
  ParamTable t;
  t.add("model.embed_tokens.weight", Shape{int64_t{1} << 40, 64}, InitRule::zeros(), true, "embedding");
  expect_error([&] { parameter_memory(t, true).require_available("the model"); }, {"the model", "vocab_size"});
  // Small needs pass.
  model_run_memory(cfg, 1, 8, true).require_available("training");
}

TEST(MemoryEstimateTest, HymbaMaxMemoryCapsWhatIsAvailable) {
  ::setenv("HYMBA_MAX_MEMORY", "3M", 1);
  EXPECT_EQ(available_memory_bytes(), 3 * 1024 * 1024);
  MemoryEstimate m;
  m.add("caches", 4.0 * 1024 * 1024, "--max-new-tokens");
  expect_error([&] { m.require_available("generate"); }, {"generate needs about 4.00 MiB", "3.00 MiB", "--max-new-tokens"});
  ::setenv("HYMBA_MAX_MEMORY", "lots", 1);
  expect_error([] { available_memory_bytes(); }, {"HYMBA_MAX_MEMORY"});
  ::unsetenv("HYMBA_MAX_MEMORY");
  EXPECT_GT(available_memory_bytes(), 0);
  EXPECT_EQ(format_bytes(1536.0 * 1024 * 1024), "1.50 GiB");
}

TEST_F(BadInput, StaleTemporaryFilesOfDeadWritersAreRemoved) {
  // A pid that surely exited: a child we waited for.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  fs::create_directories(path("ckpt-10"));
  const std::string stale1 = write("metrics.jsonl.tmp." + std::to_string(dead), "x");
  const std::string stale2 = write("ckpt-10/model.safetensors.tmp." + std::to_string(dead), "x");
  const std::string live = write("summary.json.tmp." + std::to_string(::getppid()), "x");  // a live process
  const std::string other = write("notes.tmp.txt", "x");
  EXPECT_EQ(remove_stale_temp_files(dir_.string()), 2);
  EXPECT_FALSE(fs::exists(stale1));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}

}  // namespace
}  // namespace hymba
