// HF tokenizer.json byte-level BPE (GPT-NeoX shape) on the committed fixture
// tests/fixtures/import/hf_mamba/tokenizer.json. Its ids are hand-derived:
// 0 <|endoftext|>, 1 <|padding|>, then the 256 byte characters in code point
// order ('!'..'~' are ids 2..95, so byte b in that range is id b - 31; space's
// character U+0120 'Ġ' is id 222, newline's U+010A is id 200), then one id per
// merge in merge order: Ġt 258, he 259, Ġthe 260, ll 261, ell 262, hell 263,
// hello 264, Ġw 265, or 266, Ġwor 267, ld 268, Ġworld 269, 12 270, 's 271.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/hf_tokenizer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(HYMBA_FIXTURES_DIR) + "/import/hf_mamba";

int32_t ascii(char c) { return static_cast<int32_t>(c) - 31; }
constexpr int32_t kSpace = 222, kNewline = 200;

class HfBpe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = load_tokenizer(kDir + "/tokenizer.json").release(); }
  static void TearDownTestSuite() { delete tok_; }
  static std::vector<int32_t> enc(const std::string& s) { return tok_->encode(s); }
  static Tokenizer* tok_;
};
Tokenizer* HfBpe::tok_ = nullptr;

TEST_F(HfBpe, MergesByRank) {
  // "h e" (rank 1) first, then "l l" (rank 3); "e ll" then no longer applies,
  // so "hello" is he|ll|o although the vocabulary has "hello".
  EXPECT_EQ(enc("hello world"), (std::vector<int32_t>{259, 261, ascii('o'), 269}));
  EXPECT_EQ(enc("the"), (std::vector<int32_t>{ascii('t'), 259}));  // no leading space: no Ġt
  EXPECT_EQ(enc(" the"), (std::vector<int32_t>{260}));
  EXPECT_EQ(enc("cell"), (std::vector<int32_t>{ascii('c'), 262}));
}

TEST_F(HfBpe, Gpt2SplitPattern) {
  // contractions, " ?\p{N}+", " ?\p{L}+"
  EXPECT_EQ(enc("the 12 cats's"), (std::vector<int32_t>{ascii('t'), 259, kSpace, 270, kSpace, ascii('c'), ascii('a'),
                                                        ascii('t'), ascii('s'), 271}));
  // digits and letters never share a piece: "a12" is "a" then "12"
  EXPECT_EQ(enc("a12"), (std::vector<int32_t>{ascii('a'), 270}));
  // "\s+(?!\S)": of two spaces before a word, the last leads the word
  EXPECT_EQ(enc("a  b"), (std::vector<int32_t>{ascii('a'), kSpace, kSpace, ascii('b')}));
  // trailing whitespace stays one piece; punctuation runs with a leading space
  EXPECT_EQ(enc("x\n\n"), (std::vector<int32_t>{ascii('x'), kNewline, kNewline}));
  EXPECT_EQ(enc("hi !?"), (std::vector<int32_t>{ascii('h'), ascii('i'), kSpace, ascii('!'), ascii('?')}));
}

TEST_F(HfBpe, AddedTokensAndBytes) {
  EXPECT_EQ(enc("<|endoftext|>hi"), (std::vector<int32_t>{0, ascii('h'), ascii('i')}));
  // "é" is bytes C3 A9: U+00C3 is id 108 + (0xC3 - 0xAE), U+00A9 is id 96 + (0xA9 - 0xA1)
  EXPECT_EQ(enc("\xC3\xA9"), (std::vector<int32_t>{129, 104}));
  EXPECT_EQ(tok_->eos_id(), 0);
  EXPECT_EQ(tok_->bos_id(), 0);
  EXPECT_EQ(tok_->vocab_size(), 272);
  EXPECT_EQ(tok_->kind(), TokenizerKind::kBpe);
}

TEST_F(HfBpe, DecodeInvertsEncode) {
  for (const std::string s : {"hello world", "the 12 cats's\n\n  x", "caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80!",
                              "\xFF\xFE broken", "tab\tand  spaces   "}) {
    EXPECT_EQ(tok_->decode(tok_->encode(s)), s) << s;
  }
  EXPECT_EQ(tok_->decode({264, 0, 269}), "hello world");  // special tokens decode to nothing
}

TEST(HfTokenizer, CheckpointDirectoryTokenizerAndAddBos) {
  CheckpointTokenizer t = load_checkpoint_tokenizer(kDir);
  EXPECT_EQ(fs::path(t.path).filename(), "tokenizer.json");
  EXPECT_FALSE(t.add_bos);
  const fs::path d = fs::temp_directory_path() / ("hymba_hf_tok_" + std::to_string(::getpid()));
  fs::create_directories(d);
  fs::copy_file(kDir + "/tokenizer.json", d / "tokenizer.json", fs::copy_options::overwrite_existing);
  write_text_atomic((d / "tokenizer_config.json").string(), R"({"add_bos_token": true, "eos_token": "<|padding|>"})");
  t = load_checkpoint_tokenizer(d.string());
  EXPECT_TRUE(t.add_bos);
  EXPECT_EQ(t.tokenizer->eos_id(), 1);
  fs::remove_all(d);
  EXPECT_THROW(load_checkpoint_tokenizer(d.string()), Error);
}

TEST(HfTokenizer, RefusalsNameTheField) {
  const std::string good = read_file(kDir + "/tokenizer.json");
  auto error_of = [&](const std::string& text) -> std::string {
    try {
      load_hf_tokenizer_json("tok.json", text);
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(error_of(replaced(R"("type": "BPE")", R"("type": "Unigram")")).find("model.type"), std::string::npos);
  EXPECT_NE(error_of(replaced(R"("pre_tokenizer": {"type": "ByteLevel")", R"("pre_tokenizer": {"type": "Metaspace")"))
                .find("pre_tokenizer"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(R"("merges": [")", R"("merges": [7, ")")).find("model.merges"), std::string::npos);
  EXPECT_NE(error_of("{\"model\": 1").find("tok.json"), std::string::npos);
  EXPECT_NE(error_of(replaced(R"("!": 2,)", "")).find("lacks byte"), std::string::npos);
  EXPECT_NE(error_of(replaced(R"("!": 2,)", R"("!": 2, "!": 3,)")).find("twice"), std::string::npos);
}

}  // namespace
}  // namespace hymba
