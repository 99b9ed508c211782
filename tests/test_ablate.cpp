// `hymba ablate`: suites, results files, the report and reruns, end to end on
// a micro suite (three 2-3 layer models, a few steps each) and a text the
// test writes itself.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ablate/report.h"
#include "tokenizer/train/train_tokenizer.h"
#include "core/stats.h"
#include "ablate/results.h"
#include "ablate/suite.h"
#include "cli_util.h"
#include "core/error.h"
#include "tokenizer/tokenizer_files.h"
#include "train/trainer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool gnuplot_on_path() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

class Ablate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("hymba_ablate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "corpus.txt");
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"};
    for (int i = 0; i < 1500; ++i) text << words[(i * 7 + i / 5) % 12] << (i % 9 == 8 ? ".\n" : " ");
    text.close();
    const json common = {{"vocab_size", 259}, {"hidden_size", 32}, {"num_attention_heads", 2},
                         {"num_key_value_heads", 2}, {"intermediate_size", 48}};
    auto write = [&](const char* name, json over) {
      json j = common;
      for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
      std::ofstream(dir_ / name) << j.dump(2);
    };
    write("attn.json", {{"num_hidden_layers", 2}, {"layer_types", "attention"}});
    write("mamba.json", {{"num_hidden_layers", 2}, {"layer_types", "mamba"}, {"intermediate_size", 0},
                         {"num_attention_heads", 0}, {"num_key_value_heads", 0}});
    write("hybrid.json", {{"num_hidden_layers", 3}, {"layer_types", "hybrid"}, {"global_attn_idx", {0}},
                          {"sliding_window", 8}, {"kv_reuse_group", "auto"}, {"num_memory_tokens", 4}});
    const json suite = {
        {"name", "micro"},
        {"title", "Micro suite"},
        {"sort", "best_ppl"},
        {"train", {{"steps", 6}, {"batch", 2}, {"seq_len", 32}, {"eval_interval", 3}, {"eval_windows", 4},
                   {"warmup", 2}, {"lr", 3e-3}, {"tokenizer", "byte"}, {"seed", 7}}},
        {"prompts", {"the "}},
        {"rows", {{{"name", "Attention"}, {"config", "attn.json"}},
                  {{"name", "Mamba"}, {"config", "mamba.json"}},
                  {{"name", "Hybrid | SWA"}, {"id", "hybrid"}, {"config", "hybrid.json"}}}}};
    std::ofstream(dir_ / "suite.json") << suite.dump(2);
    first_ = run_cli(command("out"));
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string command(const std::string& out, const std::string& extra = "") {
    return "--threads 1 ablate --suite " + (dir_ / "suite.json").string() + " --data " +
           (dir_ / "corpus.txt").string() + " --out " + (dir_ / out).string() +
           " --sample-tokens 8 --cache-context 64 --plain-progress " + extra;
  }
  static json results(const std::string& out) { return json::parse(slurp(dir_ / out / "results.json")); }

  static fs::path dir_;
  static test::CliResult first_;
};

fs::path Ablate::dir_;
test::CliResult Ablate::first_;

TEST_F(Ablate, WritesEveryOutputWithTheExpectedColumns) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  const fs::path out = dir_ / "out";
  // Progress: one start and one end line per row, with an ETA once a row is done.
  for (const char* row : {"[1/3] Attention", "[2/3] Mamba", "[3/3] Hybrid | SWA"})
    EXPECT_EQ(count(first_.output, row), 2) << row << "\n" << first_.output;
  EXPECT_NE(first_.output.find("suite ETA"), std::string::npos);
  EXPECT_NE(first_.output.find("report: "), std::string::npos);

  const json r = results("out");
  ASSERT_EQ(r["rows"].size(), 3u);
  EXPECT_EQ(r["suite"], "micro");
  for (const json& row : r["rows"]) {
    const ablate::RowResult parsed = ablate::RowResult::from_json(row);  // every field present and typed
    EXPECT_EQ(parsed.steps, 6);
    ASSERT_EQ(parsed.curve.size(), 3u);  // the untrained model, then evaluations at steps 3 and 6
    EXPECT_EQ(parsed.curve[0].step, 0);
    EXPECT_GT(parsed.best_step, 0) << "the untrained model is never the best";
    ASSERT_FALSE(parsed.train_curve.empty());  // the training loss as logged
    EXPECT_EQ(parsed.train_curve.back().step, 6);
    EXPECT_GT(parsed.best_val_ppl, 1.0);
    EXPECT_LE(parsed.best_val_loss, parsed.final_val_loss + 1e-12);
    EXPECT_GT(parsed.train_tokens_per_s, 0.0);
    EXPECT_GT(parsed.decode_tokens_per_s, 0.0);
    ASSERT_EQ(parsed.samples.size(), 1u);
    EXPECT_EQ(parsed.samples[0].prompt, "the ");
    EXPECT_FALSE(parsed.samples[0].text.empty());
    EXPECT_EQ(parsed.cache_context, 64);
  }
  auto by_id = [&](const std::string& id) {
    for (const json& row : r["rows"])
      if (row["id"] == id) return ablate::RowResult::from_json(row);
    ADD_FAILURE() << "no row " << id;
    return ablate::RowResult{};
  };
  const auto attn = by_id("attention"), mamba = by_id("mamba"), hybrid = by_id("hybrid");
  EXPECT_EQ(attn.attn_mamba_ratio, "1:0");
  EXPECT_DOUBLE_EQ(attn.attention_share, 1.0);
  EXPECT_DOUBLE_EQ(*attn.kv_reduction, 1.0);  // nothing shared, all global
  EXPECT_EQ(mamba.attn_mamba_ratio, "0:1");
  EXPECT_FALSE(mamba.kv_reduction.has_value());  // no KV cache to reduce
  EXPECT_DOUBLE_EQ(mamba.kv_cache_mb, 0.0);
  EXPECT_GT(mamba.mamba_state_mb, 0.0);
  // Hybrid: layer 0 global (4 meta + 64 positions), layers 1-2 one shared
  // SWA producer (4 + 7): (3 x 68) / (68 + 11).
  ASSERT_TRUE(hybrid.kv_reduction.has_value());
  EXPECT_NEAR(*hybrid.kv_reduction, 204.0 / 79.0, 1e-9);
  EXPECT_GT(hybrid.attention_share, 0.0);
  EXPECT_LT(hybrid.attention_share, 1.0);

  // results.csv: the documented columns, rows sorted by best PPL as the suite asks.
  std::istringstream csv(slurp(out / "results.csv"));
  std::string header, line;
  std::getline(csv, header);
  std::string expected;
  for (const std::string& c : ablate::result_columns()) expected += (expected.empty() ? "" : ",") + c;
  EXPECT_EQ(header, expected);
  const auto& cols = ablate::result_columns();
  const size_t ppl_col = static_cast<size_t>(std::find(cols.begin(), cols.end(), "best_val_ppl") - cols.begin());
  ASSERT_LT(ppl_col, cols.size());
  std::vector<double> ppl;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::string cell;
    for (std::istringstream ls(line); std::getline(ls, cell, ',');) f.push_back(cell);
    ASSERT_GT(f.size(), ppl_col) << line;
    ppl.push_back(std::stod(f[ppl_col]));
  }
  ASSERT_EQ(ppl.size(), 3u);
  EXPECT_TRUE(std::is_sorted(ppl.begin(), ppl.end()));

  const std::string md = slurp(out / "report.md");
  EXPECT_NE(md.find("| # | Model | Params (M) | Attn:Mamba (params) | Attn share (params) | Attn:Mamba (dims) |"), std::string::npos) << md;
  EXPECT_NE(md.find("Hybrid \\| SWA"), std::string::npos);  // a '|' in a name cannot break the table
  EXPECT_NE(md.find("**"), std::string::npos);               // best values marked
  EXPECT_NE(md.find("## Samples"), std::string::npos);
  const std::string html = slurp(out / "report.html");
  EXPECT_NE(html.find("overflow-x:auto"), std::string::npos);  // the 24-column table scrolls inside the page
  EXPECT_NE(html.find("<table>"), std::string::npos);
  EXPECT_NE(html.find("class=\"best\""), std::string::npos);
  EXPECT_NE(html.find("<pre><b>the </b>"), std::string::npos);
  // The prose's markdown `code` is rendered, not shown with its backticks.
  const std::string settings = html.substr(html.find("<p>"), html.find("</p>") - html.find("<p>"));
  EXPECT_NE(settings.find("<code>"), std::string::npos) << settings;
  EXPECT_EQ(settings.find('`'), std::string::npos) << settings;
  // Scatter labels carry a slot (rows at almost one place get different ones);
  // the cache axis starts at 0 MB, not below.
  if (gnuplot_on_path()) {
    std::istringstream scatter(slurp(out / "plots/params_vs_ppl.dat"));
    std::vector<int> label_slots;
    for (std::string row; std::getline(scatter, row);) label_slots.push_back(std::stoi(row.substr(row.rfind(' ') + 1)));
    ASSERT_EQ(label_slots.size(), 3u);
    EXPECT_EQ(label_slots[0], 0);
    const std::string script = slurp(out / "plots/report.gp");
    EXPECT_NE(script.find("set xrange [0:*]"), std::string::npos);
    // Decode tok/s against cache: both axes from 0, no padding below either.
    const std::string speed = script.substr(script.find("Decode throughput"));
    EXPECT_NE(speed.find("set offsets 0, graph 0.1, graph 0.15, 0\n"), std::string::npos) << speed;
    EXPECT_NE(speed.find("set yrange [0:*]"), std::string::npos) << speed;
    EXPECT_NE(script.find("$4==0?$2:NaN"), std::string::npos);
  }
  if (gnuplot_on_path()) {
    for (const std::string& n : ablate::plot_names())
      for (const char* ext : {".png", ".svg"}) {
        const fs::path p = out / "plots" / (n + ext);
        EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 0) << p;
      }
    EXPECT_NE(html.find("<img src=\"plots/val_curves.svg\""), std::string::npos);
    EXPECT_NE(md.find("](plots/ppl_bars.png)"), std::string::npos);
  } else {
    EXPECT_NE(first_.output.find("plots skipped"), std::string::npos);
  }
}

// A suite with seed 001's tokenizer kind: trained once into the output
// directory as tokenizer.json + tokenizer_config.json, used by every row and
// kept in each row's checkpoints; a rerun reloads it.
TEST_F(Ablate, ByteLevelBpeSuiteTokenizerIsTrainedOnceAndKeptByTheRows) {
  const json suite = {
      {"name", "micro-bpe"},
      {"seed", "001"},
      // Seed 001's tokenizer settings (the small corpus stops the merges far below 4,096).
      {"train", {{"steps", 4}, {"batch", 2}, {"seq_len", 16}, {"eval_interval", 2}, {"eval_windows", 2},
                 {"warmup", 1}, {"lr", 3e-3}, {"tokenizer", "byte-level-bpe"}, {"tokenizer_vocab", 4096},
                 {"tokenizer_min_frequency", 2}, {"tokenizer_alphabet", "corpus"}, {"seed", 7}}},
      {"prompts", {"the "}},
      {"rows", {{{"name", "Attention"}, {"config", "attn.json"}}}}};
  std::ofstream(dir_ / "suite-bpe.json") << suite.dump(2);
  const std::string cmd = "--threads 1 ablate --suite " + (dir_ / "suite-bpe.json").string() + " --data " +
                          (dir_ / "corpus.txt").string() + " --out " + (dir_ / "out-bpe").string() +
                          " --sample-tokens 4 --cache-context 32 --plain-progress --no-plots";
  const auto r = run_cli(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = dir_ / "out-bpe";
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(out / "tokenizer.model"));
  const auto tok = load_tokenizer((out / "tokenizer.json").string());
  EXPECT_LT(tok->vocab_size(), 200);
  EXPECT_GT(tok->vocab_size(), 4 + 20);  // the specials, the corpus's bytes, some merges
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->encode("Q"), std::vector<int32_t>{0});  // not in the corpus: <unk>
  const CheckpointTokenizer row = load_checkpoint_tokenizer((out / "runs" / "attention" / "best").string());
  EXPECT_EQ(fs::path(row.path).filename(), "tokenizer.json");
  EXPECT_EQ(row.tokenizer->fingerprint(), tok->fingerprint());
  const json model = json::parse(slurp(out / "runs" / "attention" / "best" / "config.json"));
  EXPECT_EQ(model.value("vocab_size", 0), tok->vocab_size());
  // The report's differences from seed 001: the same tokenizer, so per-token PPL is comparable.
  const std::string report = slurp(out / "report.md");
  EXPECT_NE(report.find("byte-level-bpe 4096, min_frequency 2, alphabet corpus"), std::string::npos) << report;
  EXPECT_NE(report.find("per-token PPL is comparable"), std::string::npos) << report;
  // Cut otherwise than seed 001 (blocks, random windows): every row says so.
  EXPECT_NE(report.find("validates on random 256-token blocks, not the seed's 10 % of shuffled 256-token chunks "
                        "(`data_split: chunks-shuffled`)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("(`batching: epochs`)"), std::string::npos) << report;

  const auto again = run_cli(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("training the suite's"), std::string::npos) << again.output;
  EXPECT_EQ(count(again.output, "measured earlier, skipped"), 1) << again.output;
}

TEST_F(Ablate, RerunSkipsFinishedRowsAndKeepsTheirResults) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  const json before = results("out");
  const auto stamp = fs::last_write_time(dir_ / "out/runs/mamba/summary.json");
  const auto again = run_cli(command("out"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count(again.output, "measured earlier, skipped"), 3) << again.output;
  EXPECT_EQ(again.output.find("model: "), std::string::npos) << "a row trained again:\n" << again.output;
  EXPECT_EQ(fs::last_write_time(dir_ / "out/runs/mamba/summary.json"), stamp);
  EXPECT_EQ(results("out")["rows"], before["rows"]);
  // --recompute changes memory, not results: the rows still count as measured.
  const auto recomputed = run_cli(command("out", "--recompute"));
  ASSERT_EQ(recomputed.exit_code, 0) << recomputed.output;
  EXPECT_EQ(count(recomputed.output, "measured earlier, skipped"), 3) << recomputed.output;
  EXPECT_NE(run_cli(command("out", "--precision fp16")).exit_code, 0);
  // A model key given at its default is the same model: still measured.
  const auto zero = run_cli(command("out", "--attention-dropout 0"));
  ASSERT_EQ(zero.exit_code, 0) << zero.output;
  EXPECT_EQ(count(zero.output, "measured earlier, skipped"), 3) << zero.output;
  const auto changed = run_cli(command("out", "--attention-dropout 0.1"));
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_NE(changed.output.find("its model config changed"), std::string::npos) << changed.output;
}

// --repeats N on a finished suite adds repeats 1 .. N-1 (seeds --seed + r)
// without training repeat 0 again; the report and intervals.json carry the
// spread and the suite file's questions answered from the paired repeats.
TEST_F(Ablate, RepeatsAreAddedToMeasuredRowsWithoutRetrainingThem) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::copy(dir_ / "out", dir_ / "rep", fs::copy_options::recursive);
  json suite = json::parse(slurp(dir_ / "suite.json"));
  suite["questions"] = {{{"question", "Does the hybrid beat attention?"}, {"claim", "better"}, {"a", "hybrid"},
                         {"b", "attention"}, {"seed_says", "yes"}},
                        {{"question", "Is Mamba within 5 nats of attention?"}, {"claim", "similar"}, {"a", "mamba"},
                         {"b", "attention"}, {"margin", 5.0}}};
  std::ofstream(dir_ / "suite_q.json") << suite.dump(2);
  const auto stamp = fs::last_write_time(dir_ / "rep/runs/mamba/summary.json");
  std::string cmd = command("rep", "--repeats 2");
  cmd.replace(cmd.find("suite.json"), 10, "suite_q.json");
  const auto again = run_cli(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(fs::last_write_time(dir_ / "rep/runs/mamba/summary.json"), stamp);
  EXPECT_NE(again.output.find("3 run(s) measured earlier, skipped"), std::string::npos) << again.output;
  for (const char* row : {"[4/6] Attention (repeat 2/2)", "[5/6] Mamba (repeat 2/2)", "[6/6] Hybrid | SWA (repeat 2/2)"})
    EXPECT_EQ(count(again.output, row), 2) << row << "\n" << again.output;
  EXPECT_TRUE(fs::exists(dir_ / "rep/runs/mamba.rep1/summary.json"));

  const json r = results("rep");
  ASSERT_EQ(r["rows"].size(), 6u);
  for (const json& row : r["rows"]) {
    const auto parsed = ablate::RowResult::from_json(row);
    EXPECT_EQ(parsed.seed, 7u + static_cast<uint64_t>(parsed.repeat)) << parsed.id;
  }
  EXPECT_EQ(count(slurp(dir_ / "rep/results.csv"), "\n"), 7);  // header + one line per run

  const json intervals = json::parse(slurp(dir_ / "rep/intervals.json"));
  ASSERT_EQ(intervals["rows"].size(), 3u);
  for (const json& row : intervals["rows"]) {
    EXPECT_EQ(row["repeats"], json({0, 1}));
    EXPECT_EQ(row["best_val_loss"]["n"], 2);
    EXPECT_TRUE(row["best_val_loss"].contains("ci95"));
    for (const json& b : row["val_loss_band"]) EXPECT_LE(b["min"].get<double>(), b["max"].get<double>());
  }
  ASSERT_EQ(intervals["questions"].size(), 2u);
  EXPECT_EQ(intervals["questions"][1]["verdict"], "holds");  // 5 nats covers any micro-suite difference
  EXPECT_EQ(intervals["questions"][0]["diffs"].size(), 2u);
  const std::string md = slurp(dir_ / "rep/report.md");
  EXPECT_NE(md.find("## Repeats and intervals"), std::string::npos);
  EXPECT_NE(md.find("## Questions"), std::string::npos);
  EXPECT_NE(md.find("Does the hybrid beat attention?"), std::string::npos);
  if (gnuplot_on_path()) {
    // Plot data carries the spread: curves have mean, min and max; bars their interval.
    const std::string curves = slurp(dir_ / "rep/plots/curves.dat");
    std::istringstream first_point(curves.substr(curves.find('\n') + 1));
    double step = 0, mean = 0, lo = 0, hi = 0;
    ASSERT_TRUE(first_point >> step >> mean >> lo >> hi) << curves;
    EXPECT_LE(lo, mean);
    EXPECT_GE(hi, mean);
    EXPECT_NE(slurp(dir_ / "rep/plots/report.gp").find("filledcurves"), std::string::npos);
    EXPECT_EQ(step, 0) << "curves start at step 0";
    // The training loss beside each validation curve.
    EXPECT_NE(slurp(dir_ / "rep/plots/report.gp").find("'train_curves.dat' index 0 using 1:2 with lines dt 2"),
              std::string::npos);
    EXPECT_NE(slurp(dir_ / "rep/plots/train_curves.dat").find("\n6 "), std::string::npos);
  }
}

// The leak flags set the key on every row; a row with a local layer then
// trains and is evaluated but never decoded (no samples, decode rate 0),
// while rows the leak does not reach (global attention, Mamba) sample as usual.
TEST_F(Ablate, LeakFlagsReachEveryRowAndLeakingRowsAreNotDecoded) {
  const auto res = run_cli(command("out-leak", "--steps 2 --eval-interval 2 --sliding-window-symmetric "
                                               "--attention-dropout 0.1 --quiet"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_NE(res.output.find("Hybrid | SWA: no samples or decode rate: config field 'sliding_window_symmetric' lets "
                            "queries read later tokens"),
            std::string::npos)
      << res.output;
  const json r = results("out-leak");
  ASSERT_EQ(r["rows"].size(), 3u);
  for (const json& row : r["rows"]) {
    const ablate::RowResult parsed = ablate::RowResult::from_json(row);
    EXPECT_EQ(parsed.config.value("sliding_window_symmetric", false), true) << parsed.id;
    EXPECT_EQ(parsed.config.value("attention_dropout", 0.0), 0.1) << parsed.id;
    const bool leaks = parsed.id == "hybrid";
    EXPECT_EQ(parsed.samples.empty(), leaks) << parsed.id;
    EXPECT_EQ(parsed.decode_tokens_per_s > 0, !leaks) << parsed.id;
    EXPECT_TRUE(std::isfinite(parsed.best_val_loss)) << parsed.id;
  }
  // The report shows no decode rate for the leaking row, and never marks its absence best.
  const std::string md = slurp(dir_ / "out-leak/report.md");
  EXPECT_NE(md.find("| — | — |"), std::string::npos) << md;
  EXPECT_EQ(md.find("**0.0**"), std::string::npos) << md;
  const auto bad = run_cli(command("out-leak-bad", "--attention-dropout 1.5"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--attention-dropout"), std::string::npos) << bad.output;
}

// A suite that reproduces seed 001: Implementation column, the notebook's
// analysis and plots, untrained samples with explicit sampling, and seed
// 002's budget (--stop-epochs under a longer schedule).
TEST_F(Ablate, Seed001SuiteWritesTheNotebooksOutputs) {
  const json suite = {
      {"name", "micro-001"},
      {"seed", "001"},
      {"sort", "best_ppl"},
      {"train", {{"steps", 40}, {"batch", 2}, {"seq_len", 32}, {"eval_interval", 2}, {"eval_windows", 4},
                 {"warmup", 2}, {"lr", 3e-3}, {"tokenizer", "byte"}, {"seed", 7},
                 {"data_split", "chunks-shuffled"}, {"batching", "epochs"}}},
      {"prompts", {"the "}},
      {"sampling", {{"tokens", 5}, {"untrained", true}}},
      {"rows", {{{"id", "hybrid-mine"}, {"implementation", "Mine"}, {"config", "hybrid.json"}},
                {{"id", "hybrid-nometa"}, {"implementation", "Mine"}, {"config", "hybrid.json"},
                 {"overrides", {{"num_memory_tokens", 0}}}},
                {{"id", "hybrid-official"}, {"implementation", "Official"}, {"config", "hybrid.json"},
                 {"overrides", {{"num_memory_tokens", 2}}}}}}};
  std::ofstream(dir_ / "suite001.json") << suite.dump(2);
  const auto res = run_cli("--threads 1 ablate --suite " + (dir_ / "suite001.json").string() + " --data " +
                           (dir_ / "corpus.txt").string() + " --out " + (dir_ / "out001").string() +
                           " --sample-tokens 8 --stop-epochs 0.05 --quiet");
  ASSERT_EQ(res.exit_code, 0) << res.output;
  const json r = results("out001");
  ASSERT_EQ(r["rows"].size(), 3u);
  for (const json& row : r["rows"]) {
    const ablate::RowResult parsed = ablate::RowResult::from_json(row);
    // 0.05 of an epoch (5,054 train tokens = 78 batches of 2 x 32): 3 whole steps, not 40.
    EXPECT_EQ(parsed.steps, 3);
    ASSERT_EQ(parsed.untrained_samples.size(), 1u);
    ASSERT_EQ(parsed.samples.size(), 1u);
    EXPECT_FALSE(parsed.untrained_samples[0].text.empty());
    EXPECT_FALSE(parsed.implementation.empty());
  }
  EXPECT_EQ(r["settings"]["sampling"]["top_p"], 1.0);
  const std::string md = slurp(dir_ / "out001/report.md");
  EXPECT_NE(md.find("| # | Model | Implementation |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Seed 001's table"), std::string::npos) << md;
  EXPECT_NE(md.find("Mean best PPL, Official"), std::string::npos) << md;
  EXPECT_NE(md.find("Without meta tokens (Mine): "), std::string::npos) << md;
  EXPECT_NE(md.find("no top-p"), std::string::npos) << md;
  EXPECT_NE(md.find("Untrained:"), std::string::npos) << md;
  EXPECT_NE(md.find("## Differences from seed 001"), std::string::npos) << md;
  // Cut as seed 001 cuts: no data difference in the rows.
  EXPECT_NE(md.find("this run 10 % of shuffled seq_len-token chunks"), std::string::npos) << md;
  EXPECT_EQ(md.find("draws random windows"), std::string::npos) << md;
  EXPECT_EQ(md.find("validates on random 256-token blocks"), std::string::npos) << md;
  // Seed 001's printout of each model's KV sharing, and the official row's
  // attention dropout named where it is not the seed's 0.1.
  EXPECT_NE(md.find("### KV sharing structure"), std::string::npos) << md;
  EXPECT_NE(md.find("Producer layers: ["), std::string::npos) << md;
  EXPECT_NE(md.find("Consumer layers: ["), std::string::npos) << md;
  EXPECT_NE(md.find("attention dropout 0, seed 001's official rows 0.1 (`attention_dropout`)"), std::string::npos)
      << md;
  EXPECT_NE(slurp(dir_ / "out001/results.csv").find(",implementation,"), std::string::npos);
  if (gnuplot_on_path())
    for (const char* n : {"seed001_ppl_bars", "seed001_val_ppl", "seed001_mine_vs_official", "seed001_params_vs_ppl"}) {
      const fs::path p = dir_ / "out001/plots" / (std::string(n) + ".png");
      EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 0) << p;
    }
}

// A directory written before sampling was explicit (no "sampling" in its
// settings) sampled at top-p 0.95: a run that samples so continues it, one
// that does not is refused naming the setting.
TEST_F(Ablate, RunsFromBeforeExplicitSamplingContinueWhenTheySampleAlike) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::remove_all(dir_ / "legacy");
  fs::copy(dir_ / "out", dir_ / "legacy", fs::copy_options::recursive);
  json r = results("legacy");
  r["settings"].erase("sampling");
  std::ofstream(dir_ / "legacy/results.json") << r.dump(2);
  const auto other = run_cli(command("legacy"));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("sampling.top_p: 0.95 then, 1.0 now"), std::string::npos) << other.output;
  const auto same = run_cli(command("legacy", "--top-p 0.95"));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(count(same.output, "measured earlier, skipped"), 3) << same.output;
}

TEST_F(Ablate, ReportWithoutGnuplotStillSucceeds) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::copy(dir_ / "out", dir_ / "noplot", fs::copy_options::recursive);
  fs::remove_all(dir_ / "noplot/plots");
  const auto r = run_cli(command("noplot", "--gnuplot " + (dir_ / "no-such-gnuplot").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plots skipped"), std::string::npos) << r.output;
  const std::string html = slurp(dir_ / "noplot/report.html");
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("plots skipped"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "noplot/plots/val_curves.png"));
}

TEST_F(Ablate, CorruptResultRowIsReportedAndMeasuredAgain) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::copy(dir_ / "out", dir_ / "corrupt", fs::copy_options::recursive);
  json r = results("corrupt");
  ASSERT_EQ(r["rows"][1]["id"], "mamba");
  const double best = r["rows"][1]["best_val_loss"];
  r["rows"][1].erase("best_val_loss");
  r["rows"][2]["params"] = "many";
  std::ofstream(dir_ / "corrupt/results.json") << r.dump(2);
  const auto stamp = fs::last_write_time(dir_ / "corrupt/runs/mamba/summary.json");

  const auto again = run_cli(command("corrupt"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("rows[1] ('mamba') is corrupt: field 'best_val_loss' is missing"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("rows[2] ('hybrid') is corrupt: field 'params' is not an integer"), std::string::npos)
      << again.output;
  EXPECT_EQ(count(again.output, "measured earlier, skipped"), 1) << again.output;
  // Re-measured from the finished run (not trained again), and back in the file.
  EXPECT_EQ(fs::last_write_time(dir_ / "corrupt/runs/mamba/summary.json"), stamp);
  const json fixed = results("corrupt");
  ASSERT_EQ(fixed["rows"].size(), 3u);
  EXPECT_DOUBLE_EQ(fixed["rows"][1]["best_val_loss"].get<double>(), best);
  EXPECT_TRUE(fixed["rows"][2]["params"].is_number_integer());
}

TEST_F(Ablate, RowKilledAfterItsLastCheckpointIsFinishedWithoutTraining) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::copy(dir_ / "out", dir_ / "killed", fs::copy_options::recursive);
  json r = results("killed");
  const json mamba = r["rows"][1];
  ASSERT_EQ(mamba["id"], "mamba");
  r["rows"].erase(1);
  std::ofstream(dir_ / "killed/results.json") << r.dump(2);
  fs::remove(dir_ / "killed/runs/mamba/summary.json");  // killed between the last checkpoint and the summary

  const auto again = run_cli(command("killed"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count(again.output, "measured earlier, skipped"), 2) << again.output;
  EXPECT_EQ(again.output.find("step 1/6"), std::string::npos) << "trained again:\n" << again.output;
  const json fixed = results("killed");
  ASSERT_EQ(fixed["rows"].size(), 3u);
  EXPECT_EQ(fixed["rows"][1]["id"], "mamba");
  for (const char* k : {"best_val_loss", "best_step", "final_val_loss", "final_val_accuracy", "steps", "train_tokens"})
    EXPECT_EQ(fixed["rows"][1][k], mamba[k]) << k;
  EXPECT_TRUE(fs::exists(dir_ / "killed/runs/mamba/summary.json"));
}

TEST_F(Ablate, RowsDroppedFromTheSuiteFileStayInResultsButNotInTheReport) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  fs::copy(dir_ / "out", dir_ / "fewer", fs::copy_options::recursive);
  json suite = json::parse(slurp(dir_ / "suite.json"));
  suite["rows"].erase(1);  // Mamba
  std::ofstream(dir_ / "fewer-suite.json") << suite.dump(2);
  const auto r = run_cli("--threads 1 ablate --suite " + (dir_ / "fewer-suite.json").string() + " --data " +
                         (dir_ / "corpus.txt").string() + " --out " + (dir_ / "fewer").string() +
                         " --sample-tokens 8 --cache-context 64 --plain-progress");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("row 'mamba' that is not in this suite; kept there"), std::string::npos) << r.output;
  EXPECT_EQ(count(r.output, "measured earlier, skipped"), 2) << r.output;
  const json rows = results("fewer")["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["id"], "mamba");
  EXPECT_EQ(slurp(dir_ / "fewer/report.md").find("| Mamba |"), std::string::npos);
}

TEST_F(Ablate, BadInputIsAOneLineErrorNamingTheCulprit) {
  ASSERT_EQ(first_.exit_code, 0) << first_.output;
  auto expect_error = [](const test::CliResult& r, const std::string& what) {
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
  };
  expect_error(run_cli("ablate --suite no-such-suite --out " + (dir_ / "x").string()), "unknown suite 'no-such-suite'");
  expect_error(run_cli("ablate --suite demo"), "--out");
  expect_error(run_cli("ablate --suite demo --out " + (dir_ / "x").string() + " --cache-context 0"), "--cache-context");
  // Other settings on an existing output directory.
  expect_error(run_cli(command("out", "--steps 7")), "other settings (train.steps: 6 then, 7 now)");
  // A results.json that is not JSON at all is not overwritten.
  fs::copy(dir_ / "out", dir_ / "broken", fs::copy_options::recursive);
  std::ofstream(dir_ / "broken/results.json") << "{\"rows\": [";
  expect_error(run_cli(command("broken")), "results.json: not valid JSON");
  EXPECT_EQ(slurp(dir_ / "broken/results.json"), "{\"rows\": [");

  auto suite_file = [&](const json& j) {
    std::ofstream(dir_ / "bad.json") << j.dump();
    return run_cli("ablate --suite " + (dir_ / "bad.json").string() + " --out " + (dir_ / "x").string());
  };
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}}}}, {"colour", 1}}), "unknown field 'colour'");
  expect_error(suite_file({{"rows", json::array()}}), "'rows' must be a non-empty array");
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}, {"config", "x.json"}}}}}),
               "rows[0]: give exactly one of 'preset' and 'config'");
  expect_error(suite_file({{"rows", {{{"preset", "no-such-preset"}}}}}), "unknown preset 'no-such-preset'");
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}, {"overrides", {{"hidden_size", "wide"}}}}}}}),
               "hidden_size");
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}}}}, {"train", {{"stepz", 5}}}}),
               "unknown training setting 'stepz'");
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}}}}, {"train", {{"steps", "many"}}}}),
               "'steps' must be an integer");
  expect_error(suite_file({{"rows", {{{"preset", "mamba-only"}}, {{"preset", "mamba-only"}}}}}),
               "two rows share the id 'mamba-only'");
  EXPECT_FALSE(fs::exists(dir_ / "x/results.json"));
}

// Seed 003's round 3 at tiny scale and tiny T: the table against T, the new
// CSV columns and the plots against T; then, under a 1 MiB memory cap, every
// row is skipped with its reason instead of stopping the suite.
TEST_F(Ablate, Seed003LongSuiteWritesTheTableAndPlotsAgainstT) {
  const std::string common = "--threads 1 ablate --suite seed-003-long --scale tiny --steps 2 --eval-interval 2 "
                             "--batch 2 --tokenizer-type byte --sample-tokens 4 --quiet --data " +
                             (dir_ / "corpus.txt").string() + " --out ";
  const auto res = run_cli(common + (dir_ / "long").string() + " --seq-lens 16,32");
  ASSERT_EQ(res.exit_code, 0) << res.output;
  const json r = results("long");
  ASSERT_EQ(r["rows"].size(), 6u);
  EXPECT_EQ(r["settings"]["seq_axis"]["batch"], "fixed");
  for (const json& row : r["rows"]) {
    const ablate::RowResult p = ablate::RowResult::from_json(row);
    EXPECT_EQ(p.seq_len, p.id.ends_with("-t16") ? 16 : 32) << p.id;
    EXPECT_EQ(p.batch, 2);
    EXPECT_GT(p.peak_rss_mb, 0.0) << p.id;
    EXPECT_GT(p.activation_peak_mb, 0.0) << p.id;
    EXPECT_GT(p.est_train_memory_mb, p.activation_peak_mb) << p.id;
    EXPECT_FALSE(p.group.empty());
    EXPECT_EQ(p.attention_mixing.empty(), !p.id.starts_with("hymba-v2")) << p.id;
    // Learned β is logged at every evaluation, per layer; the last equals the final model's.
    ASSERT_FALSE(p.curve.empty()) << p.id;
    for (const ablate::CurvePoint& c : p.curve)
      EXPECT_EQ(c.attention_mixing.size(), p.attention_mixing.size()) << p.id << " step " << c.step;
    if (!p.attention_mixing.empty() && p.best_step == p.curve.back().step) {
      EXPECT_EQ(p.curve.back().attention_mixing, p.attention_mixing) << p.id;
    }
  }
  const fs::path out = dir_ / "long";
  std::istringstream csv(slurp(out / "results.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find(",group,seq_len,batch,peak_rss_mb,activation_peak_mb,est_train_memory_mb"), std::string::npos)
      << header;
  const std::string md = slurp(out / "report.md");
  EXPECT_NE(md.find("## Seed 003 round 3: against sequence length"), std::string::npos) << md;
  EXPECT_NE(md.find("| # | Architecture | T | Batch × T |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | Transformer (GPT-style) | 16 | 2 × 16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Hymba v2, T 16 → 32: activation peak ×"), std::string::npos) << md;
  EXPECT_NE(md.find("fixed at 2 sequences at every T"), std::string::npos) << md;
  EXPECT_NE(md.find("learned positions sized to T (256"), std::string::npos) << md;
  const std::string html = slurp(out / "report.html");
  EXPECT_NE(html.find("<h2>Seed 003 round 3: against sequence length</h2>"), std::string::npos);
  EXPECT_NE(html.find("<th>Activation peak (MB)</th>"), std::string::npos);
  // The seed section is rendered, not shown as raw markdown.
  EXPECT_EQ(html.find("| # |"), std::string::npos);
  EXPECT_NE(html.find("<li>"), std::string::npos);
  if (gnuplot_on_path())
    for (const char* n : {"long_val_loss", "long_tok_s", "long_memory", "long_mixing"}) {
      const fs::path p = out / "plots" / (std::string(n) + ".png");
      EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 0) << p;
      EXPECT_NE(md.find(std::string("](plots/") + n + ".png)"), std::string::npos) << n;
    }

  const auto capped = run_cli(common + (dir_ / "long-capped").string() + " --seq-lens 16", "env HYMBA_MAX_MEMORY=1M");
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_EQ(count(capped.output, ": skipped: estimated training memory"), 3) << capped.output;
  EXPECT_EQ(results("long-capped")["rows"].size(), 0u);
  EXPECT_EQ(count(slurp(dir_ / "long-capped/report.md"), "| skipped: estimated training memory"), 3);

  const auto bad = run_cli(common + (dir_ / "long-bad").string() + " --seq-len 64");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--seq-len: suite 'seed-003-long' sets T per row; give --seq-lens"), std::string::npos)
      << bad.output;
}

// A validation split shorter than the longest T stops before any row trains,
// naming --seq-lens (the suite refuses --seq-len, the trainer's advice).
TEST_F(Ablate, Seed003LongValidationShorterThanTheLongestTNamesSeqLens) {
  const fs::path out = dir_ / "long-short-val";
  const auto res = run_cli("--threads 1 ablate --suite seed-003-long --scale tiny --steps 1 --batch 1 "
                           "--tokenizer-type byte --quiet --data " +
                           (dir_ / "corpus.txt").string() + " --out " + out.string() + " --seq-lens 16,4096");
  EXPECT_NE(res.exit_code, 0) << res.output;
  EXPECT_NE(res.output.find("--seq-lens: T 4096 needs a validation window of 4097 tokens but the validation split of " +
                            (dir_ / "corpus.txt").string() + " has "),
            std::string::npos)
      << res.output;
  EXPECT_NE(res.output.find(" or a larger --data"), std::string::npos) << res.output;
  EXPECT_EQ(res.output.find("lower --seq-len"), std::string::npos) << res.output;
  EXPECT_EQ(test::count_lines(res.output), 1) << res.output;
  EXPECT_FALSE(fs::exists(out / "results.json"));
  EXPECT_TRUE(!fs::exists(out / "runs") || fs::is_empty(out / "runs"));  // not even the T=16 rows trained
}

// --tokenizer: a tokenizer file (HF tokenizer.json, sentencepiece .model)
// replaces the trained one; the rows take its vocabulary; results and report
// say where it came from.
TEST_F(Ablate, LoadedTokenizerReplacesTheTrainedOne) {
  const std::string fixtures = HYMBA_FIXTURES_DIR;
  for (const std::string& file : {fixtures + "/import/hf_gpt_neo/tokenizer.json",
                                  fixtures + "/tokenizers/spm_bpe/tokenizer.model"}) {
    const std::string name = "loaded-" + fs::path(file).parent_path().filename().string();
    const auto res = run_cli(command(name, "--steps 2 --eval-interval 2 --no-plots --tokenizer " + file));
    ASSERT_EQ(res.exit_code, 0) << res.output;
    EXPECT_EQ(res.output.find("training the suite's"), std::string::npos) << res.output;
    const auto tok = load_tokenizer(file);
    const json r = results(name);
    EXPECT_EQ(r["settings"]["train"]["tokenizer"], "loaded from " + file + " (" + to_string(tok->kind()) +
                                                       ", vocab " + std::to_string(tok->vocab_size()) + ")");
    EXPECT_FALSE(r["settings"]["train"].contains("tokenizer_vocab"));
    // The copy in the output directory is the file's tokenizer.
    const auto copy = load_tokenizer_or_directory((dir_ / name).string());
    EXPECT_EQ(copy->vocab_size(), tok->vocab_size());
    EXPECT_EQ(copy->encode("the cat sat"), tok->encode("the cat sat"));
    // The rows' vocab_size is the tokenizer's.
    for (const json& row : r["rows"]) {
      json cfg = json::parse(slurp(dir_ / name / "runs" / row["id"].get<std::string>() / "best" / "config.json"));
      EXPECT_EQ(cfg["vocab_size"], tok->vocab_size()) << row["id"];
    }
    EXPECT_NE(slurp(dir_ / name / "report.md").find("tokenizer loaded from " + file), std::string::npos);
  }
  const std::string gpt2 = fixtures + "/import/hf_gpt_neo/tokenizer.json";
  const auto both = run_cli(command("loaded-bad", "--tokenizer " + gpt2 + " --tokenizer-type bpe"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("--tokenizer: a loaded tokenizer replaces the trained one"), std::string::npos)
      << both.output;
  const auto missing = run_cli(command("loaded-bad", "--tokenizer /no/such/tokenizer.json"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("--tokenizer: /no/such/tokenizer.json is not a file"), std::string::npos)
      << missing.output;
  EXPECT_EQ(test::count_lines(missing.output), 1) << missing.output;
}

TEST(AblateSuites, BuiltInSuitesHaveTheSeedsRowsAtEveryScale) {
  for (const char* scale : {"tiny", "small", "seed"}) {
    const auto roadmap = ablate::load_suite("hymba-roadmap", scale);
    ASSERT_EQ(roadmap.rows.size(), 13u);
    EXPECT_EQ(roadmap.rows[0].name, "1) Mamba heads only");
    EXPECT_EQ(roadmap.rows[12].name, "13) 9) + Meta Tokens");
    const auto seed = ablate::load_suite("seed-ablation", scale);
    std::vector<std::string> names;
    for (const auto& r : seed.rows) names.push_back(r.name);
    EXPECT_EQ(names, (std::vector<std::string>{"Mamba-only", "Transformer-only (Global)", "Hybrid-Mine",
                                                "Hybrid-NoMeta", "Hybrid-NoKVShare", "Hybrid-Official",
                                                "Official-NoMeta", "Transformer-only (Local)"}));
    EXPECT_EQ(seed.sort, ablate::SortOrder::kBestPpl);
    EXPECT_EQ(ablate::load_suite("arch-compare", scale).rows.size(), 3u);
    const auto demo = ablate::load_suite("demo", scale);
    ASSERT_EQ(demo.rows.size(), 4u);
    EXPECT_EQ(demo.rows[3].config["num_memory_tokens"], 0);
    EXPECT_GT(demo.rows[2].config["num_memory_tokens"].get<int64_t>(), 0);
  }
}

TEST(AblateSuites, RecipesAndFlagsMapOntoTrainingOptions) {
  TrainOptions t;
  ablate::apply_train_settings(t, ablate::load_suite("seed-ablation", "tiny").train, "seed-ablation");
  EXPECT_EQ(t.batch, 16);
  EXPECT_EQ(t.seq_len, 256);
  EXPECT_DOUBLE_EQ(t.label_smoothing, 0.1);
  EXPECT_DOUBLE_EQ(t.adamw.beta2, 0.99);
  EXPECT_DOUBLE_EQ(t.epochs, 25.0);
  // Seed 001's tokenizer: BpeTrainer(vocab_size=4096, min_frequency=2) over
  // the ByteLevel pre-tokenizer, the corpus's bytes as its alphabet.
  EXPECT_EQ(t.tokenizer_type, "byte-level-bpe");
  EXPECT_EQ(t.tokenizer_vocab, 4096);
  EXPECT_EQ(t.tokenizer_min_frequency, 2u);
  EXPECT_TRUE(t.tokenizer_corpus_alphabet);
  const TokenizerTrainOptions tok = tokenizer_train_options(t);
  EXPECT_EQ(tok.kind, TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(tok.vocab_size, 4096);
  EXPECT_EQ(tok.min_frequency, 2u);
  EXPECT_TRUE(tok.corpus_alphabet);
  EXPECT_EQ(ablate::train_settings_json(t)["tokenizer"], "byte-level-bpe");
  EXPECT_EQ(ablate::train_settings_json(t)["tokenizer_min_frequency"], 2);
  // The weight-decay scope: matrices by default (not even written, so earlier
  // results keep matching), every parameter with "all"; anything else refused.
  EXPECT_FALSE(t.adamw.decay_all);
  EXPECT_FALSE(ablate::train_settings_json(t).contains("weight_decay_scope"));
  ablate::apply_train_settings(t, {{"weight_decay_scope", "all"}}, "flags");
  EXPECT_TRUE(t.adamw.decay_all);
  EXPECT_EQ(ablate::train_settings_json(t)["weight_decay_scope"], "all");
  EXPECT_THROW(ablate::apply_train_settings(t, {{"weight_decay_scope", "norms"}}, "flags"), Error);
  // The precision of the products: float32 by default (not written), bf16 on request.
  EXPECT_FALSE(ablate::train_settings_json(t).contains("precision"));
  ablate::apply_train_settings(t, {{"precision", "bf16"}}, "flags");
  EXPECT_EQ(t.precision, cpu::MatmulPrecision::kBf16);
  EXPECT_EQ(ablate::train_settings_json(t)["precision"], "bf16");
  EXPECT_THROW(ablate::apply_train_settings(t, {{"precision", "fp16"}}, "flags"), Error);
  t.precision = cpu::MatmulPrecision::kF32;
  // Recomputed activations: memory, not results, so not in the settings' record.
  ablate::apply_train_settings(t, {{"recompute", true}}, "flags");
  EXPECT_TRUE(t.recompute);
  EXPECT_FALSE(ablate::train_settings_json(t).contains("recompute"));
  EXPECT_THROW(ablate::apply_train_settings(t, {{"recompute", "yes"}}, "flags"), Error);
  t.recompute = false;
  EXPECT_EQ(ablate::train_settings_json(t)["tokenizer_alphabet"], "corpus");
  // Seed 000's suite runs seed 001's notebook, tokenizer included.
  TrainOptions t0;
  ablate::apply_train_settings(t0, ablate::load_suite("seed-000", "tiny").train, "seed-000");
  EXPECT_EQ(t0.tokenizer_type, "byte-level-bpe");
  EXPECT_TRUE(t0.tokenizer_corpus_alphabet);
  // Seed 002's suites: HF's Unigram at vocab 32,000 (NFKC + lowercase, Whitespace).
  for (const char* suite : {"hymba-roadmap", "hymba-roadmap-epoch"}) {
    TrainOptions t2;
    ablate::apply_train_settings(t2, ablate::load_suite(suite, "tiny").train, suite);
    EXPECT_EQ(t2.tokenizer_type, "hf-unigram") << suite;
    EXPECT_EQ(t2.tokenizer_vocab, 32000) << suite;
    EXPECT_EQ(tokenizer_train_options(t2).kind, TokenizerKind::kHfUnigram) << suite;
    EXPECT_EQ(ablate::train_settings_json(t2)["tokenizer"], "hf-unigram") << suite;
  }
  ablate::apply_train_settings(t, {{"tokenizer_alphabet", "bytes"}, {"tokenizer_min_frequency", 0}}, "flags");
  EXPECT_FALSE(t.tokenizer_corpus_alphabet);
  EXPECT_EQ(t.tokenizer_min_frequency, 0u);
  for (const json& bad : {json{{"tokenizer_alphabet", "latin"}}, json{{"tokenizer_min_frequency", -1}},
                          json{{"tokenizer", "byte-level"}}}) {
    try {
      ablate::apply_train_settings(t, bad, "flags");
      ADD_FAILURE() << bad.dump();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad.begin().key()), std::string::npos) << msg;
    }
  }
  ablate::apply_train_settings(t, {{"steps", 40}}, "flags");  // steps replace epochs
  EXPECT_EQ(t.steps, 40);
  EXPECT_DOUBLE_EQ(t.epochs, 0.0);
  EXPECT_EQ(ablate::train_settings_json(t)["steps"], 40);
  EXPECT_FALSE(ablate::train_settings_json(t).contains("epochs"));
  EXPECT_THROW(ablate::apply_train_settings(t, {{"tokenizer", "words"}}, "flags"), Error);
}

TEST(AblateResults, RowJsonRoundTripsAndNamesMissingFields) {
  ablate::RowResult r;
  r.id = "x";
  r.name = "X";
  r.source = "preset x";
  r.config = {{"hidden_size", 8}};
  r.params = 1000;
  r.best_val_loss = 1.5;
  r.best_val_ppl = std::exp(1.5);
  r.steps = 3;
  r.kv_reduction = 2.5;
  r.samples = {{"a", "bc"}};
  r.curve = {{3, 1.5, std::exp(1.5), 0.25, {}}};
  r.train_curve = {{1, 2.5}, {3, 1.75}};
  const json j = r.to_json();
  const ablate::RowResult back = ablate::RowResult::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  json missing = j;
  missing.erase("decode_tokens_per_s");
  try {
    ablate::RowResult::from_json(missing);
    FAIL() << "accepted a row without decode_tokens_per_s";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'decode_tokens_per_s' is missing"), std::string::npos) << e.what();
  }
}

TEST(AblateResults, TableMarksTheBestValueOfEachFigure) {
  ablate::RowResult a, b;
  a.name = "A";
  b.name = "B";
  a.best_val_loss = 2.0, b.best_val_loss = 1.0;
  a.best_val_ppl = std::exp(2.0), b.best_val_ppl = std::exp(1.0);
  a.decode_tokens_per_s = 50, b.decode_tokens_per_s = 10;
  const std::string md = ablate::markdown_table({a, b});
  EXPECT_NE(md.find("**1.0000**"), std::string::npos) << md;  // lower loss
  EXPECT_EQ(md.find("**2.0000**"), std::string::npos) << md;
  EXPECT_NE(md.find("**50.0**"), std::string::npos) << md;  // higher throughput
  EXPECT_EQ(md.find("**10.0**"), std::string::npos) << md;
}

}  // namespace
}  // namespace hymba

namespace hymba {
namespace {

ablate::RowSpread decode_spread(std::vector<double> tok_s) {
  ablate::RowSpread s;
  s.decode_tokens_per_s = spread_of(tok_s);
  return s;
}

// The report says when the rows' decode speeds cannot be told apart.
TEST(AblateReport, DecodeNoiseNoteWhenTheRowsCannotBeToldApart) {
  EXPECT_EQ(ablate::decode_noise_note({}), "");
  const std::string one = ablate::decode_noise_note({decode_spread({1000}), decode_spread({1100})});
  EXPECT_NE(one.find("one timing per row"), std::string::npos) << one;
  const std::string overlap =
      ablate::decode_noise_note({decode_spread({1000, 1200, 1100}), decode_spread({1050, 1250, 1150})});
  EXPECT_NE(overlap.find("within the others' run-to-run noise"), std::string::npos) << overlap;
  EXPECT_EQ(ablate::decode_noise_note({decode_spread({1000, 1001, 1002}), decode_spread({2000, 2001, 2002})}), "");
}

}  // namespace
}  // namespace hymba
