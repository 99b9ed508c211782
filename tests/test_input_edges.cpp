// Bad-input and edge cases from issue 22: published nulls, overflowing weights,
// interrupted runs, and what the CLI prints for them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_kit.h"
#include "core/atomic_file.h"
#include "core/json_io.h"
#include "model/config.h"
#include "formats/hf_import.h"

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
  const std::vector<int> slots = report::label_slots({1.00, 1.01, 3.0, 1.02}, {20.0, 20.1, 40.0, 20.05});
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(report::label_slots({1, 2}, {5, 50}), (std::vector<int>{0, 0}));  // far apart: both default
}

// The seed sections of report.html come from the markdown report: headings,
// lists, tables (with escaped bars and bold best cells) and paragraphs become
// HTML; no markdown syntax and no unescaped input is left.
TEST(ReportHtml, MarkdownSectionsBecomeHtml) {
  const std::string md =
      "## Seed 000's table\n\nColumns as seed 000 defines them (`a<b`).\nSecond line.\n\n"
      "| # | Model | PPL |\n|--:|:--|--:|\n| 1 | Hybrid \\| SWA | **6.07** |\n| 2 | <script> | 7.1 |\n\n"
      "- Mamba: **faster**\n- Transformer: `x`\n\n### Sub\n\n```\nkeep | *as* <is>\n```\n";
  const std::string h = report::markdown_to_html(md);
  EXPECT_EQ(h,
            "<h2>Seed 000's table</h2>\n"
            "<p>Columns as seed 000 defines them (<code>a&lt;b</code>). Second line.</p>\n"
            "<table>\n<tr><th>#</th><th>Model</th><th>PPL</th></tr>\n"
            "<tr><td>1</td><td>Hybrid | SWA</td><td><strong>6.07</strong></td></tr>\n"
            "<tr><td>2</td><td>&lt;script&gt;</td><td>7.1</td></tr>\n</table>\n"
            "<ul>\n<li>Mamba: <strong>faster</strong></li>\n<li>Transformer: <code>x</code></li>\n</ul>\n"
            "<h3>Sub</h3>\n<pre>keep | *as* &lt;is&gt;\n</pre>\n")
      << h;
  // An unpaired ** stays text.
  EXPECT_EQ(report::markdown_to_html("a ** b"), "<p>a ** b</p>\n");
}

TEST(ReportHtml, InlineCodeIsRenderedAndEverythingElseEscaped) {
  EXPECT_EQ(report::html_inline("suite `demo`, data `a<b`"), "suite <code>demo</code>, data <code>a&lt;b</code>");
  EXPECT_EQ(report::html_inline("one ` alone & more"), "one ` alone &amp; more");
  EXPECT_EQ(report::html_inline(""), "");
}

}  // namespace
}  // namespace hymba
