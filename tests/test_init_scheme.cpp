// Init schemes (config init_scheme): every tensor's empirical statistics
// against the documented rule, the default scheme unchanged bit for bit, the
// config and checkpoint round trip, and bad values refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"
#include "formats/checkpoint.h"
#include "model/layout.h"
#include "model/model.h"
#include "synth/trainer.h"
#include "test_util.h"

namespace hymba {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr InitScheme kSchemes[] = {InitScheme::kNormal, InitScheme::kTorch, InitScheme::kMambaSsm};

// Three models covering every kind of tensor at different widths and depths:
// a fused hybrid with FFN, meta tokens and an untied head; a sequential
// hybrid of separate-projection layers with a gated link; a pure Mamba (HF names).
json fused_hybrid() {
  return {{"vocab_size", 37},          {"hidden_size", 32},           {"num_hidden_layers", 4},
          {"layer_types", "hybrid"},   {"num_attention_heads", 4},    {"num_key_value_heads", 2},
          {"mamba_d_state", 8},        {"intermediate_size", 48},     {"num_memory_tokens", 3},
          {"tie_word_embeddings", false}, {"mamba_inner_layernorms", true}, {"global_attn_idx", {0, 3}},
          {"sliding_window", 4},       {"kv_reuse_group", "auto"}};
}
json sequential_hybrid() {
  return {{"vocab_size", 29},
          {"hidden_size", 24},
          {"num_hidden_layers", 4},
          {"layer_types", {"hybrid", "mamba", "attention", "mamba"}},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 2},
          {"proj_style", "separate"},
          {"fusion", "learned_beta"},
          {"intermediate_size", 40},
          {"block_layers", 2},
          {"block_link", "gated"}};
}
json pure_mamba() {
  return {{"vocab_size", 50},        {"hidden_size", 40},       {"num_hidden_layers", 3},
          {"layer_types", "mamba"}, {"intermediate_size", 0}, {"initializer_range", 0.05}};
}

ModelConfig with_scheme(json j, InitScheme s) {
  j["init_scheme"] = to_string(s);
  return ModelConfig::from_json(j);
}

ParamTable initialised(const ModelConfig& cfg, uint64_t seed) {
  ParamTable t;
  declare_parameters(cfg, t);
  t.allocate(false, false);
  t.init(Rng(seed));
  return t;
}

// FNV-1a over every row's name and float bits, in table order.
uint64_t params_hash(const ModelConfig& cfg, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint8_t byte) { h = (h ^ byte) * 0x100000001b3ull; };
  initialised(cfg, seed).for_each([&](const ParamInfo& p, const float* v) {
    for (char c : p.name) mix(static_cast<uint8_t>(c));
    for (int64_t i = 0; i < p.shape.numel(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, v + i, sizeof bits);
      for (int k = 0; k < 4; ++k) mix(static_cast<uint8_t>(bits >> (8 * k)));
    }
  });
  return h;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool ends_with_any(const std::string& s, std::initializer_list<const char*> tails) {
  for (const char* t : tails)
    if (ends_with(s, t)) return true;
  return false;
}

// What the docs promise for a tensor, written here from the PyTorch /
// mamba_ssm definitions rather than taken from layout.cpp.
struct Expected {
  enum Kind { kNormal, kUniform, kConstant, kSameInEveryScheme } kind = kSameInEveryScheme;
  double a = 0;  // std, bound or value
};

Expected expected(const ModelConfig& c, InitScheme s, const ParamInfo& p) {
  const double range = c.initializer_range, layers = static_cast<double>(c.num_hidden_layers);
  const double fan_in = p.shape.rank == 2 ? static_cast<double>(p.shape[1]) : 0.0;
  const double kaiming = fan_in > 0 ? 1.0 / std::sqrt(fan_in) : 0.0;
  const std::string& n = p.name;
  if (ends_with_any(n, {"embed_tokens.weight", "embeddings.weight", "memory_tokens"}))
    return {Expected::kNormal, s == InitScheme::kTorch ? 1.0 : range};
  if (ends_with_any(n, {"o_proj.weight", "out_proj.weight", "down_proj.weight"})) {
    if (s == InitScheme::kNormal) return {Expected::kNormal, range / std::sqrt(2.0 * layers)};
    if (s == InitScheme::kTorch) return {Expected::kUniform, kaiming};
    const double residuals_per_layer = c.intermediate_size > 0 ? 2.0 : 1.0;
    return {Expected::kUniform, kaiming / std::sqrt(residuals_per_layer * layers)};
  }
  if (ends_with_any(n, {"q_proj.weight", "k_proj.weight", "v_proj.weight", "in_proj.weight", "x_proj.weight",
                        "x_proj.0.weight", "gate_proj.weight", "up_proj.weight", "link_gate.weight",
                        "lm_head.weight"}))
    return s == InitScheme::kNormal ? Expected{Expected::kNormal, range} : Expected{Expected::kUniform, kaiming};
  if (ends_with(n, "link_gate.bias")) {
    const double d = static_cast<double>(c.hidden_size);
    return s == InitScheme::kTorch ? Expected{Expected::kUniform, 1.0 / std::sqrt(d)} : Expected{Expected::kConstant, 0.0};
  }
  return {};
}

void check_statistics(const ParamInfo& p, const float* v, const Expected& e) {
  const int64_t n = p.shape.numel();
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += v[i];
    sum_sq += static_cast<double>(v[i]) * v[i];
    max_abs = std::max(max_abs, static_cast<double>(std::abs(v[i])));
  }
  const double dn = static_cast<double>(n), mean = sum / dn, std = std::sqrt(sum_sq / dn - mean * mean);
  if (e.kind == Expected::kConstant) {
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<float>(e.a)) << p.name << "[" << i << "]";
    return;
  }
  // Both draws have mean 0. A sample mean spreads by sigma/sqrt(n) and a
  // sample std by at most 0.7 sigma/sqrt(n): about 5 and 4 of those spreads
  // below, while a wrong rule is off by a factor (sqrt(2) at least).
  const double sigma = e.kind == Expected::kNormal ? e.a : e.a / std::sqrt(3.0);
  const double tol = 3.0 / std::sqrt(dn) + 0.005;
  EXPECT_NEAR(mean / sigma, 0.0, 5.0 / std::sqrt(dn)) << p.name;
  EXPECT_NEAR(std / sigma, 1.0, tol) << p.name << " " << p.shape.str() << ": std " << std << ", expected " << sigma;
  if (e.kind == Expected::kUniform) {
    // Inside the bound and reaching near it (the largest of n draws).
    EXPECT_LE(max_abs, e.a * (1 + 1e-6)) << p.name;
    EXPECT_GE(max_abs, e.a * std::max(0.5, 1.0 - 8.0 / dn)) << p.name;
  } else if (n >= 200) {
    EXPECT_GT(max_abs, 2.0 * sigma) << p.name << ": tails too short for a normal draw";
  }
}

TEST(InitScheme, EveryTensorFollowsItsRule) {
  for (const json& j : {fused_hybrid(), sequential_hybrid(), pure_mamba()}) {
    for (InitScheme s : kSchemes) {
      SCOPED_TRACE(std::string("scheme ") + to_string(s));
      const ModelConfig c = with_scheme(j, s);
      int checked = 0;
      initialised(c, 7).for_each([&](const ParamInfo& p, const float* v) {
        const Expected e = expected(c, s, p);
        if (e.kind == Expected::kSameInEveryScheme) return;
        ++checked;
        check_statistics(p, v, e);
      });
      EXPECT_GE(checked, 8);
    }
  }
}

// Norms, fusion betas and Mamba's own tensors (conv, dt_proj, A_log, D) are
// drawn alike under every scheme.
TEST(InitScheme, SchemeFreeTensorsAreTheSameInEveryScheme) {
  for (const json& j : {fused_hybrid(), sequential_hybrid(), pure_mamba()}) {
    const ModelConfig base = with_scheme(j, InitScheme::kNormal);
    const ParamTable reference = initialised(base, 3);
    for (InitScheme s : {InitScheme::kTorch, InitScheme::kMambaSsm}) {
      const ParamTable t = initialised(with_scheme(j, s), 3);
      int compared = 0;
      t.for_each([&](const ParamInfo& p, const float* v) {
        if (expected(base, s, p).kind != Expected::kSameInEveryScheme) return;
        ++compared;
        const Tensor r = reference.value(p.name);
        EXPECT_EQ(std::memcmp(v, r.data, static_cast<size_t>(p.shape.numel()) * sizeof(float)), 0) << p.name;
      });
      EXPECT_GE(compared, 8);
    }
  }
}

// The default scheme draws exactly what the engine drew before schemes existed:
// hashes recorded from that code (commit 0250040) for seed 1234.
TEST(InitScheme, DefaultIsBitIdenticalToTheEarlierInit) {
  const uint64_t before[] = {0xd0297e1e83bcd46aull, 0x12163f7784ca53daull, 0x264c5cd8aa8eb24bull};
  const json configs[] = {fused_hybrid(), sequential_hybrid(), pure_mamba()};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(params_hash(ModelConfig::from_json(configs[i]), 1234), before[i]) << "config " << i;
    EXPECT_EQ(params_hash(with_scheme(configs[i], InitScheme::kNormal), 1234), before[i]) << "config " << i;
    EXPECT_NE(params_hash(with_scheme(configs[i], InitScheme::kTorch), 1234), before[i]) << "config " << i;
  }
}

TEST(InitScheme, ConfigAndCheckpointRoundTrip) {
  for (InitScheme s : kSchemes) {
    const ModelConfig c = with_scheme(pure_mamba(), s);
    EXPECT_EQ(c.init_scheme, s);
    const json out = c.to_json();
    // The default is left out, so configs written before the field existed read back unchanged.
    EXPECT_EQ(out.contains("init_scheme"), s != InitScheme::kNormal);
    EXPECT_EQ(ModelConfig::from_json(out).init_scheme, s);
  }
  const fs::path dir = fs::temp_directory_path() / ("hymba_init_scheme_" + std::to_string(::getpid()));
  Model m(with_scheme(sequential_hybrid(), InitScheme::kMambaSsm), false);
  m.init(5);
  save_model(dir.string(), m);
  EXPECT_EQ(load_config_file((dir / "config.json").string()).init_scheme, InitScheme::kMambaSsm);
  const auto loaded = load_model(dir.string(), false);
  EXPECT_EQ(loaded->config().init_scheme, InitScheme::kMambaSsm);
  fs::remove_all(dir);
}

TEST(InitScheme, BadValuesAreRefused) {
  json j = pure_mamba();
  j["init_scheme"] = "kaiming";
  test::expect_error([&] { ModelConfig::from_json(j, "my.json"); },
                     {"my.json", "'init_scheme'", "normal, torch, mamba_ssm", "kaiming"});
  j["init_scheme"] = 1;
  test::expect_error([&] { ModelConfig::from_json(j, "my.json"); }, {"my.json", "'init_scheme'", "a string"});
  test::expect_error([&] { synth::ArchSpec::from_json({{"init_scheme", "pytorch"}}, {}, "suite.json"); },
                     {"--init-scheme", "pytorch", "normal, torch, mamba_ssm"});
}

TEST(InitScheme, SynthModelsCarryTheScheme) {
  synth::ArchSpec a;
  a.kind = synth::ArchKind::kMamba;
  EXPECT_EQ(synth::make_model_config(a, 16).init_scheme, InitScheme::kNormal);
  EXPECT_FALSE(a.to_json().contains("init_scheme"));  // results stored before the option still match
  a = synth::ArchSpec::from_json({{"init_scheme", "mamba_ssm"}}, a, "suite.json");
  EXPECT_EQ(synth::make_model_config(a, 16).init_scheme, InitScheme::kMambaSsm);
  EXPECT_EQ(a.to_json().at("init_scheme"), "mamba_ssm");
}

TEST(InitScheme, CliFlags) {
  const test::CliResult info = test::run_cli("info --preset mamba-only --scale tiny --init-scheme torch");
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("init: torch: PyTorch module defaults"), std::string::npos) << info.output;
  const test::CliResult plain = test::run_cli("info --preset mamba-only --scale tiny");
  EXPECT_NE(plain.output.find("init: normal: "), std::string::npos) << plain.output;
  for (const std::string& cmd : {std::string("info --preset mamba-only --init-scheme xavier"),
                                 std::string("synth --task selective-copying --epochs 1 --init-scheme xavier"),
                                 std::string("ablate --suite demo --out /nonexistent/x --init-scheme xavier")}) {
    const test::CliResult r = test::run_cli(cmd);
    EXPECT_NE(r.exit_code, 0) << cmd;
    EXPECT_EQ(test::count_lines(r.output), 1) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("--init-scheme"), std::string::npos) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("xavier"), std::string::npos) << cmd << ": " << r.output;
  }
}

}  // namespace
}  // namespace hymba
