// The seeds' own metric definitions (ablate/seed_metrics.h) on hand-computed
// cases, the seed presets' parameter counts, the seed suites, seed 001's
// analysis and seed 002's table (ablate/seed_report.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ablate/long_report.h"
#include "ablate/long_suite.h"
#include "ablate/results.h"
#include "ablate/seed_metrics.h"
#include "ablate/seed_report.h"
#include "ablate/suite.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "formats/hf_import.h"
#include "model/memory_estimate.h"
#include "model/presets.h"
#include "model/summary.h"
#include "train/trainer.h"

namespace hymba {
namespace {

using nlohmann::json;

ModelConfig cfg_of(const json& j) { return ModelConfig::from_json(j, "test"); }

TEST(SeedMetrics, Seed000KvReductionIsLayersOverOwners) {
  // Seed 000's 1.88x and 1.67x: 15 layers over 8 and 9 K/V owners.
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(preset_config("seed000-transformer-local")), 15.0 / 8.0);
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(preset_config("seed000-hybrid-5050")), 15.0 / 9.0);
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(preset_config("seed000-hybrid-paper")), 15.0 / 9.0);
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(preset_config("seed000-transformer-global")), 1.0);
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(preset_config("seed000-mamba")), 1.0);  // seed 000 prints 1.00x
  // By hand: 5 attention layers, one group of three -> owners 0, 1, 4 -> 5/3;
  // no context, window or meta-token term.
  const json j = {{"num_hidden_layers", 5}, {"layer_types", "attention"}, {"hidden_size", 16},
                  {"num_attention_heads", 2}, {"num_key_value_heads", 2}, {"sliding_window", 4},
                  {"global_attn_idx", {0, 4}}, {"kv_reuse_group", {{1, 2, 3}}}, {"num_memory_tokens", 8}};
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(cfg_of(j)), 5.0 / 3.0);
  // The engine's cache ratio differs from it: at 256 tokens a 128 window
  // alone halves a layer's cache, sharing or not.
  json swa_only = j;
  swa_only["kv_reuse_group"] = json::array();
  swa_only["global_attn_idx"] = json::array();
  swa_only["num_memory_tokens"] = 0;
  swa_only["sliding_window"] = 128;
  const ModelConfig c = cfg_of(swa_only);
  EXPECT_DOUBLE_EQ(ablate::seed000_kv_reduction(c), 1.0);
  EXPECT_EQ(kv_positions(c, 0, 256), 127);  // about half of 256 kept
}

TEST(SeedMetrics, Seed002CacheIsItsEstimateAt512Tokens) {
  // Row 6 (attention only, 8 heads of 64, no GQA, 12 layers):
  // 2 x 8 x 512 x 64 x 2 bytes x 12 owners = 12 MiB.
  EXPECT_DOUBLE_EQ(ablate::seed002_cache_mb(preset_config("roadmap-06")), 12.0);
  // Row 9: ratio 1:5.23 -> attention width 80 (head dim 10), 4 KV heads,
  // KV sharing pairs all 12 layers -> 6 owners: 2 x 4 x 512 x 10 x 2 x 6 bytes.
  EXPECT_EQ(ablate::seed002_kv_owners(preset_config("roadmap-09")), 6);
  EXPECT_DOUBLE_EQ(ablate::seed002_cache_mb(preset_config("roadmap-09")), 491520.0 / 1048576.0);
  // Row 5: ratio 1:3.64 -> width 112 (head dim 14), no sharing -> 12 owners.
  EXPECT_DOUBLE_EQ(ablate::seed002_cache_mb(preset_config("roadmap-05")), 2.0 * 4 * 512 * 14 * 2 * 12 / 1048576.0);
  EXPECT_DOUBLE_EQ(ablate::seed002_cache_mb(preset_config("roadmap-01")), 0.0);  // Mamba only
  // Seed 002 pairs all layers, global ones too; the engine pairs local layers
  // only (roadmap-09 at seed scale: layers 0, 6, 11 global -> 4 groups, 8 owners).
  int64_t engine_owners = 0;
  const ModelConfig r9 = preset_config("roadmap-09");
  for (int64_t l = 0; l < r9.num_hidden_layers; ++l) engine_owners += r9.is_kv_producer(l) ? 1 : 0;
  EXPECT_EQ(engine_owners, 8);
  EXPECT_DOUBLE_EQ(ablate::seed002_cache_mb(preset_config("roadmap-09"), 1024),
                   2 * ablate::seed002_cache_mb(preset_config("roadmap-09")));
}

TEST(SeedMetrics, RatioAndShareFromConfiguredDims) {
  // Row 2: 1:8.48 of 512 with 8 heads -> 512/9.48 = 54 rounded to a multiple of 16 = 48.
  ablate::ConfiguredDims d = ablate::configured_dims(preset_config("roadmap-02"));
  EXPECT_EQ(d.ratio, "1:8.48");
  EXPECT_EQ(d.attn, 48);
  EXPECT_EQ(d.mamba, 464);
  EXPECT_DOUBLE_EQ(d.attention_share, 48.0 / 512.0);
  d = ablate::configured_dims(preset_config("hybrid-official"));  // both branches full width
  EXPECT_EQ(d.ratio, "1:1");
  EXPECT_DOUBLE_EQ(d.attention_share, 0.5);
  d = ablate::configured_dims(preset_config("mamba-only"));
  EXPECT_EQ(d.ratio, "0:1");
  EXPECT_DOUBLE_EQ(d.attention_share, 0.0);
  d = ablate::configured_dims(preset_config("transformer-global"));
  EXPECT_EQ(d.ratio, "1:0");
  EXPECT_DOUBLE_EQ(d.attention_share, 1.0);
  EXPECT_DOUBLE_EQ(ablate::seconds_per_100_tokens(50.0), 2.0);
  EXPECT_DOUBLE_EQ(ablate::seconds_per_100_tokens(0.0), 0.0);
}

TEST(SeedPresets, ParameterCountsByHand) {
  // d 384, 15 layers, vocab 4096 (tied), 6 heads of 64, 2 KV heads, SwiGLU 1152,
  // Mamba d_inner 768, dt_rank 24, d_state 16, d_conv 4.
  const int64_t d = 384, di = 768, emb = 4096 * d, ffn = d + 3 * 1152 * d;
  const int64_t mamba_core = di * 4 + di + (24 + 32) * di + di * 24 + di + di * 16 + di;  // conv, x, dt, A, D
  const int64_t attn = d + d * d + 2 * 128 * d + d * d;                                  // norm, q, k, v, o
  auto params = [](const char* p) { return summarize(preset_config(p), 1).total_params; };
  EXPECT_EQ(params("seed000-transformer-global"), emb + d + 15 * (attn + ffn));
  EXPECT_EQ(params("seed000-transformer-local"), emb + d + 15 * (attn + ffn) - 7 * 2 * 128 * d);  // 7 consumers
  EXPECT_EQ(params("seed000-mamba"), emb + d + 15 * (d + 2 * di * d + mamba_core + di * d));
  // Paper setting: separate q/k/v and Mamba in_proj, o_proj and Mamba out_proj,
  // two beta vectors; 64 meta tokens; 6 consumer layers without k/v.
  const int64_t paper = d + d * d + 2 * 128 * d + 2 * di * d + mamba_core + 2 * d + d * d + di * d + ffn;
  EXPECT_EQ(params("seed000-hybrid-paper"), emb + d + 64 * d + 15 * paper - 6 * 2 * 128 * d);
  // 50/50: fused in_proj (q 384, k 128, v 256, x and z 1536), dt/B/C norms,
  // the two pre-average norms (768 each) and one out_proj from 768.
  const int64_t fused = d + (384 + 128 + 256 + 2 * di) * d + mamba_core + (24 + 16 + 16) + 768 + di + di * d + ffn;
  EXPECT_EQ(params("seed000-hybrid-5050"), emb + d + 64 * d + 15 * fused - 6 * (128 + 256) * d);
  // Seed 003's Hymba v1 / v2: 6 and 8 layers of d 384, 6 heads, no GQA, at
  // GPT-2's vocabulary (the seed-003 presets' own).
  const int64_t v_attn = d + 4 * d * d, emb003 = 50257 * d;
  auto hymba_layer = [&](int64_t I) {
    return v_attn + 2 * di * d + mamba_core + 2 * d + di * d + d + 3 * I * d;
  };
  EXPECT_EQ(params("hymba-v1"), emb003 + d + 6 * hymba_layer(1024));
  EXPECT_EQ(params("hymba-v2"), emb003 + d + 8 * hymba_layer(1536));
}

TEST(SeedPresets, Mamba130mIsThePublishedModel) {
  // state-spaces/mamba-130m: d 768, 24 layers, d_inner 1536, dt_rank 48,
  // d_state 16, conv 4, vocab 50,280 tied: 129,135,360 parameters.
  const int64_t d = 768, di = 1536, R = 48, N = 16;
  const int64_t layer = d + 2 * di * d + (di * 4 + di) + (R + 2 * N) * di + (di * R + di) + di * N + di + di * d;
  EXPECT_EQ(50280 * d + 24 * layer + d, 129135360);
  const ModelConfig c = preset_config("mamba-130m");
  EXPECT_EQ(summarize(c, 256).total_params, 129135360);
  // The published MambaForCausalLM config.json maps to exactly the preset.
  json j = read_json_file(std::string(HYMBA_FIXTURES_DIR) + "/import/hf_mamba/config.json");
  for (const char* k : {"hidden_size", "d_model"}) j[k] = d;
  for (const char* k : {"num_hidden_layers", "n_layer"}) j[k] = 24;
  for (const char* k : {"intermediate_size", "d_inner"}) j[k] = di;
  j["state_size"] = N;
  j["vocab_size"] = 50280;
  j["tie_word_embeddings"] = true;
  const ModelConfig imported = config_from_published(j, CheckpointLayout::kHfMamba, "mamba-130m-hf");
  EXPECT_EQ(imported.to_json(), c.to_json());
  // Its tiny scale (the classify suite's default) stays a pure Mamba stack.
  const ModelConfig tiny = preset_config("mamba-130m", Scale::kTiny);
  EXPECT_EQ(tiny.num_hidden_layers, 12);
  EXPECT_EQ(tiny.hidden_size, 192);
  EXPECT_EQ(tiny.intermediate_size, 0);
}

TEST(SeedPresets, Seed003SizesAtGpt2sVocabulary) {
  // The seed's ~27M / 27M / 30M. Only GPT-2's 50,257 tokens (tied) make its
  // Mamba 27M; at that vocabulary the exact counts are these (docs/ablation.md).
  auto params = [](const char* p) { return summarize(preset_config(p), 1).total_params; };
  const int64_t d = 384, di = 768, emb = 50257 * d;
  for (const char* p : {"compare-mamba", "gpt-baseline", "compare-transformer", "hymba-v1", "hymba-v2"})
    EXPECT_EQ(preset_config(p).vocab_size, 50257) << p;
  // Mamba: norm, in_proj 2 x 768 x 384, conv 768 x 4 + 768, x_proj 768 x 56,
  // dt_proj 24 x 768 + 768, A 768 x 16, D 768, out_proj 768 x 384.
  const int64_t mamba_layer = d + 2 * di * d + (di * 4 + di) + di * 56 + (24 * di + di) + di * 16 + di + di * d;
  EXPECT_EQ(mamba_layer, 964224);
  EXPECT_EQ(params("compare-mamba"), emb + 8 * mamba_layer + d);
  EXPECT_EQ(params("compare-mamba"), 27012864);  // the seed's 27M
  EXPECT_EQ(params("gpt-baseline"), 33581184);   // seed: 27M (GELU MLP, learned positions, LayerNorm)
  // RoPE / SwiGLU: RMSNorm weights, q/k/v/o, three FFN matrices.
  EXPECT_EQ(params("compare-transformer"), emb + d + 8 * (d + 4 * d * d + d + 3 * 1536 * d));
  EXPECT_EQ(params("compare-transformer"), 38179584);
  EXPECT_EQ(params("hymba-v1"), 35708160);  // seed: 30M
  EXPECT_EQ(params("hymba-v2"), 45896448);
}

TEST(SeedSuites, BuiltInSeedSuitesAndTheirSettings) {
  const ablate::Suite s000 = ablate::load_suite("seed-000", "seed");
  ASSERT_EQ(s000.rows.size(), 5u);
  EXPECT_EQ(s000.seed, "000");
  EXPECT_EQ(s000.rows[3].name, "Hybrid (50/50)");
  EXPECT_EQ(s000.rows[4].name, "Hybrid (Paper Setting)");
  const ablate::Suite s001 = ablate::load_suite("seed-ablation", "tiny");
  EXPECT_EQ(s001.seed, "001");
  EXPECT_EQ(s001.sampling.tokens, 30);
  EXPECT_DOUBLE_EQ(s001.sampling.temperature, 0.8);
  EXPECT_EQ(s001.sampling.top_k, 40);
  EXPECT_DOUBLE_EQ(s001.sampling.top_p, 1.0);  // no top-p, as the notebook
  EXPECT_TRUE(s001.sampling.untrained);
  for (const ablate::SuiteRow& r : s001.rows)
    EXPECT_EQ(r.implementation, r.id == "hybrid-official" || r.id == "official-nometa" ? "Official" : "Mine") << r.id;
  EXPECT_DOUBLE_EQ(ablate::load_suite("demo", "tiny").sampling.top_p, 0.95);  // stated in its report
  const ablate::Suite epoch = ablate::load_suite("hymba-roadmap-epoch", "tiny");
  TrainOptions t;
  ablate::apply_train_settings(t, epoch.train, "epoch");
  EXPECT_EQ(t.steps, 150);  // the schedule's length
  EXPECT_DOUBLE_EQ(t.stop_epochs, 1.0);
  EXPECT_EQ(ablate::train_settings_json(t)["stop_epochs"], 1.0);
  const ablate::Suite s003 = ablate::load_suite("seed-003", "small");
  ASSERT_EQ(s003.rows.size(), 4u);
  EXPECT_EQ(s003.rows[1].id, "gpt-baseline");  // the seed's GPT-style Transformer
  EXPECT_EQ(s003.rows[2].id, "hymba-v1");
  ablate::SuiteChoices rope;
  rope.scale = "small";
  rope.transformer = "rope";
  EXPECT_EQ(ablate::load_suite("seed-003", rope).rows[1].id, "compare-transformer");
  ablate::SampleSettings smp;
  EXPECT_THROW(ablate::apply_sampling_settings(smp, {{"top_p", 0}}, "flags"), Error);
  EXPECT_THROW(ablate::apply_sampling_settings(smp, {{"topp", 0.5}}, "flags"), Error);
}

TEST(SeedSuites, BadSeedFieldsInASuiteFileNameTheField) {
  const auto dir = std::filesystem::temp_directory_path() / ("hymba_seed_suites_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto expect_error = [&](const json& suite, const std::string& what) {
    const auto path = (dir / "s.json").string();
    std::ofstream(path) << suite.dump();
    try {
      (void)ablate::load_suite(path, "tiny");
      ADD_FAILURE() << "accepted " << suite.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  const json rows = {{{"preset", "mamba-only"}}};
  expect_error({{"rows", rows}, {"seed", "005"}}, "field 'seed' must be");
  expect_error({{"rows", rows}, {"sampling", {{"top_p", 1.5}}}}, "'top_p' must be a number in (0, 1]");
  expect_error({{"rows", rows}, {"sampling", {{"top", 1}}}}, "unknown field 'top'");
  expect_error({{"rows", rows}, {"sampling", {{"untrained", "yes"}}}}, "'untrained' must be true or false");
  expect_error({{"rows", {{{"preset", "mamba-only"}, {"implementation", 1}}}}}, "field 'implementation'");
  expect_error({{"rows", rows}, {"train", {{"stop_epochs", "one"}}}}, "'stop_epochs' must be a number");
  // And a good one: seed, sampling and implementation as given.
  const auto path = (dir / "ok.json").string();
  std::ofstream(path) << json{{"rows", {{{"preset", "hybrid-official"}, {"implementation", "Official"}}}},
                              {"seed", "001"},
                              {"sampling", {{"tokens", 30}, {"top_p", 0.9}}}}
                             .dump();
  const ablate::Suite s = ablate::load_suite(path, "tiny");
  EXPECT_EQ(s.seed, "001");
  EXPECT_EQ(s.rows[0].implementation, "Official");
  EXPECT_EQ(s.sampling.tokens, 30);
  EXPECT_DOUBLE_EQ(s.sampling.top_p, 0.9);
  EXPECT_EQ(s.sampling.top_k, 40);  // unset keys keep the explicit defaults
  std::filesystem::remove_all(dir);
}

TEST(SeedResults, RecordsFromBeforeTheSeedFiguresAreRecomputedFromTheirConfig) {
  ablate::RowResult r;
  r.id = "t";
  r.name = "T";
  r.source = "preset";
  r.config = ablate::load_suite("seed-000", "seed").rows[2].config;  // the local Transformer
  r.params = 1;
  r.best_val_ppl = 2.0;
  r.steps = 1;
  json old = r.to_json();
  for (const char* k : {"layers", "dims_ratio", "dims_attention_share", "kv_reduction_seed000", "seed002_cache_mb",
                        "engine_cache_mb_seed002", "seed002_cache_context", "implementation", "attention_mixing",
                        "untrained_samples"})
    old.erase(k);
  const ablate::RowResult back = ablate::RowResult::from_json(old);
  EXPECT_EQ(back.layers, 15);
  EXPECT_DOUBLE_EQ(back.kv_reduction_seed000, 15.0 / 8.0);
  EXPECT_EQ(back.dims_ratio, "1:0");
  EXPECT_EQ(back.seed002_cache_context, 512);
  EXPECT_GT(back.seed002_cache_mb, 0.0);
}

ablate::RowResult row(const std::string& id, const std::string& impl, double ppl, const json& config = json::object()) {
  ablate::RowResult r;
  r.id = id;
  r.name = id;
  r.implementation = impl;
  r.best_val_ppl = ppl;
  r.best_val_loss = std::log(ppl);
  r.config = config;
  return r;
}

TEST(SeedReport, Seed001AnalysisFromTheResults) {
  const std::vector<ablate::RowResult> rows = {
      row("mamba-only", "Mine", 50.0),      row("hybrid-mine", "Mine", 40.0),
      row("hybrid-nometa", "Mine", 43.5),   row("hybrid-nokvshare", "Mine", 39.0),
      row("hybrid-official", "Official", 42.0), row("official-nometa", "Official", 41.0)};
  const ablate::Seed001Analysis a = ablate::analyse_seed001(rows);
  EXPECT_DOUBLE_EQ(*a.mean_ppl_mine, (50.0 + 40.0 + 43.5 + 39.0) / 4);
  EXPECT_DOUBLE_EQ(*a.mean_ppl_official, 41.5);
  EXPECT_EQ(a.best_model, "hybrid-nokvshare");
  EXPECT_EQ(a.best_implementation, "Mine");
  EXPECT_DOUBLE_EQ(*a.delta_no_meta_mine, 3.5);
  EXPECT_DOUBLE_EQ(*a.delta_no_kv_share, -1.0);
  EXPECT_DOUBLE_EQ(*a.delta_no_meta_official, -1.0);
  EXPECT_DOUBLE_EQ(*a.mine_minus_official, -2.0);
  const std::string md = ablate::seed_section("001", rows, {{"data", "x.txt"}, {"train", {{"epochs", 25}}}}, "tiny");
  EXPECT_NE(md.find("Mean best PPL, Mine: 43.12"), std::string::npos) << md;
  EXPECT_NE(md.find("Best model: hybrid-nokvshare (Mine) - PPL: 39.00"), std::string::npos) << md;
  EXPECT_NE(md.find("Without meta tokens (Mine): +3.50 PPL"), std::string::npos) << md;
  EXPECT_NE(md.find("Hybrid-Mine − Hybrid-Official: -2.00 PPL (Mine is better)"), std::string::npos) << md;
  EXPECT_NE(md.find("1,003,854"), std::string::npos);  // the seed's data, stated
  // Sorted by best PPL, Implementation column.
  const report::TextTable t = ablate::seed_table("001", rows, json::object());
  EXPECT_EQ(t.headers[1], "Implementation");
  EXPECT_EQ(t.cells.front()[0], "hybrid-nokvshare");
  EXPECT_EQ(t.cells.back()[0], "mamba-only");
  // Without the rows a conclusion needs, it is left out rather than made up.
  EXPECT_FALSE(ablate::analyse_seed001({row("hybrid-mine", "Mine", 3.0)}).delta_no_meta_mine.has_value());
}

TEST(SeedReport, Seed000TableAsItsReport) {
  ablate::RowResult r = row("seed000-transformer-local", "", std::exp(2.5432));
  r.name = "Transformer-only (Local)";
  r.params = 68910592;
  r.final_val_loss = 3.3789;
  r.decode_tokens_per_s = 15.2;
  r.train_seconds = 5.4 * 60;
  r.config = ablate::load_suite("seed-000", "seed").rows[2].config;
  ablate::fill_seed_figures(r);
  const report::TextTable t = ablate::seed_table("000", {r}, json::object());
  ASSERT_EQ(t.cells.size(), 1u);
  const auto& c = t.cells[0];
  EXPECT_EQ(c[1], "68,910,592");
  EXPECT_EQ(c[2], "1.88x");
  EXPECT_EQ(c[3], "2.5432 (12.72)");
  EXPECT_EQ(c[4], "3.3789 (29.34)");
  EXPECT_EQ(c[6], "5.4 min");
  EXPECT_EQ(c[8], "6.58s");  // 100 / 15.2 (seed 000 prints 6.59 s from its unrounded rate)
  EXPECT_NE(c[9].find("1.88x"), std::string::npos);  // the seed's figures beside ours
  // A tiny-scale row says what it is at the seed's size.
  const std::string md = ablate::seed_section("000", {r}, {{"train", {{"steps", 60}}}}, "tiny");
  EXPECT_NE(md.find("seed scale: 15 layers, KV reduction 1.88x"), std::string::npos) << md;
  // The local rows name the window mask: causal here, the seed's suspected
  // symmetric one under sliding_window_symmetric.
  EXPECT_NE(md.find("local layers causal (0 <= i - j < w); seed 000's numbers suggest a window that also sees future "
                    "tokens (`sliding_window_symmetric: true`)"),
            std::string::npos)
      << md;
  r.config["sliding_window_symmetric"] = true;
  const std::string leak = ablate::seed_section("000", {r}, {{"train", {{"steps", 60}}}}, "tiny");
  EXPECT_NE(leak.find("local layers see |i - j| < w, future tokens included"), std::string::npos) << leak;
  ablate::RowResult global = r;
  global.config = ablate::load_suite("seed-000", "seed").rows[1].config;
  const std::string global_md = ablate::seed_section("000", {global}, {{"train", {{"steps", 60}}}}, "tiny");
  EXPECT_EQ(global_md.find("sliding_window_symmetric"), std::string::npos) << global_md;
}

TEST(SeedReport, Seed002TableHasTheRoadmapColumns) {
  const ablate::Suite s = ablate::load_suite("hymba-roadmap", "tiny");
  std::vector<ablate::RowResult> rows;
  for (const ablate::SuiteRow& sr : s.rows) {
    ablate::RowResult r = row(sr.id, "", 10.0, sr.config);
    r.name = sr.name;
    r.steps = 150;
    ablate::fill_seed_figures(r);
    rows.push_back(r);
  }
  const report::TextTable t = ablate::seed_table("002", rows, json::object());
  const std::vector<std::string> tail(t.headers.end() - 5, t.headers.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"Steps", "Fusion", "SWA", "Meta", "KVshare"}));
  ASSERT_EQ(t.cells.size(), 13u);
  const auto& r1 = t.cells[0];
  EXPECT_EQ(r1[2], "0:1");
  EXPECT_EQ(std::vector<std::string>(r1.end() - 5, r1.end()),
            (std::vector<std::string>{"150", "mean", "none", "False", "False"}));
  const auto& r13 = t.cells[12];  // 9) + meta tokens: SWA default, KV sharing
  EXPECT_EQ(std::vector<std::string>(r13.end() - 4, r13.end()),
            (std::vector<std::string>{"mean", "default", "True", "True"}));
  EXPECT_EQ(t.cells[6][t.cells[6].size() - 3], "all");  // 7) all SWA
  EXPECT_EQ(t.cells[10][t.cells[10].size() - 4], "concat");
  // The suite's tokenizer is the seed's (HF Unigram 32,000), and the report says so; another one is named.
  const std::string md = ablate::seed_section("002", rows, {{"train", s.train}}, "tiny");
  EXPECT_NE(md.find("this run hf-unigram 32000; seed 002 trains the same Hugging Face Unigram"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("8192"), std::string::npos) << md;
  // Rows with meta tokens name seed 002's leaking mask and the key that reproduces it.
  EXPECT_NE(md.find("meta tokens causal (seed 002's mask lets them see every token: a leak; `meta_tokens_see_all: "
                    "true` reproduces it)"),
            std::string::npos)
      << md;
  std::vector<ablate::RowResult> leaking = rows;
  for (ablate::RowResult& r : leaking) r.config["meta_tokens_see_all"] = true;
  const std::string leak = ablate::seed_section("002", leaking, {{"train", s.train}}, "tiny");
  EXPECT_NE(leak.find("meta tokens see every token, as seed 002's mask (`meta_tokens_see_all`: a leak)"),
            std::string::npos)
      << leak;
  // Row 10 and the KV-sharing rows name what reproduces seed 002's code.
  EXPECT_NE(md.find("seed 002's code applies GQA only (`--same-kv-compression gqa-only`)"), std::string::npos) << md;
  EXPECT_NE(md.find("seed 002 pairs every consecutive layer, global ones included (`--kv-reuse-all-pairs`)"),
            std::string::npos)
      << md;
  json other = s.train;
  other["tokenizer"] = "unigram";
  other["tokenizer_vocab"] = 8192;
  const std::string md2 = ablate::seed_section("002", rows, {{"train", other}}, "tiny");
  EXPECT_NE(md2.find("this run unigram 8192; seed 002: Hugging Face Unigram 32,000"), std::string::npos) << md2;
}

// Seed 002's row 10 as its code has it (row 6 with GQA) and its KV sharing
// over every consecutive pair, each on request.
TEST(SeedReport, Seed002RowTenAndKvPairsAsItsCode) {
  ablate::SuiteChoices c;
  c.scale = "tiny";
  const ablate::Suite paper = ablate::load_suite("hymba-roadmap", c);
  c.same_kv_compression = "gqa-only";
  const ablate::Suite code = ablate::load_suite("hymba-roadmap", c);
  const ModelConfig p10 = ModelConfig::from_json(paper.rows[9].config), c10 = ModelConfig::from_json(code.rows[9].config);
  const ModelConfig c6 = ModelConfig::from_json(code.rows[5].config);
  EXPECT_FALSE(p10.kv_reuse_group.empty());
  EXPECT_TRUE(c10.kv_reuse_group.empty());
  EXPECT_EQ(c10.sliding_window, 0);
  EXPECT_LT(c10.num_key_value_heads, c10.num_attention_heads);  // GQA kept
  EXPECT_EQ(c10.layer_types, c6.layer_types);  // row 6's attention layers
  EXPECT_EQ(code.rows[9].id, "roadmap-10");
  ablate::RowResult r = row("roadmap-10", "", 10.0, code.rows[9].config);
  const std::string md = ablate::seed_section("002", {r}, {{"train", code.train}}, "tiny");
  EXPECT_NE(md.find("GQA only, as seed 002's code runs its row 10"), std::string::npos) << md;
  c.same_kv_compression = "half";
  EXPECT_THROW(ablate::load_suite("hymba-roadmap", c), Error);
  ablate::SuiteChoices other;
  other.same_kv_compression = "gqa-only";
  EXPECT_THROW(ablate::load_suite("seed-000", other), Error);
  ablate::RowResult pairs = row("roadmap-09", "", 10.0, paper.rows[8].config);
  pairs.config["kv_reuse_group"] = "all_pairs";
  const std::string pairs_md = ablate::seed_section("002", {pairs}, {{"train", code.train}}, "tiny");
  EXPECT_NE(pairs_md.find("as seed 002's owner map (`kv_reuse_group: all_pairs`)"), std::string::npos) << pairs_md;
}

// Seed 003's round 3: the rows at each T, round 1's 4,096 tokens per step.
TEST(SeedLongSuite, RowsAtEachLengthKeepTheTokensPerStep) {
  ablate::SuiteChoices c;
  c.scale = "tiny";
  const ablate::Suite s = ablate::load_suite("seed-003-long", c);
  EXPECT_EQ(s.seed, "003-long");
  EXPECT_TRUE(s.skip_over_memory);
  EXPECT_EQ(s.seq_lens, (std::vector<int64_t>{256, 512, 1024, 2048, 4096}));
  ASSERT_EQ(s.rows.size(), 15u);
  EXPECT_FALSE(s.train.contains("seq_len"));  // per row
  const std::vector<std::string> groups = {"Transformer (GPT-style)", "Mamba", "Hymba v2"};
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const ablate::SuiteRow& r = s.rows[i];
    const int64_t T = s.seq_lens[i / 3];
    EXPECT_EQ(r.seq_len, T);
    EXPECT_EQ(r.group, groups[i % 3]);
    EXPECT_EQ(r.train["seq_len"], T);
    EXPECT_EQ(r.train["batch"].get<int64_t>() * T, 4096) << r.id;  // 16, 8, 4, 2, 1 sequences
    EXPECT_EQ(r.train["eval_windows"].get<int64_t>() * T, 64 * 256) << r.id;
  }
  EXPECT_EQ(s.rows[0].id, "transformer-t256");
  EXPECT_EQ(s.rows[4].id, "mamba-t512");
  EXPECT_EQ(s.rows[14].id, "hymba-v2-t4096");
  EXPECT_EQ(s.rows[14].config["fusion"], "learned_beta");  // the mixing the seed asks about
  // The GPT-style row's learned positions cover its T (the seed's --max_len),
  // never fewer than the seed's 256 (room for the samples at small T).
  EXPECT_EQ(s.rows[12].config["max_position_embeddings"], 4096);
  EXPECT_EQ(s.rows[0].config["max_position_embeddings"], 256);
  EXPECT_FALSE(s.rows[13].config.contains("max_position_embeddings"));
  EXPECT_EQ(ablate::long_seq_batch(8192), 1);  // never below one sequence
  EXPECT_EQ(ablate::long_seq_eval_windows(32768), 1);

  c.seq_lens = {16, 32};
  c.transformer = "rope";
  const ablate::Suite small = ablate::load_suite("seed-003-long", c);
  ASSERT_EQ(small.rows.size(), 6u);
  EXPECT_EQ(small.rows[0].id, "transformer-rope-t16");
  EXPECT_EQ(small.rows[0].group, "Transformer (RoPE)");
  EXPECT_EQ(small.rows[3].train["batch"], 128);
  EXPECT_FALSE(small.rows[0].config.contains("position_embedding"));  // RoPE

  auto expect_error = [](const std::string& suite, const ablate::SuiteChoices& choices, const std::string& what) {
    try {
      (void)ablate::load_suite(suite, choices);
      ADD_FAILURE() << suite << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  ablate::SuiteChoices bad;
  bad.seq_lens = {32, 16};
  expect_error("seed-003-long", bad, "--seq-lens: lengths must be strictly ascending");
  bad.seq_lens = {1};
  expect_error("seed-003-long", bad, "--seq-lens: 1 is outside");
  expect_error("seed-003", bad, "--seq-lens: suite 'seed-003' has no sequence-length axis");
  ablate::SuiteChoices tf;
  tf.transformer = "rope";
  expect_error("demo", tf, "--transformer: suite 'demo' has no Transformer row");
  tf.transformer = "lstm";
  expect_error("seed-003", tf, "--transformer: 'lstm' is not one of gpt, rope");
}

TEST(SeedLongSuite, RowsOverTheMemoryAvailableAreSkippedWithTheReason) {
  MemoryEstimate need;
  need.add("parameters", 3.0 * 1024 * 1024, "x");
  need.add("activations", 1.0 * 1024 * 1024, "y");
  EXPECT_FALSE(ablate::memory_skip_reason(need, 5 * 1024 * 1024).has_value());
  EXPECT_FALSE(ablate::memory_skip_reason(need, 4 * 1024 * 1024).has_value());  // exactly fits
  EXPECT_FALSE(ablate::memory_skip_reason(need, -1).has_value());               // unknown: run it
  const auto why = ablate::memory_skip_reason(need, 2 * 1024 * 1024);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "estimated training memory 4.00 MiB (parameters 3.00 MiB, activations 1.00 MiB) exceeds the "
                  "2.00 MiB available");
  // The rule sees T: at the seed's fixed batch of 16 the 4096-token row of
  // the GPT-style Transformer is over 8 GiB, the 256-token one is not.
  auto need_at = [](int64_t T) {
    json j = scaled_config_json(find_preset("gpt-baseline"), Scale::kSeed);
    j["max_position_embeddings"] = T;
    return model_run_memory(cfg_of(j), 16, T, true);
  };
  const int64_t eight_gib = int64_t{8} << 30;
  EXPECT_FALSE(ablate::memory_skip_reason(need_at(256), eight_gib).has_value());
  ASSERT_TRUE(ablate::memory_skip_reason(need_at(4096), eight_gib).has_value());
  EXPECT_NE(ablate::memory_skip_reason(need_at(4096), eight_gib)->find("exceeds the 8.00 GiB available"),
            std::string::npos);
}

ablate::RowResult long_row(const std::string& group, int64_t T, double loss, double act, double tok_s,
                           std::vector<double> mixing = {}) {
  ablate::RowResult r;
  r.id = group + std::to_string(T);
  r.name = group + " T=" + std::to_string(T);
  r.group = group;
  r.seq_len = T;
  r.batch = 4096 / T;
  r.best_val_loss = loss;
  r.best_val_ppl = std::exp(loss);
  r.activation_peak_mb = act;
  r.peak_rss_mb = 10 * act;
  r.train_tokens_per_s = tok_s;
  r.attention_mixing = std::move(mixing);
  r.params = 1000;
  r.config = json::object();
  return r;
}

TEST(SeedLongReport, TableTrendsAndDifferencesAgainstT) {
  const std::vector<ablate::RowResult> rows = {
      long_row("Mamba", 1024, 2.0, 8.0, 900.0), long_row("Mamba", 256, 2.5, 8.0, 1000.0),
      long_row("Hymba v2", 256, 2.4, 10.0, 500.0, {0.7, 0.5}), long_row("Hymba v2", 1024, 2.2, 20.0, 400.0, {0.4, 0.4})};
  const std::vector<ablate::SkippedRow> skipped = {
      {"mamba4096", "Mamba T=4096", "Mamba", 4096, 1, 123.0, "estimated training memory 1 GiB exceeds"}};
  const report::TextTable t = ablate::long_seq_table(rows, skipped);
  ASSERT_EQ(t.cells.size(), 5u);
  // Grouped by architecture, ascending T, the skipped row in its place.
  EXPECT_EQ(t.cells[0][0], "Mamba");
  EXPECT_EQ(t.cells[0][1], "256");
  EXPECT_EQ(t.cells[1][1], "1024");
  EXPECT_EQ(t.cells[2][1], "4096");
  EXPECT_EQ(t.cells[2].back(), "skipped: estimated training memory 1 GiB exceeds");
  EXPECT_EQ(t.cells[3][0], "Hymba v2");
  EXPECT_EQ(t.cells[0][2], "16 × 256");
  EXPECT_EQ(t.cells[3][10], "60.0% attention / 40.0% SSM");
  const auto trends = ablate::long_seq_trends(rows);
  ASSERT_EQ(trends.size(), 2u);
  EXPECT_EQ(trends[0].group, "Mamba");
  EXPECT_DOUBLE_EQ(trends[0].activation_ratio, 1.0);
  EXPECT_DOUBLE_EQ(trends[0].tokens_per_s_ratio, 0.9);
  EXPECT_DOUBLE_EQ(trends[1].activation_ratio, 2.0);
  EXPECT_DOUBLE_EQ(*trends[1].from_mixing, 0.6);
  EXPECT_DOUBLE_EQ(*trends[1].to_mixing, 0.4);
  const json settings = {{"data", "x.txt"},
                         {"train", {{"steps", 7}, {"tokenizer", "byte"}}},
                         {"seq_axis", {{"batch", "tokens_per_step / T"}, {"tokens_per_step", 4096}}}};
  const std::string md = ablate::long_seq_section(rows, skipped, settings, "tiny");
  EXPECT_NE(md.find("Hymba v2, T 256 → 1024: activation peak ×2.00"), std::string::npos) << md;
  EXPECT_NE(md.find("attention mixing 60.0% → 40.0% (toward the SSM)"), std::string::npos) << md;
  EXPECT_NE(md.find("## Differences from seed 003 (round 3)"), std::string::npos) << md;
  EXPECT_NE(md.find("Quadro T1000"), std::string::npos) << md;
  EXPECT_NE(md.find("Mamba T=4096: not run (estimated training memory"), std::string::npos) << md;
  EXPECT_NE(md.find("batch = 4096 / T"), std::string::npos) << md;
  EXPECT_EQ(ablate::long_seq_chart_names(rows),
            (std::vector<std::string>{"long_val_loss", "long_tok_s", "long_memory", "long_mixing"}));
  EXPECT_EQ(ablate::long_seq_chart_names({rows[0], rows[1]}),
            (std::vector<std::string>{"long_val_loss", "long_tok_s", "long_memory"}));  // no learned mixing
}

}  // namespace
}  // namespace hymba
