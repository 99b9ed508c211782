// `hymba classify suite --suite seed-004` end to end on tiny backbones and a
// few dozen synthetic labelled texts: the three rows, the seed's table beside
// ours, the per-row differences, reruns, and one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "classify/data.h"
#include "classify/suite.h"
#include "cli_util.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"
#include "model/presets.h"
#include "model/summary.h"

namespace hymba::classify {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

const std::string kImport = std::string(HYMBA_FIXTURES_DIR) + "/import";

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

class ClassifySuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("hymba_classify_suite_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Sorted by label as IMDB's files are: 20 "neg" then 20 "pos" (dev: 8 + 8).
    const char* neg[] = {"bad", "dull", "awful", "boring", "weak"};
    const char* pos[] = {"good", "great", "fine", "superb", "fun"};
    Rng rng(5);
    auto text = [&](bool positive) {
      std::string t = "the film was";
      for (int k = 0; k < 3 + static_cast<int>(rng.below(4)); ++k) t += std::string(" ") + (positive ? pos : neg)[rng.below(5)];
      return t;
    };
    std::ofstream train(dir_ / "train.tsv"), dev(dir_ / "dev.tsv");
    for (bool positive : {false, true}) {
      for (int i = 0; i < 20; ++i) train << (positive ? "pos" : "neg") << "\t" << text(positive) << "\n";
      for (int i = 0; i < 8; ++i) dev << (positive ? "pos" : "neg") << "\t" << text(positive) << "\n";
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string command(const std::string& out, const std::string& extra) {
    return "--threads 1 classify suite --suite seed-004 --data " + (dir_ / "train.tsv").string() + " --val " +
           (dir_ / "dev.tsv").string() + " --out " + (dir_ / out).string() + " --plain-progress --quiet " + extra;
  }
  static json results(const std::string& out) { return json::parse(slurp(dir_ / out / "results.json")); }
  static fs::path dir_;
};

fs::path ClassifySuite::dir_;

// No backbone given: both presets drawn at random at tiny scale with the
// suite's tokenizer, the three rows trained with the seed's recipe.
TEST_F(ClassifySuite, RandomPresetBackbonesGiveTheThreeRowsAndTheSeedsTable) {
  const auto res = run_cli(command("random", "--scale tiny --tokenizer-type byte --max-len 16 --eval-interval 10"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  for (const char* row : {"[1/3] GPT-Neo-125M frozen", "[2/3] Mamba-130M frozen", "[3/3] Hybrid GPT-Neo + Mamba frozen"})
    EXPECT_EQ(count(res.output, row), 2) << row << "\n" << res.output;  // start and done lines
  EXPECT_NE(res.output.find("randomly initialised"), std::string::npos) << res.output;

  const json r = results("random");
  EXPECT_EQ(r["format"], "hymba-classify-suite/1");
  ASSERT_EQ(r["rows"].size(), 3u);
  const int64_t vocab = make_byte_tokenizer()->vocab_size();
  auto tiny_params = [&](const char* preset) {
    json j = scaled_config_json(find_preset(preset), Scale::kTiny);
    j["vocab_size"] = vocab;
    return summarize(ModelConfig::from_json(j, preset), 1).total_params;
  };
  const int64_t neo = tiny_params("gpt-neo-125m"), mamba = tiny_params("mamba-130m");
  const std::vector<std::string> ids = {"gpt-neo", "mamba", "hybrid"};
  for (size_t i = 0; i < 3; ++i) {
    const json& row = r["rows"][i];
    EXPECT_EQ(row["id"], ids[i]);
    const json& e = row["engine"];
    EXPECT_GE(e["val_acc"].get<double>(), 0.0);
    EXPECT_LE(e["val_acc"].get<double>(), 1.0);
    EXPECT_EQ(e["train_examples"], 40);
    EXPECT_EQ(e["val_examples"], 16);
    EXPECT_EQ(e["steps"], 40);  // batch 1, one epoch
    EXPECT_EQ(e["batch"], 1);
    EXPECT_GT(e["peak_rss_mb"].get<double>(), 0.0);
    EXPECT_GT(e["activation_peak_mb"].get<double>(), 0.0);
    EXPECT_GT(e["tokens_per_s"].get<double>(), 0.0);
    // Validations every 10 steps, as the seed's every 1,000.
    ASSERT_EQ(row["history"].size(), 4u);
    EXPECT_EQ(row["history"][1]["step"], 20);
    for (const json& b : row["backbones"]) {
      EXPECT_EQ(b["origin"], "random");
      EXPECT_EQ(b["scale"], "tiny");
      EXPECT_EQ(b["params"], b["role"] == "gpt-neo" ? neo : mamba);
    }
  }
  EXPECT_EQ(r["rows"][0]["engine"]["params"], neo);
  EXPECT_EQ(r["rows"][2]["engine"]["params"], neo + mamba);
  EXPECT_EQ(r["rows"][2]["backbones"].size(), 2u);
  // The seed's figures as it reports them; the hybrid row has no accuracy.
  EXPECT_DOUBLE_EQ(r["rows"][0]["seed"]["dev_acc"].get<double>(), 0.85);
  EXPECT_TRUE(r["rows"][0]["seed"]["memory_mb"].is_null());
  EXPECT_DOUBLE_EQ(r["rows"][1]["seed"]["dev_acc"].get<double>(), 0.80);
  EXPECT_DOUBLE_EQ(r["rows"][1]["seed"]["memory_mb"].get<double>(), 2200.0);
  EXPECT_TRUE(r["rows"][2]["seed"]["dev_acc"].is_null());
  EXPECT_DOUBLE_EQ(r["rows"][2]["seed"]["memory_mb"].get<double>(), 9800.0);
  const std::string hybrid_diffs = r["rows"][2]["differences"].dump();
  EXPECT_NE(hybrid_diffs.find("the seed reports no accuracy for this row"), std::string::npos) << hybrid_diffs;
  const std::string neo_diffs = r["rows"][0]["differences"].dump();
  for (const char* what : {"randomly initialised and not pretrained", "EleutherAI/gpt-neo-125M", "GPT-2's byte-level BPE",
                           "byte-level (no training)", "IMDB (25,000 training", "train size 20,000",
                           "(the seed's)", "hardware: ", "memory: peak RSS"})
    EXPECT_NE(neo_diffs.find(what), std::string::npos) << what << "\n" << neo_diffs;
  EXPECT_EQ(neo_diffs.find("no accuracy"), std::string::npos);

  const fs::path out = dir_ / "random";
  const std::string md = slurp(out / "report.md");
  EXPECT_NE(md.find("| # | Row | Seed dev acc | Seed memory MB (batch 1) | Val acc | Macro-F1 | Peak RSS MB |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 1 | GPT-Neo-125M frozen | 0.85 | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | Mamba-130M frozen | 0.80 | 2200 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 | Hybrid GPT-Neo + Mamba frozen | — | 9800 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2,000 | 0.75 | 0.62 | — (not reached) |"), std::string::npos) << md;
  EXPECT_NE(md.find("randomly initialised (the default, sized for a laptop"), std::string::npos) << md;
  EXPECT_NE(md.find("log-softmax"), std::string::npos);
  const std::string csv = slurp(out / "results.csv");
  EXPECT_EQ(test::count_lines(csv), 4);
  EXPECT_EQ(csv.rfind("id,name,seed_dev_acc,seed_memory_mb,val_acc,macro_f1,", 0), 0u) << csv;
  EXPECT_NE(slurp(out / "report.html").find("<h2>Seed 004's table beside ours</h2>"), std::string::npos);
  for (const char* id : {"gpt-neo", "mamba", "hybrid"}) EXPECT_TRUE(fs::exists(out / "rows" / id / "classifier.json"));
  EXPECT_TRUE(fs::exists(out / "backbones" / "gpt-neo-125m-tiny" / "model.safetensors"));

  // The same flags again keep every row; other flags are refused.
  const auto again = run_cli(command("random", "--scale tiny --tokenizer-type byte --max-len 16 --eval-interval 10"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count(again.output, "measured earlier, kept"), 3) << again.output;
  EXPECT_EQ(results("random")["rows"], r["rows"]);
  const auto other =
      run_cli(command("random", "--scale tiny --tokenizer-type byte --max-len 16 --eval-interval 10 --lr 1e-3"));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("holds a suite run with other settings (lr: 5e-05 then, 0.001 now)"), std::string::npos)
      << other.output;
}

// Backbones given by directory (Hugging Face GPT-Neo and Mamba layouts, each
// with its own tokenizer), with the seed's size caps.
// --repeats on a measured suite: repeat 0 kept, repeats 1 and 2 trained
// with seeds --seed + r in rows/<id>.rep<r>, every run in results.json/csv,
// the spread and seed 004's questions in the report.
TEST_F(ClassifySuite, RepeatsAddRunsAndAnswerTheSeedsQuestions) {
  const std::string flags = "--scale tiny --tokenizer-type byte --max-len 16 --eval-interval 0 --seed 9";
  ASSERT_EQ(run_cli(command("rep", flags)).exit_code, 0);
  const auto stamp = fs::last_write_time(dir_ / "rep/rows/mamba/summary.json");
  const auto res = run_cli(command("rep", flags + " --repeats 3"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(count(res.output, "measured earlier, kept"), 3) << res.output;
  EXPECT_EQ(fs::last_write_time(dir_ / "rep/rows/mamba/summary.json"), stamp);
  EXPECT_TRUE(fs::exists(dir_ / "rep/rows/mamba.rep2/summary.json"));
  const json r = results("rep");
  ASSERT_EQ(r["rows"].size(), 9u);
  for (const json& row : r["rows"]) EXPECT_EQ(row["run_seed"], 9 + row["repeat"].get<int64_t>());
  ASSERT_EQ(r["questions"].size(), 3u);
  EXPECT_EQ(r["questions"][0]["n"], 3);
  const std::string md = slurp(dir_ / "rep/report.md");
  EXPECT_NE(md.find("## Repeats and intervals"), std::string::npos) << md;
  EXPECT_NE(md.find("Does the frozen GPT-Neo head beat the frozen Mamba head?"), std::string::npos);
  EXPECT_EQ(count(slurp(dir_ / "rep/results.csv"), "\n"), 10);  // header + 9 runs
}

TEST_F(ClassifySuite, GivenBackbonesAndSizeCaps) {
  const auto res = run_cli(command("given", "--gpt-neo " + kImport + "/hf_gpt_neo --mamba " + kImport +
                                                "/hf_mamba --max-len 8 --train-size 10 --eval-size 6"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  const json r = results("given");
  ASSERT_EQ(r["rows"].size(), 3u);
  for (const json& row : r["rows"]) {
    EXPECT_EQ(row["engine"]["train_examples"], 10);
    EXPECT_EQ(row["engine"]["val_examples"], 6);
    EXPECT_EQ(row["engine"]["steps"], 10);
    for (const json& b : row["backbones"]) EXPECT_EQ(b["origin"], "given");
    const std::string diffs = row["differences"].dump();
    EXPECT_NE(diffs.find("weights: as given"), std::string::npos) << diffs;
    EXPECT_NE(diffs.find("10 training examples of 40"), std::string::npos) << diffs;
    EXPECT_NE(diffs.find("6 examples of 16"), std::string::npos) << diffs;
  }
  EXPECT_FALSE(fs::exists(dir_ / "given" / "backbones"));  // nothing drawn, no tokenizer trained
  EXPECT_FALSE(fs::exists(dir_ / "given" / "tokenizer"));
}

// One backbone given, the other drawn: the drawn one gets a BPE trained on
// the training texts (kept under OUT/tokenizer for reruns), the given one
// keeps its own tokenizer.
TEST_F(ClassifySuite, ADrawnBackboneGetsATokenizerTrainedOnTheTrainingTexts) {
  const auto res = run_cli(command("mixed", "--gpt-neo " + kImport +
                                                "/hf_gpt_neo --tokenizer-type bpe --tokenizer-vocab 300 --max-len 8"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  const json r = results("mixed");
  EXPECT_TRUE(fs::exists(dir_ / "mixed" / "tokenizer" / "tokenizer.model"));
  const json& hybrid = r["rows"][2];
  ASSERT_EQ(hybrid["backbones"].size(), 2u);
  EXPECT_EQ(hybrid["backbones"][0]["origin"], "given");
  EXPECT_EQ(hybrid["backbones"][1]["origin"], "random");
  EXPECT_EQ(hybrid["backbones"][1]["vocab_size"], 300);
  EXPECT_NE(hybrid["backbones"][0]["vocab_size"], 300);
  const std::string diffs = hybrid["differences"].dump();
  EXPECT_NE(diffs.find("Mamba tokenizer: bpe 300 trained on the training texts"), std::string::npos) << diffs;
  EXPECT_NE(diffs.find("GPT-Neo tokenizer: the given directory's"), std::string::npos) << diffs;
}

TEST_F(ClassifySuite, BadInputGivesOneLineErrors) {
  auto expect_error = [](const std::string& args, const std::string& what) {
    const auto res = run_cli(args);
    EXPECT_NE(res.exit_code, 0) << args;
    EXPECT_NE(res.output.find(what), std::string::npos) << args << "\n" << res.output;
    EXPECT_EQ(test::count_lines(res.output), 1) << res.output;
  };
  const std::string out = " --out " + (dir_ / "bad").string();
  const std::string data = " --data " + (dir_ / "train.tsv").string();
  expect_error("classify suite --suite seed-004" + out, "--data: a labelled training file is required");
  expect_error("classify suite --suite seed-004" + data, "--out: an output directory is required");
  expect_error("classify suite --suite seed-999" + data + out, "--suite: unknown suite 'seed-999' (known: seed-004)");
  expect_error("classify suite" + data + out + " --gpt-neo /no/such/dir", "--gpt-neo: /no/such/dir is not a directory");
  expect_error("classify suite" + data + out + " --mamba /no/such/dir", "--mamba: /no/such/dir is not a directory");
  expect_error("classify suite --data /no/such.tsv" + out, "/no/such.tsv");
  expect_error("classify suite" + data + out + " --seed-sizes --train-size 5", "--seed-sizes gives each row");
  expect_error("classify suite" + data + out + " --tokenizer /no/such.json", "--tokenizer: /no/such.json is not a file");
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "results.json"));
}

TEST(ClassifySample, SeededCapKeepsFileOrderAndEveryClass) {
  std::vector<LabeledText> all;
  for (int i = 0; i < 100; ++i) all.push_back({i < 50 ? "neg" : "pos", "t" + std::to_string(i), ""});
  const auto a = sample_examples(all, 10, 3), b = sample_examples(all, 10, 3), c = sample_examples(all, 10, 4);
  ASSERT_EQ(a.size(), 10u);
  int pos = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].text, b[i].text);
    pos += a[i].label == "pos";
    if (i > 0) {
      EXPECT_LT(std::stoi(a[i - 1].text.substr(1)), std::stoi(a[i].text.substr(1)));  // file order
    }
  }
  EXPECT_GT(pos, 0);  // a sorted file still gives both classes
  EXPECT_LT(pos, 10);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].text != c[i].text;
  EXPECT_TRUE(differs);
  EXPECT_EQ(sample_examples(all, 0, 3).size(), 100u);
  EXPECT_EQ(sample_examples(all, 500, 3).size(), 100u);
}

}  // namespace
}  // namespace hymba::classify
