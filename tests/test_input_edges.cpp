// Bad-input and edge cases from issue 22: published nulls, overflowing weights,
// interrupted runs, and what the CLI prints for them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ablate/report_kit.h"
#include "core/atomic_file.h"
#include "core/json_io.h"
#include "model/config.h"
#include "model/hf_import.h"

namespace hymba {
namespace {

using nlohmann::json;
const std::string kImport = std::string(HYMBA_FIXTURES_DIR) + "/import";

// The released HymbaConfig reads sliding_window None as "no window": every layer global.
TEST(PublishedNulls, HymbaNullWindowAndNullGlobalsMeanEveryLayerGlobal) {
  json h = read_json_file(kImport + "/hf_hymba/config.json");
  h["sliding_window"] = nullptr;
  h["global_attn_idx"] = nullptr;
  h["kv_reuse_group"] = json::array();  // the engine shares K/V only between local layers
  const ModelConfig c = config_from_published(h, CheckpointLayout::kHfHymba, "h.json");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_TRUE(c.global_attn_idx.empty());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.is_global(l)) << "layer " << l;
}

TEST(PublishedNulls, HymbaNullGlobalsWithAWindowMakeEveryLayerLocal) {
  json h = read_json_file(kImport + "/hf_hymba/config.json");
  h["global_attn_idx"] = nullptr;
  h["sliding_window"] = 4;
  const ModelConfig c = config_from_published(h, CheckpointLayout::kHfHymba, "h.json");
  EXPECT_EQ(c.sliding_window, 4);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_FALSE(c.is_global(l)) << "layer " << l;
}

TEST(PublishedNulls, HymbaNullWindowWithGlobalsListedIsStillAllGlobal) {
  json h = read_json_file(kImport + "/hf_hymba/config.json");
  h["sliding_window"] = nullptr;  // global_attn_idx stays [0, 3]
  h["kv_reuse_group"] = json::array();
  const ModelConfig c = config_from_published(h, CheckpointLayout::kHfHymba, "h.json");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.is_global(l)) << "layer " << l;
}

// "Hymba" and "Hymba-NoMeta" at almost one place get different label slots.
TEST(ReportPlots, NearbyPointsGetDifferentLabelSlots) {
  const std::vector<int> slots = ablate::label_slots({1.00, 1.01, 3.0, 1.02}, {20.0, 20.1, 40.0, 20.05});
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(ablate::label_slots({1, 2}, {5, 50}), (std::vector<int>{0, 0}));  // far apart: both default
}

TEST(ReportHtml, InlineCodeIsRenderedAndEverythingElseEscaped) {
  EXPECT_EQ(ablate::html_inline("suite `demo`, data `a<b`"), "suite <code>demo</code>, data <code>a&lt;b</code>");
  EXPECT_EQ(ablate::html_inline("one ` alone & more"), "one ` alone &amp; more");
  EXPECT_EQ(ablate::html_inline(""), "");
}

}  // namespace
}  // namespace hymba
