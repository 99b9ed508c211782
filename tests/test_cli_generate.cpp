// `hymba generate` and `hymba bench infer` end to end, on a tiny checkpoint
// written by `hymba init` plus a byte tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli_util.h"
#include "data/tokenizer.h"

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
  };
  for (const Case& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(test::count_lines(r.output), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST_F(CliGenerate, BenchInferJsonHasTheFigures) {
  const auto r = run_cli("bench infer --preset hybrid-official --scale tiny --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s_batch1", "decode_tokens_per_s_batch",
                          "cache_bytes", "activation_bytes", "contexts", "params", "threads"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["decode_tokens_per_s_batch1"].get<double>(), 0.0);
  EXPECT_EQ(j["batch"], 16);
  EXPECT_EQ(j["cache_bytes"]["total"], j["cache_bytes"]["formula"]);
  EXPECT_GT(j["activation_bytes"]["prefill"].get<int64_t>(), 0);
  ASSERT_EQ(j["contexts"].size(), 3u);
  EXPECT_EQ(j["contexts"][2]["context"], 4096);
  EXPECT_GT(j["contexts"][2]["decode_ms_per_token"].get<double>(), 0.0);
}

}  // namespace
}  // namespace hymba
