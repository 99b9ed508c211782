// Hugging Face's BpeTrainer reproduced (src/tokenizer/train/bpe_trainer.h): merges on
// hand-worked corpora, GPT-2's pre-tokenizer, and the whole merge list of the
// real HF trainer on the parity texts (tests/fixtures/tokenizers/bpe_train,
// written by tools/tokenizer_parity/bpe_train_reference.js).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "tokenizer/train/bpe_trainer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using Merges = std::vector<std::pair<std::string, std::string>>;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The Hugging Face course's corpus: hug x10, pug x5, pun x12, bun x4, hugs x5.
// Alphabet (by code point): b g h n p s u = ids 0..6. Pair counts: ug 20,
// pu 17, un 16, hu 15, gs 5, bu 4.
//   1. u g  (20) -> ug   7    words: h ug, p ug, p u n, b u n, h ug s
//   2. u n  (16) -> un   8    (p u 12 now, un 16)
//   3. h ug (15) -> hug  9
//   4. p un (12) -> pun  10
//   5. p ug (5) and hug s (5) tie: the smaller pair (4,7) < (9,5) goes first -> pug 11
//   6. hug s (5) -> hugs 12
//   7. b un (4) -> bun 13
const std::vector<std::pair<std::string, uint64_t>> kCourse = {
    {"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}};

TEST(BpeTrainer, CourseCorpusMergesInHfOrderWithTieBreak) {
  BpeTrainerOptions o;
  const BpeTrainResult r = train_bpe(kCourse, o);
  const Merges want = {{"u", "g"}, {"u", "n"}, {"h", "ug"}, {"p", "un"}, {"p", "ug"}, {"hug", "s"}, {"b", "un"}};
  EXPECT_EQ(r.merges, want);
  const std::vector<std::string> vocab = {"b",  "g",   "h",   "n",   "p",   "s",    "u",
                                          "ug", "un", "hug", "pun", "pug", "hugs", "bun"};
  EXPECT_EQ(r.vocab, vocab);
}

TEST(BpeTrainer, ResultDoesNotDependOnWordOrder) {
  auto reversed = kCourse;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(train_bpe(reversed, {}).merges, train_bpe(kCourse, {}).merges);
}

TEST(BpeTrainer, MinFrequencyAndVocabSizeStopTraining) {
  BpeTrainerOptions o;
  o.min_frequency = 5;  // bun's 4 is below
  EXPECT_EQ(train_bpe(kCourse, o).merges.size(), 6u);
  o.min_frequency = 13;  // only ug (20), un (16), hug (15) reach it
  EXPECT_EQ(train_bpe(kCourse, o).merges.size(), 3u);
  BpeTrainerOptions v;
  v.vocab_size = 10;  // 7 characters + 3 merges
  const BpeTrainResult r = train_bpe(kCourse, v);
  EXPECT_EQ(r.vocab.size(), 10u);
  EXPECT_EQ(r.merges.back(), (std::pair<std::string, std::string>{"h", "ug"}));
}

TEST(BpeTrainer, SpecialTokensFirstThenInitialAlphabetSortedByCodePoint) {
  BpeTrainerOptions o;
  o.special_tokens = {"<unk>", "<pad>"};
  o.initial_alphabet = {"z", "a"};
  o.vocab_size = 9;  // 2 special + b g h n p s u + a z = 11 > 9: no merge at all
  const BpeTrainResult r = train_bpe(kCourse, o);
  const std::vector<std::string> vocab = {"<unk>", "<pad>", "a", "b", "g", "h", "n", "p", "s", "u", "z"};
  EXPECT_EQ(r.vocab, vocab);
  EXPECT_TRUE(r.merges.empty());
}

// "aaa" and "aaaa": (a,a) is counted in overlapping windows (2 + 3) and
// merged from the left: a a a -> aa a, a a a a -> aa aa. That leaves
// (aa,a) = 1 and (aa,aa) = 1; the tie goes to the smaller pair (1,0) before
// (1,1). HF does not take the merged pair's own count down, so (a,a) keeps a
// stale count but is never queued again.
TEST(BpeTrainer, RepeatedCharacterMergesFromTheLeft) {
  const BpeTrainResult r = train_bpe({{"aaaa", 1}, {"aaa", 1}}, {});
  const Merges want = {{"a", "a"}, {"aa", "a"}, {"aa", "aa"}};
  EXPECT_EQ(r.merges, want);
}

TEST(BpeTrainer, ByteLevelCharacters) {
  const auto& bl = byte_level_chars();
  ASSERT_EQ(bl.size(), 256u);
  EXPECT_EQ(bl[' '], "\xC4\xA0");   // U+0120 Ġ
  EXPECT_EQ(bl['\n'], "\xC4\x8A");  // U+010A Ċ
  EXPECT_EQ(bl['A'], "A");
  EXPECT_EQ(bl[0xAD], "\xC5\x83");  // soft hyphen -> U+0143
  EXPECT_EQ(bl[0xE9], "\xC3\xA9");  // é stands for itself
}

TEST(BpeTrainer, Gpt2PreTokenizer) {
  const std::string sp = "\xC4\xA0";  // Ġ, the byte-level space
  const std::vector<std::string> want = {"Hello", sp + "world", "'s", sp, sp + "end", "\xC4\x8A"};
  EXPECT_EQ(byte_level_pretokenize("Hello world's  end\n"), want);
  // Unicode classes come from PCRE2: Devanagari vowel signs are marks (\p{M}),
  // neither letters nor numbers, so "नमस्ते" splits at them as GPT-2's regex does.
  const auto hindi = byte_level_pretokenize("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D");  // नमस्
  EXPECT_EQ(hindi.size(), 2u);
  // Numbers in other scripts are \p{N}.
  EXPECT_EQ(byte_level_pretokenize("x \xD9\xA1\xD9\xA2").size(), 2u);  // "x", " ١٢"
  EXPECT_EQ(byte_level_pretokenize(" hi", true).front(), "\xC4\xA0hi");
  EXPECT_EQ(byte_level_pretokenize("hi", true).front(), "\xC4\xA0hi");
}

// The real HF trainer (BpeTrainer::default(), ByteLevel pre-tokenizer, one
// sequence per line of the corpus) against ours: every token id and every
// merge, in order.
TEST(BpeTrainer, MatchesHuggingFaceTrainerOnParityTexts) {
  const std::string dir = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers/bpe_train";
  const std::string corpus = read_file(dir + "/corpus.txt");
  ASSERT_FALSE(corpus.empty());
  std::vector<std::string> lines;
  for (size_t at = 0; at < corpus.size();) {
    const size_t nl = corpus.find('\n', at);
    const size_t end = nl == std::string::npos ? corpus.size() : nl + 1;
    lines.push_back(corpus.substr(at, end - at));
    at = end;
  }
  ByteLevelBpeOptions o;
  o.vocab_size = 30000;
  o.min_frequency = 0;
  o.special_tokens = {};
  o.full_byte_alphabet = false;  // BpeTrainer::default() has no initial alphabet
  const BpeTrainResult r = train_byte_level_bpe(lines, o);

  const auto ref = nlohmann::json::parse(read_file(dir + "/hf_reference.json"));
  const auto& vocab = ref["model"]["vocab"];
  ASSERT_EQ(r.vocab.size(), vocab.size());
  for (size_t i = 0; i < r.vocab.size(); ++i) {
    ASSERT_TRUE(vocab.contains(r.vocab[i])) << "token " << i;
    ASSERT_EQ(vocab[r.vocab[i]].get<size_t>(), i) << "token " << r.vocab[i];
  }
  const auto& merges = ref["model"]["merges"];
  ASSERT_EQ(r.merges.size(), merges.size());
  for (size_t i = 0; i < r.merges.size(); ++i) {
    ASSERT_EQ(r.merges[i].first, merges[i][0].get<std::string>()) << "merge " << i;
    ASSERT_EQ(r.merges[i].second, merges[i][1].get<std::string>()) << "merge " << i;
  }

  // Seed 001's settings change where training stops, not the order: special
  // tokens and a full byte alphabet shift every id alike (ties keep their
  // order), vocab_size and min_frequency cut the list short.
  auto expect_prefix = [&](const BpeTrainResult& s, const std::string& what) {
    ASSERT_LE(s.merges.size(), merges.size()) << what;
    for (size_t i = 0; i < s.merges.size(); ++i) {
      ASSERT_EQ(s.merges[i].first, merges[i][0].get<std::string>()) << "merge " << i << ", " << what;
      ASSERT_EQ(s.merges[i].second, merges[i][1].get<std::string>()) << "merge " << i << ", " << what;
    }
  };
  for (const bool full : {false, true}) {
    ByteLevelBpeOptions seed;  // <unk> <pad> <bos> <eos>, min frequency 2
    seed.full_byte_alphabet = full;
    const size_t alphabet = full ? 256 : vocab.size() - merges.size();
    seed.vocab_size = static_cast<int32_t>(4 + alphabet + 1000);
    const BpeTrainResult by_size = train_byte_level_bpe(lines, seed);
    EXPECT_EQ(by_size.vocab.size(), static_cast<size_t>(seed.vocab_size));
    EXPECT_EQ(by_size.vocab[3], "<eos>");
    EXPECT_EQ(by_size.merges.size(), 1000u);
    expect_prefix(by_size, full ? "vocab-limited, 256 bytes" : "vocab-limited, corpus alphabet");
    seed.vocab_size = 30000;  // now min frequency 2 stops it
    const BpeTrainResult by_count = train_byte_level_bpe(lines, seed);
    EXPECT_LT(by_count.merges.size(), merges.size());
    EXPECT_GT(by_count.merges.size(), 1000u);
    expect_prefix(by_count, full ? "min-frequency, 256 bytes" : "min-frequency, corpus alphabet");
  }
}

// Seed 001's setup on a small text: the written tokenizer.json loads, the
// special tokens are ids 0..3, and encoding follows the learnt merges.
TEST(BpeTrainer, SeedTokenizerJsonLoadsAndEncodes) {
  const std::string text = "hug hug hug pug pun pun bun hugs\nhug pun\n";
  ByteLevelBpeOptions o;
  o.vocab_size = 300;  // 4 special + 256 bytes + up to 40 merges
  const BpeTrainResult r = train_byte_level_bpe({text}, o);
  ASSERT_GE(r.vocab.size(), 4u);
  EXPECT_EQ(r.vocab[0], "<unk>");
  EXPECT_EQ(r.vocab[3], "<eos>");
  const fs::path dir = fs::temp_directory_path() / "hymba_test_bpe_trainer";
  fs::create_directories(dir);
  {
    std::ofstream(dir / "tokenizer.json") << byte_level_bpe_tokenizer_json(r, o);
    std::ofstream(dir / "tokenizer_config.json") << byte_level_bpe_tokenizer_config(o);
  }
  const auto tok = load_tokenizer((dir / "tokenizer.json").string());
  EXPECT_EQ(tok->vocab_size(), static_cast<int32_t>(r.vocab.size()));
  EXPECT_EQ(tok->eos_id(), 3);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->pad_id(), 1);
  const auto ids = tok->encode("hug pun");
  auto id_of = [&](const std::string& t) {
    return static_cast<int32_t>(std::find(r.vocab.begin(), r.vocab.end(), t) - r.vocab.begin());
  };
  const std::vector<int32_t> want = {id_of("hug"), id_of("\xC4\xA0pun")};
  EXPECT_EQ(ids, want);
  EXPECT_EQ(tok->decode(ids), "hug pun");
  fs::remove_all(dir);
}

// Seed 001 passes no initial alphabet: only the bytes of the corpus get ids,
// sorted by the code point of their byte-level character (so "Ġ", U+0120,
// comes after the letters).
TEST(BpeTrainer, SeedAlphabetHasOnlyTheCorpusBytes) {
  ByteLevelBpeOptions o;
  o.full_byte_alphabet = false;
  o.vocab_size = 9;
  const BpeTrainResult r = train_byte_level_bpe({"ab ba"}, o);
  const std::vector<std::string> vocab = {"<unk>", "<pad>", "<bos>", "<eos>", "a", "b", "\xC4\xA0"};
  ASSERT_GE(r.vocab.size(), vocab.size());
  EXPECT_EQ(std::vector<std::string>(r.vocab.begin(), r.vocab.begin() + 7), vocab);
  o.full_byte_alphabet = true;
  o.vocab_size = 4 + 256;
  EXPECT_EQ(train_byte_level_bpe({"ab ba"}, o).vocab.size(), 260u);
}

// `hymba tokenizer train --type byte-level-bpe`: writes tokenizer.json and
// tokenizer_config.json (creating the directory); encode/decode use them.
TEST(BpeTrainerCli, TrainsWritesAndLoads) {
  const fs::path dir = fs::temp_directory_path() / ("hymba_bpe_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "text.txt");
    for (int i = 0; i < 200; ++i) out << "line " << i << ": the quick brown fox jumps over the lazy dog\n";
  }
  const std::string tj = (dir / "tok" / "tokenizer.json").string();
  auto tr = test::run_cli("tokenizer train --type byte-level-bpe --vocab-size 300 --min-frequency 2 --data " +
                          (dir / "text.txt").string() + " --out " + tj);
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  ASSERT_TRUE(fs::exists(dir / "tok" / "tokenizer_config.json"));
  const auto j = nlohmann::json::parse(read_file(tj));
  EXPECT_EQ(j["model"]["vocab"].size(), 300u);
  EXPECT_EQ(j["model"]["vocab"]["<eos>"], 3);
  EXPECT_EQ(j["model"]["merges"].size(), 300u - 260u);
  auto enc = test::run_cli("tokenizer encode --tokenizer " + tj + " --text \"the lazy dog\"");
  ASSERT_EQ(enc.exit_code, 0) << enc.output;
  std::string ids = enc.output;
  while (!ids.empty() && (ids.back() == '\n' || ids.back() == ' ')) ids.pop_back();
  auto dec = test::run_cli("tokenizer decode --tokenizer " + tj + " --ids \"" + ids + "\"");
  ASSERT_EQ(dec.exit_code, 0) << dec.output;
  EXPECT_NE(dec.output.find("the lazy dog"), std::string::npos) << dec.output;

  // The seed's alphabet: only the corpus's bytes; it loads, and other bytes encode to <unk> as in HF.
  auto seed = test::run_cli("tokenizer train --type byte-level-bpe --corpus-alphabet --vocab-size 100 --data " +
                            (dir / "text.txt").string() + " --out " + (dir / "seed" / "tokenizer.json").string());
  ASSERT_EQ(seed.exit_code, 0) << seed.output;
  EXPECT_NE(seed.output.find("of the 256 byte tokens"), std::string::npos) << seed.output;
  EXPECT_NE(seed.output.find("first document"), std::string::npos) << seed.output;
  const auto seed_tok = load_tokenizer((dir / "seed" / "tokenizer.json").string());
  EXPECT_EQ(seed_tok->unk_id(), 0);
  const std::vector<int32_t> unk_ids = seed_tok->encode("Z");  // not in the corpus
  EXPECT_EQ(unk_ids, std::vector<int32_t>{0});
  EXPECT_EQ(seed_tok->decode(seed_tok->encode("the lazy dog")), "the lazy dog");
  const auto sj = nlohmann::json::parse(read_file((dir / "seed" / "tokenizer.json").string()));
  // 4 special + the corpus's ~30 characters + merges until no pair is seen twice
  EXPECT_LE(sj["model"]["vocab"].size(), 100u);
  EXPECT_GT(sj["model"]["vocab"].size(), 60u);
  EXPECT_FALSE(sj["model"]["vocab"].contains("\xC4\x80"));  // byte 0 is not in the corpus
  fs::remove_all(dir);
}

TEST(BpeTrainerCli, ErrorsNameTheFlag) {
  auto small = test::run_cli("tokenizer train --type byte-level-bpe --vocab-size 4 --data default --out /tmp/x.json");
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("--vocab-size"), std::string::npos) << small.output;
  auto nodata = test::run_cli("tokenizer train --type byte-level-bpe --out /tmp/x.json");
  EXPECT_NE(nodata.exit_code, 0);
  EXPECT_NE(nodata.output.find("--data"), std::string::npos) << nodata.output;
}

}  // namespace
}  // namespace hymba

namespace hymba {
namespace {

// One huge "word" (a line with no spaces) cost a pass over all of it per merge:
// minutes for 50 MB. Such words are trained as pieces of at most 8,192 bytes, so
// no token grows past that and training takes milliseconds.
TEST(ByteLevelBpeTrainer, AHugeSingleWordIsTrainedInBoundedPieces) {
  std::string line;
  for (int i = 0; i < (1 << 20); ++i) line += "ab";  // 2 MB, one pre-tokenized word
  ByteLevelBpeOptions o;
  o.vocab_size = 64;
  o.min_frequency = 0;
  o.special_tokens = {};
  o.full_byte_alphabet = false;
  const auto start = std::chrono::steady_clock::now();
  const BpeTrainResult r = train_byte_level_bpe({line}, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t longest = 0;
  for (const std::string& t : r.vocab) longest = std::max(longest, t.size());
  EXPECT_EQ(longest, 8192u);  // "ab" doubled up to the piece size, and no further
  EXPECT_LT(seconds, 10.0 * test::kSlowBuildFactor);
}

}  // namespace
}  // namespace hymba
