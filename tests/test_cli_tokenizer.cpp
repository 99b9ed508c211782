// `hymba tokenizer train|encode|decode` and a run trained with a BPE tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class CliTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_cli_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream out(path("text.txt"));
    for (int i = 0; i < 400; ++i)
      out << "line " << i << ": the quick brown fox jumps over the lazy dog " << (i % 7) << " times\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
};

int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST_F(CliTokenizer, TrainEncodeDecodeRoundTrip) {
  auto tr = run_cli("tokenizer train --type bpe --vocab-size 300 --data " + path("text.txt") + " --out " + path("t.model"));
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  ASSERT_TRUE(fs::exists(path("t.model")));
  auto enc = run_cli("tokenizer encode --tokenizer " + path("t.model") + " --text \"the lazy dog jumps\"");
  ASSERT_EQ(enc.exit_code, 0) << enc.output;
  std::string ids = enc.output;
  while (!ids.empty() && (ids.back() == '\n' || ids.back() == ' ')) ids.pop_back();
  ASSERT_FALSE(ids.empty());
  auto dec = run_cli("tokenizer decode --tokenizer " + path("t.model") + " --ids \"" + ids + "\"");
  ASSERT_EQ(dec.exit_code, 0) << dec.output;
  EXPECT_NE(dec.output.find("the lazy dog jumps"), std::string::npos) << dec.output;
}

TEST_F(CliTokenizer, ErrorsNameTheFlag) {
  auto type = run_cli("tokenizer train --type wordpiece --vocab-size 300 --data " + path("text.txt") + " --out " + path("x"));
  EXPECT_NE(type.exit_code, 0);
  EXPECT_NE(type.output.find("wordpiece"), std::string::npos) << type.output;
  auto small = run_cli("tokenizer train --type bpe --vocab-size 20 --data " + path("text.txt") + " --out " + path("x"));
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("--vocab-size"), std::string::npos) << small.output;
  auto ids = run_cli("tokenizer decode --tokenizer " + path("nothere.model") + " --ids 1,2");
  EXPECT_NE(ids.exit_code, 0);
  EXPECT_NE(ids.output.find("nothere.model"), std::string::npos) << ids.output;
}

// Out of memory while training (a 20 MB text in one line under a 600 MB
// address-space limit): one line naming the corpus and what to lower, not
// the generic line about --batch and --seq-len.
TEST_F(CliTokenizer, OutOfMemoryIsOneLineNamingTheCorpus) {
  if (test::kSlowBuildFactor > 1.0) GTEST_SKIP() << "a sanitizer reserves more address space than the limit";
  {
    std::ofstream big(path("one_line.txt"));
    const std::string chunk = "the quick brown fox jumps over the lazy dog while the cat sleeps; ";
    for (size_t n = 0; n < (size_t{20} << 20); n += chunk.size()) big << chunk;
  }
  const auto r = run_cli("--threads 1 tokenizer train --type byte-level-bpe --vocab-size 1000 --data " +
                             path("one_line.txt") + " --out " + path("t.json"),
                         "ulimit -v 600000;");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count_lines_with(r.output, "error:"), 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer train: out of memory reading " + path("one_line.txt")), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--vocab-size"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--batch"), std::string::npos) << r.output;
}

// A tokenizer.json in a checkpoint directory, text from stdin, JSON with
// offsets, and decoding with and without the special tokens.
TEST_F(CliTokenizer, EncodeStdinJsonAndDecodeSpecials) {
  fs::create_directories(path("ckpt"));
  fs::copy_file(std::string(HYMBA_FIXTURES_DIR) + "/tokenizers/llama2/tokenizer.json", path("ckpt/tokenizer.json"));
  auto enc = run_cli("tokenizer encode --tokenizer " + path("ckpt") + " --json --add-special-tokens",
                     "printf 'Hi there\\nsecond line' |");
  ASSERT_EQ(enc.exit_code, 0) << enc.output;
  const auto j = nlohmann::json::parse(enc.output);
  const auto ids = j["ids"].get<std::vector<int32_t>>();
  ASSERT_GT(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);  // <s>, from the file's TemplateProcessing
  ASSERT_EQ(j["offsets"].size(), ids.size());
  EXPECT_EQ(j["offsets"].back()[1], 20);  // the last token ends at the end of the 20-byte text
  std::string list;
  for (int32_t id : ids) list += std::to_string(id) + " ";
  auto keep = run_cli("tokenizer decode --keep-special-tokens --tokenizer " + path("ckpt/tokenizer.json"),
                      "echo '" + list + "' |");
  ASSERT_EQ(keep.exit_code, 0) << keep.output;
  EXPECT_EQ(keep.output, "<s> Hi there\nsecond line\n");
  auto skip = run_cli("tokenizer decode --tokenizer " + path("ckpt") + " --ids '" + list + "'");
  ASSERT_EQ(skip.exit_code, 0) << skip.output;
  EXPECT_EQ(skip.output, "Hi there\nsecond line\n");
  // Plain ids by default: no <s>.
  auto plain = run_cli("tokenizer encode --tokenizer " + path("ckpt") + " --text 'Hi'");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.rfind("1,", 0), 0u) << plain.output;
}

// --jsonl: many texts through one process, each line's ids equal to the
// same text encoded alone; a bad line is named by its number.
TEST_F(CliTokenizer, EncodeJsonLinesMatchesOneTextAtATime) {
  const std::string tj = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers/llama2/tokenizer.json";
  {
    std::ofstream in(path("in.jsonl"));
    in << "\"Hi there\"\n\n{\"text\": \"second\\nline\", \"id\": 7}\n\"caf\\u00e9 \\ud83d\\ude00\"\n";
  }
  auto r = run_cli("tokenizer encode --tokenizer " + tj + " --jsonl < " + path("in.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> lines;
  std::istringstream is(r.output);
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  const std::vector<std::string> texts = {"Hi there", "second\nline", "caf\u00e9 \U0001F600"};
  ASSERT_EQ(lines.size(), texts.size()) << r.output;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::ofstream(path("one.txt"), std::ios::binary) << texts[i];
    auto one = run_cli("tokenizer encode --tokenizer " + tj + " --json < " + path("one.txt"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    EXPECT_EQ(nlohmann::json::parse(lines[i]), nlohmann::json::parse(one.output)) << texts[i];
  }
  std::ofstream(path("bad.jsonl")) << "\"fine\"\n[1, 2]\n";
  auto bad = run_cli("tokenizer encode --tokenizer " + tj + " --jsonl < " + path("bad.jsonl"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("line 2"), std::string::npos) << bad.output;
}

TEST_F(CliTokenizer, TrainingWithABpeTokenizerStoresIt) {
  auto r = run_cli("--threads 1 train --preset transformer-global --scale tiny --data " + path("text.txt") + " --out " + path("run") +
                   " --tokenizer-type bpe --tokenizer-vocab 300 --steps 3 --batch 2 --seq-len 16 --quiet --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("run/best/tokenizer.model")));
  auto cfg = nlohmann::json::parse(std::ifstream(path("run/best/config.json")));
  EXPECT_EQ(cfg["vocab_size"], 300);
}

}  // namespace
}  // namespace hymba
