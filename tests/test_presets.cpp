#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "model/presets.h"
#include "model/summary.h"

namespace hymba {
namespace {

TEST(Presets, EveryPresetResolvesAtEveryScale) {
  for (const Preset& p : all_presets())
    for (Scale s : {Scale::kTiny, Scale::kSmall, Scale::kSeed}) {
      ModelConfig c;
      ASSERT_NO_THROW(c = preset_config(p.name, s)) << p.name << " at " << to_string(s);
      EXPECT_GT(summarize(c, 16).total_params, 0);
    }
}

TEST(Presets, FamiliesAreComplete) {
  std::map<std::string, int> count;
  for (const Preset& p : all_presets()) ++count[p.family];
  EXPECT_EQ(count["seed-001"], 8);
  EXPECT_EQ(count["roadmap"], 13);
  EXPECT_EQ(count["seed-000"], 5);
  EXPECT_EQ(count["seed-003"], 6);
  EXPECT_EQ(count["paper"], 3);
}

TEST(Presets, Hymba15BMatchesThePaper) {
  const ModelConfig c = preset_config("hymba-1.5b");
  const ModelSummary s = summarize(c, 8192);
  EXPECT_NEAR(s.total_params / 1e9, 1.52, 0.005);
  // The paper's ~79 MB cache at 8k tokens in fp16 (KV of producer layers +
  // Mamba state), here in MiB.
  const double mib = (s.kv_cache_bytes(2) + s.mamba_state_bytes(2)) / 1048576.0;
  EXPECT_NEAR(mib, 79.0, 0.5);
  EXPECT_EQ(c.qk_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.kv_producer(17), 16);
  EXPECT_EQ(c.kv_producer(18), 16);
}

TEST(Presets, Seed001SizesAsInTheNotebook) {
  const ModelConfig h = preset_config("hybrid-official");
  EXPECT_EQ(h.hidden_size, 384);
  EXPECT_EQ(h.num_hidden_layers, 11);
  EXPECT_EQ(h.num_attention_heads, 6);
  EXPECT_EQ(h.num_key_value_heads, 2);
  EXPECT_EQ(h.sliding_window, 128);
  EXPECT_EQ(h.num_memory_tokens, 64);
  EXPECT_EQ(h.global_attn_idx, (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(h.kv_reuse_group.size(), 4u);
  EXPECT_EQ(preset_config("hybrid-nokvshare").kv_reuse_group.size(), 0u);
  EXPECT_EQ(preset_config("official-nometa").num_memory_tokens, 0);
}

TEST(Presets, ScalingKeepsThePattern) {
  for (const char* name : {"hybrid-official", "hymba-1.5b", "roadmap-13", "transformer-global"}) {
    const ModelConfig seed = preset_config(name, Scale::kSeed);
    const ModelConfig tiny = preset_config(name, Scale::kTiny);
    EXPECT_LT(tiny.hidden_size, seed.hidden_size) << name;
    EXPECT_EQ(tiny.num_attention_heads, seed.num_attention_heads) << name;
    EXPECT_EQ(tiny.num_key_value_heads, seed.num_key_value_heads) << name;
    EXPECT_EQ(tiny.num_memory_tokens > 0, seed.num_memory_tokens > 0) << name;
    EXPECT_EQ(tiny.kv_reuse_group.empty(), seed.kv_reuse_group.empty()) << name;
    EXPECT_EQ(tiny.layer_types.front(), seed.layer_types.front()) << name;
    // First and last layers stay global; all-global stays all-global.
    const bool all_global = seed.global_attn_idx.size() == static_cast<size_t>(seed.num_hidden_layers);
    if (all_global) {
      EXPECT_EQ(tiny.global_attn_idx.size(), static_cast<size_t>(tiny.num_hidden_layers)) << name;
    } else if (!seed.global_attn_idx.empty()) {
      EXPECT_EQ(tiny.global_attn_idx.size(), seed.global_attn_idx.size()) << name;
      EXPECT_EQ(tiny.global_attn_idx.front(), 0) << name;
      EXPECT_EQ(tiny.global_attn_idx.back(), tiny.num_hidden_layers - 1) << name;
    }
  }
}

TEST(Presets, LookupIsCaseInsensitiveAndErrorsListNames) {
  EXPECT_EQ(find_preset("Hybrid-Official").name, "hybrid-official");
  try {
    find_preset("hybrid-offical");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hybrid-official"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--preset"), std::string::npos);
  }
  EXPECT_THROW(parse_scale("huge"), Error);
}

TEST(Summary, KvCacheCountsProducersOnlyAndBoundsLocalLayers) {
  const ModelConfig c = preset_config("hybrid-official");
  // 3 global layers keep everything; 4 producer pairs keep meta + window - 1.
  const ModelSummary s = summarize(c, 1000);
  EXPECT_EQ(s.kv_cache_positions, 3 * (64 + 1000) + 4 * (64 + 127));
  const ModelSummary longer = summarize(c, 2000);
  EXPECT_EQ(longer.kv_cache_positions - s.kv_cache_positions, 3 * 1000) << "local layers stay bounded";
  EXPECT_EQ(s.mamba_state_elements, 11 * 768 * (16 + 3));
}

}  // namespace
}  // namespace hymba
