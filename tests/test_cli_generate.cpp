// `hymba generate` and `hymba bench infer` end to end, on a tiny checkpoint
// written by `hymba init` plus a byte tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli_util.h"
#include "tokenizer/tokenizer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class CliGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("hymba_cli_generate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto init = run_cli("init --preset hybrid-official --scale tiny --vocab-size 259 --seed 5 --out " +
                              path("ck"));
    ASSERT_EQ(init.exit_code, 0) << init.output;
    make_byte_tokenizer()->save(path("ck/tokenizer.model"));
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  static fs::path dir_;
};

fs::path CliGenerate::dir_;

TEST_F(CliGenerate, OnePromptStreamsTextAndReportsSpeed) {
  const auto r = run_cli("generate --ckpt " + path("ck") + " --prompt Hello --max-new-tokens 12 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Hello", 0), 0u) << r.output;  // the prompt, then its continuation
  EXPECT_GT(r.output.size(), std::string("Hello\n").size());
  EXPECT_NE(r.output.find("tok/s"), std::string::npos) << r.output;
  // Same seed, same text.
  const auto again = run_cli("generate --ckpt " + path("ck") + " --prompt Hello --max-new-tokens 12 --seed 3");
  EXPECT_EQ(r.output.substr(0, r.output.find("new tokens")), again.output.substr(0, again.output.find("new tokens")));
}

TEST_F(CliGenerate, BatchAndPromptFilePrintEverySequence) {
  const auto batch = run_cli("generate --ckpt " + path("ck") +
                             " --prompt Hi --batch 3 --max-new-tokens 5 --temperature 1 --top-k 40 --top-p 0.9");
  ASSERT_EQ(batch.exit_code, 0) << batch.output;
  EXPECT_EQ(count(batch.output, "=== sequence "), 3) << batch.output;
  EXPECT_NE(batch.output.find("=== sequence 3/3"), std::string::npos);

  std::ofstream(path("prompts.txt")) << "first\n\nsecond prompt\n";
  const auto file = run_cli("generate --ckpt " + path("ck") + " --prompt-file " + path("prompts.txt") +
                            " --max-new-tokens 4 --temperature 0 --stop zz");
  ASSERT_EQ(file.exit_code, 0) << file.output;
  EXPECT_EQ(count(file.output, "=== sequence "), 2) << file.output;
  EXPECT_NE(file.output.find("second prompt"), std::string::npos);
}

TEST_F(CliGenerate, RunDirectoryIsFollowedToItsLatestCheckpoint) {
  fs::create_directories(path("run"));
  fs::copy(path("ck"), path("run/ckpt-7"));
  std::ofstream(path("run/latest")) << "ckpt-7\n";
  const auto r = run_cli("generate --ckpt " + path("run") + " --prompt abc --max-new-tokens 3 --temperature 0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CliGenerate, ErrorsAreOneLineNamingTheFlagOrFile) {
  const std::string ck = " --ckpt " + path("ck");
  std::ofstream(path("empty.txt")) << "\n\n";
  struct Case {
    std::string args, names;
  };
  const std::vector<Case> cases = {
      {"generate" + ck, "--prompt"},
      {"generate" + ck + " --prompt \"\"", "--prompt"},
      {"generate" + ck + " --prompt-file " + path("empty.txt"), "empty.txt"},
      {"generate" + ck + " --prompt-file " + path("missing.txt"), "missing.txt"},
      {"generate" + ck + " --prompt x --temperature -1", "--temperature"},
      {"generate" + ck + " --prompt x --top-p 0", "--top-p"},
      {"generate" + ck + " --prompt x --batch 0", "--batch"},
      {"generate" + ck + " --prompt x --max-new-tokens 0", "--max-new-tokens"},
      {"generate --ckpt " + path("nowhere") + " --prompt x", "nowhere"},
      {"bench infer --preset nosuch --scale tiny", "nosuch"},
      {"generate" + ck + " --prompt x --weights q5", "--weights"},
      {"bench infer --preset hybrid-official --scale tiny --weights int8", "--weights"},
      {"serve" + ck + " --port 0 --weights f16", "--weights"},
  };
  for (const Case& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(test::count_lines(r.output), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST_F(CliGenerate, PromptFileDashReadsStdin) {
  const auto r = run_cli("generate --ckpt " + path("ck") + " --prompt-file - --max-new-tokens 3 --temperature 0",
                         "printf 'from stdin\\nsecond line\\n' |");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "=== sequence "), 2) << r.output;
  EXPECT_NE(r.output.find("from stdin"), std::string::npos) << r.output;
  const auto empty = run_cli("generate --ckpt " + path("ck") + " --prompt-file - </dev/null");
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("stdin"), std::string::npos) << empty.output;
}

// --json: one object per line and sequence, in prompt order, whatever order they finish in.
TEST_F(CliGenerate, JsonPrintsOneObjectPerSequenceInPromptOrder) {
  std::ofstream(path("three.txt")) << "a\nbb\nccc\n";
  const auto r = run_cli("generate --ckpt " + path("ck") + " --prompt-file " + path("three.txt") +
                         " --batch 2 --max-new-tokens 6 --temperature 1 --seed 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line))
    if (line.rfind("{", 0) == 0) objects.push_back(nlohmann::json::parse(line));  // the speed line is stderr's
  ASSERT_EQ(objects.size(), 6u) << r.output;
  const char* prompts[] = {"a", "bb", "ccc"};
  for (size_t i = 0; i < objects.size(); ++i) {
    const nlohmann::json& o = objects[i];
    EXPECT_EQ(o["sequence"], i);
    EXPECT_EQ(o["prompt_index"], i / 2);
    EXPECT_EQ(o["prompt"], prompts[i / 2]);
    EXPECT_EQ(o["prompt_ids"].size(), std::string(prompts[i / 2]).size());  // byte tokenizer
    EXPECT_LE(o["ids"].size(), 6u);
    EXPECT_TRUE(o["text"].is_string());
    EXPECT_TRUE(o["finish_reason"] == "length" || o["finish_reason"] == "stop" || o["finish_reason"] == "eos")
        << o.dump();
    EXPECT_GE(o["seconds"].get<double>(), 0.0);
    EXPECT_GE(o["batch_decode_seconds"].get<double>(), 0.0);
  }
  // A single sequence prints JSON too, not streamed text.
  const auto one = run_cli("generate --ckpt " + path("ck") + " --prompt Hi --max-new-tokens 3 --json");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(one.output.rfind("{", 0), 0u) << one.output;
  EXPECT_EQ(nlohmann::json::parse(one.output.substr(0, one.output.find('\n')))["prompt"], "Hi");
}

TEST_F(CliGenerate, TopPHelpAndCheckAgree) {
  const auto help = run_cli("generate --help");
  EXPECT_NE(help.output.find("(0 - 1]"), std::string::npos) << help.output;
  const std::string base = "generate --ckpt " + path("ck") + " --prompt x --max-new-tokens 1 --top-p ";
  for (const char* bad : {"0", "1.5", "-0.1", "abc", "nan"}) {
    const auto r = run_cli(base + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_EQ(test::count_lines(r.output), 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--top-p"), std::string::npos) << bad << "\n" << r.output;
  }
  for (const char* good : {"0.001", "1"}) EXPECT_EQ(run_cli(base + good).exit_code, 0) << good;
}

// --logit-bias bans a token (the greedy first one changes); malformed or
// out-of-vocabulary biases and penalties out of range are one-line errors.
TEST_F(CliGenerate, LogitBiasAndPenaltyFlags) {
  const std::string base = "generate --ckpt " + path("ck") + " --prompt Hello --max-new-tokens 3 --temperature 0 --json";
  auto ids = [&](const std::string& extra) {
    const auto r = run_cli(base + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output.substr(0, r.output.find('\n')))["ids"].get<std::vector<int32_t>>();
  };
  const std::vector<int32_t> free_run = ids("");
  ASSERT_FALSE(free_run.empty());
  const std::vector<int32_t> banned = ids(" --logit-bias " + std::to_string(free_run[0]) + "=-100");
  ASSERT_FALSE(banned.empty());
  EXPECT_NE(banned[0], free_run[0]);
  EXPECT_EQ(ids(" --logit-bias 7=100 --logit-bias 8=-5"), std::vector<int32_t>(3, 7));
  EXPECT_EQ(ids(" --min-p 0.5 --presence-penalty 1 --frequency-penalty 0.5 --repetition-penalty 1.2").size(), 3u);
  for (const char* bad : {" --logit-bias abc", " --logit-bias 5=200", " --logit-bias 99999999=1",
                          " --presence-penalty 3", " --repetition-penalty 0", " --min-p 2"}) {
    const auto r = run_cli(base + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_EQ(test::count_lines(r.output), 1) << bad << "\n" << r.output;
  }
}

// --weights q8: generate runs its decode steps on 8-bit block weights, and
// bench infer reports the format and the bytes of quantized weights it made.
TEST_F(CliGenerate, WeightsQ8GeneratesAndBenchReportsIt) {
  const auto r = run_cli("generate --ckpt " + path("ck") + " --prompt Hello --max-new-tokens 8 --weights q8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto g = nlohmann::json::parse(r.output.substr(0, r.output.find('\n')));
  EXPECT_EQ(g["ids"].size(), 8u) << g;
  const auto b = run_cli("bench infer --preset hybrid-official --scale tiny --new-tokens 4 --contexts 16 --weights q8 --json");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto j = nlohmann::json::parse(b.output);
  EXPECT_EQ(j["weights"], "q8");
  EXPECT_GT(j["quantized_weight_bytes"].get<int64_t>(), 0);
  const auto f = nlohmann::json::parse(run_cli("bench infer --preset hybrid-official --scale tiny --new-tokens 4 "
                                                "--contexts 16 --json").output);
  EXPECT_EQ(f["weights"], "f32");
  EXPECT_EQ(f["quantized_weight_bytes"], 0);
}

// eval --top1-out / --top1-against: the float32 run's argmax per position
// agrees with itself exactly, with q4 mostly but not wholly on random
// weights; files from other text, or no such file, are one-line errors.
TEST_F(CliGenerate, EvalComparesTopOnePredictionsAcrossFormats) {
  {
    std::ofstream text(path("text.txt"));  // 600+ byte tokens: two blocks of 256 and more
    for (int i = 0; i < 5; ++i)
      text << "To be, or not to be, that is the question " << i << ": whether 'tis nobler in the mind to suffer.\n";
  }
  const std::string base = "--threads 1 eval --ckpt " + path("ck") + " --data " + path("text.txt") +
                           " --split all --seq-len 32 --json";
  // stdout alone: a slow machine adds progress lines on stderr.
  const auto f = test::run_cli_stdout(base + " --top1-out " + path("f32.json"));
  ASSERT_EQ(f.exit_code, 0) << f.errors;
  const auto saved = nlohmann::json::parse(std::ifstream(path("f32.json")));
  const int64_t tokens = nlohmann::json::parse(f.output)["tokens"].get<int64_t>();
  ASSERT_GT(tokens, 0);
  EXPECT_EQ(static_cast<int64_t>(saved["top1"].size()), tokens);
  const auto self = nlohmann::json::parse(test::run_cli_stdout(base + " --top1-against " + path("f32.json")).output);
  EXPECT_EQ(self["top1_agreement"], 1.0);
  EXPECT_EQ(self["loss"], nlohmann::json::parse(f.output)["loss"]) << "f32 through the decoder scores as before";
  // The agreement is the share of positions where the two saved files agree:
  // counted here from both files, so the check holds on any machine (a tiny
  // random model's near-flat logits make the share itself machine-dependent).
  const auto q4 =
      test::run_cli_stdout(base + " --weights q4 --top1-out " + path("q4.json") + " --top1-against " + path("f32.json"));
  ASSERT_EQ(q4.exit_code, 0) << q4.errors;
  const double agree = nlohmann::json::parse(q4.output)["top1_agreement"].get<double>();
  const auto mine = nlohmann::json::parse(std::ifstream(path("q4.json")))["top1"];
  ASSERT_EQ(mine.size(), saved["top1"].size());
  int64_t same = 0;
  for (size_t i = 0; i < mine.size(); ++i) same += mine[i] == saved["top1"][i];
  EXPECT_DOUBLE_EQ(agree, static_cast<double>(same) / static_cast<double>(mine.size()));
  EXPECT_LT(same, static_cast<int64_t>(mine.size())) << "4-bit weights change some predictions";
  EXPECT_GT(agree, 0.1) << "far above chance (1/259): the predictions come from the same model";
  const auto other = run_cli("--threads 1 eval --ckpt " + path("ck") + " --data " + path("text.txt") +
                             " --split all --seq-len 16 --top1-against " + path("f32.json"));
  test::expect_one_line(other, {"f32.json", "--seq-len"});
  test::expect_one_line(run_cli(base + " --top1-against " + path("text.txt")), {"text.txt"});
}

TEST_F(CliGenerate, BenchInferJsonHasTheFigures) {
  const auto r = run_cli("bench infer --preset hybrid-official --scale tiny --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s_batch1", "decode_tokens_per_s_batch",
                          "cache_bytes", "activation_bytes", "contexts", "params", "threads"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["decode_tokens_per_s_batch1"].get<double>(), 0.0);
  // Batch-1 steps have settled on one thread or all of them (Decoder::step_threads).
  const int settled = j.at("decode_threads_batch1").get<int>();
  EXPECT_TRUE(settled == 1 || settled == j.at("threads").get<int>()) << settled;
  EXPECT_EQ(j["batch"], 16);
  EXPECT_EQ(j["cache_bytes"]["total"], j["cache_bytes"]["formula"]);
  EXPECT_GT(j["activation_bytes"]["prefill"].get<int64_t>(), 0);
  ASSERT_EQ(j["contexts"].size(), 3u);
  EXPECT_EQ(j["contexts"][2]["context"], 4096);
  EXPECT_GT(j["contexts"][2]["decode_ms_per_token"].get<double>(), 0.0);
  EXPECT_GT(j["contexts"][2]["prefill_tokens_per_s"].get<double>(), 0.0);
  // The bandwidth bar, measured in the same run.
  EXPECT_GT(j["read_gb_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["decode_bytes_per_token"].get<int64_t>(), 4 * 1000);
  EXPECT_NEAR(j["bandwidth_limit_tokens_per_s"].get<double>(),
              j["read_gb_per_s"].get<double>() * 1e9 / j["decode_bytes_per_token"].get<double>(), 1e-6);
  EXPECT_GT(j["decode_share_of_bandwidth"].get<double>(), 0.0);
  // The share is the median of rounds that pair decode steps with a read.
  ASSERT_EQ(j["bandwidth_rounds"].size(), 5u);
  std::vector<double> shares;
  for (const auto& round : j["bandwidth_rounds"]) {
    EXPECT_GT(round["decode_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(round["read_gb_per_s"].get<double>(), 0.0);
    EXPECT_NEAR(round["share"].get<double>(),
                round["decode_tokens_per_s"].get<double>() * j["decode_bytes_per_token"].get<double>() /
                    (round["read_gb_per_s"].get<double>() * 1e9),
                1e-9);
    shares.push_back(round["share"].get<double>());
  }
  std::sort(shares.begin(), shares.end());
  EXPECT_EQ(j["decode_share_of_bandwidth"].get<double>(), shares[2]);
  EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_GE(j["load_s"].get<double>(), 0.0);
}

// --weights bf16 runs, and a step reads half the float32 bytes of the linear
// weights (everything else is the same).
TEST_F(CliGenerate, BenchInferBf16ReadsFewerBytes) {
  const std::string base = "bench infer --preset hybrid-official --scale tiny --new-tokens 2 --batch 2 --contexts 8 --json";
  const auto f = run_cli(base), b = run_cli(base + " --weights bf16");
  ASSERT_EQ(f.exit_code, 0) << f.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto jf = nlohmann::json::parse(f.output), jb = nlohmann::json::parse(b.output);
  EXPECT_EQ(jb["weights"], "bf16");
  const int64_t bf16_bytes = jb["quantized_weight_bytes"].get<int64_t>();
  EXPECT_GT(bf16_bytes, 0);
  EXPECT_EQ(jf["decode_bytes_per_token"].get<int64_t>() - jb["decode_bytes_per_token"].get<int64_t>(), bf16_bytes);
}

}  // namespace
}  // namespace hymba
