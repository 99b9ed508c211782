// HF tokenizer.json byte-level BPE (GPT-NeoX shape) on the committed fixture
// tests/fixtures/import/hf_mamba/tokenizer.json. Its ids are hand-derived:
// 0 <|endoftext|>, 1 <|padding|>, then the 256 byte characters in code point
// order ('!'..'~' are ids 2..95, so byte b in that range is id b - 31; space's
// character U+0120 'Ġ' is id 222, newline's U+010A is id 200), then one id per
// merge in merge order: Ġt 258, he 259, Ġthe 260, ll 261, ell 262, hell 263,
// hello 264, Ġw 265, or 266, Ġwor 267, ld 268, Ġworld 269, 12 270, 's 271.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/unicode_normalize.h"

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

// The fixture's text with its normalizer (`{"type": "NFC"}`) replaced.
std::string with_normalizer(const std::string& normalizer) {
  std::string s = read_file(kDir + "/tokenizer.json");
  const std::string from = R"("normalizer": {"type": "NFC"})";
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos);
  return s.replace(at, from.size(), "\"normalizer\": " + normalizer);
}

std::unique_ptr<Tokenizer> tokenizer_with_normalizer(const std::string& normalizer) {
  return load_hf_tokenizer_json("tok.json", with_normalizer(normalizer));
}

const std::string kDecomposed = "caf" "e\xCC\x81";  // e + U+0301 COMBINING ACUTE ACCENT
const std::string kPrecomposed = "caf" "\xC3\xA9";  // U+00E9

TEST(HfTokenizer, NfcNormalizerComposesBeforeBpe) {
  auto nfc = tokenizer_with_normalizer(R"({"type": "NFC"})");
  auto none = tokenizer_with_normalizer("null");
  EXPECT_EQ(nfc->encode(kDecomposed), nfc->encode(kPrecomposed));
  EXPECT_EQ(nfc->encode(kPrecomposed), none->encode(kPrecomposed));
  EXPECT_NE(none->encode(kDecomposed), none->encode(kPrecomposed));
  // around added tokens, each side is normalized; the tokens stay whole
  EXPECT_EQ(nfc->encode(kDecomposed + "<|endoftext|>" + kDecomposed),
            none->encode(kPrecomposed + "<|endoftext|>" + kPrecomposed));
  // a decomposed capital: "E" + U+0301 is U+00C9
  EXPECT_EQ(nfc->encode("E\xCC\x81"), none->encode("\xC3\x89"));
}

TEST(HfTokenizer, TextAlreadyNfcIsUnaffected) {
  auto nfc = tokenizer_with_normalizer(R"({"type": "NFC"})");
  auto none = tokenizer_with_normalizer("null");
  for (const std::string s : {"hello world", "the 12 cats's\n\n  x", "caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80!",
                              "\xEA\xB0\x80 \xE4\xB8\xAD\xE6\x96\x87", "tab\tand  spaces   ", ""}) {
    EXPECT_EQ(nfc->encode(s), none->encode(s)) << s;
    EXPECT_EQ(nfc->decode(nfc->encode(s)), s) << s;
  }
}

TEST(HfTokenizer, OtherFormsAndSequences) {
  auto none = tokenizer_with_normalizer("null");
  // NFKC folds the "fi" ligature U+FB01 to "fi"; NFC leaves it
  EXPECT_EQ(tokenizer_with_normalizer(R"({"type": "NFKC"})")->encode("\xEF\xAC\x81"), none->encode("fi"));
  EXPECT_EQ(tokenizer_with_normalizer(R"({"type": "NFC"})")->encode("\xEF\xAC\x81"), none->encode("\xEF\xAC\x81"));
  // NFD splits; NFKD splits and folds
  EXPECT_EQ(tokenizer_with_normalizer(R"({"type": "NFD"})")->encode(kPrecomposed), none->encode(kDecomposed));
  EXPECT_EQ(tokenizer_with_normalizer(R"({"type": "NFKD"})")->encode("\xEF\xAC\x81\xC3\xA9"),
            none->encode("fie\xCC\x81"));
  // a Sequence applies its normalizers in order: NFD then NFC is NFC
  auto seq = tokenizer_with_normalizer(
      R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Sequence", "normalizers": [{"type": "NFC"}]}]})");
  EXPECT_EQ(seq->encode(kDecomposed), none->encode(kPrecomposed));
  EXPECT_EQ(tokenizer_with_normalizer(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFD"}]})")
                ->encode(kPrecomposed),
            none->encode(kDecomposed));
}

// Invalid UTF-8 takes the documented byte-level fallback: invalid bytes are
// kept as they are, the valid text around them is still normalized.
TEST(HfTokenizer, NormalizerKeepsInvalidBytes) {
  auto nfc = tokenizer_with_normalizer(R"({"type": "NFC"})");
  auto none = tokenizer_with_normalizer("null");
  for (const std::string bad : {"\xFF", "\xC3", "\xED\xA0\x80", "\xC0\xAF", "\x80\x80"}) {
    EXPECT_EQ(nfc->encode(bad + kDecomposed + bad), none->encode(bad + kPrecomposed + bad));
    EXPECT_EQ(nfc->decode(nfc->encode(bad + kPrecomposed + bad)), bad + kPrecomposed + bad);
  }
}

TEST(UnicodeNormalize, FormsOnKnownText) {
  // canonical reordering: a + U+0301 (above, class 230) + U+0323 (below, class
  // 220) composes to U+1EA1 (a with dot below) + U+0301
  EXPECT_EQ(normalize_utf8("a\xCC\x81\xCC\xA3", NormalForm::kNFC), "\xE1\xBA\xA1\xCC\x81");
  EXPECT_EQ(normalize_utf8("\xE1\xBA\xA1\xCC\x81", NormalForm::kNFD), "a\xCC\xA3\xCC\x81");
  // Hangul jamo compose algorithmically: U+1100 U+1161 -> U+AC00
  EXPECT_EQ(normalize_utf8("\xE1\x84\x80\xE1\x85\xA1", NormalForm::kNFC), "\xEA\xB0\x80");
  EXPECT_EQ(normalize_utf8("x\xE2\x91\xA0", NormalForm::kNFKC), "x1");  // circled digit one
  EXPECT_EQ(normalize_utf8("x\xE2\x91\xA0", NormalForm::kNFC), "x\xE2\x91\xA0");
  EXPECT_EQ(normalize_utf8("", NormalForm::kNFC), "");
  // invalid bytes stay, each one a boundary: the mark after \xFF has no base
  EXPECT_EQ(normalize_utf8("e\xFF\xCC\x81", NormalForm::kNFC), "e\xFF\xCC\x81");
  EXPECT_EQ(normalize_utf8("\xC3" "e\xCC\x81\xF0\x9F", NormalForm::kNFC), "\xC3\xC3\xA9\xF0\x9F");
  EXPECT_EQ(normal_form_from_name("NFKC"), NormalForm::kNFKC);
  EXPECT_FALSE(normal_form_from_name("nfc").has_value());  // HF's names are upper case
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
  // An unsupported component is named in full (not cut short), with what is
  // supported; real names are far shorter than the 80 bytes quoted at most.
  const std::string long_name(70, 'X');
  std::string msg = error_of(replaced(R"("type": "BPE")", "\"type\": \"" + long_name + "\""));
  EXPECT_NE(msg.find("field 'model' has type \"" + long_name + "\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unigram"), std::string::npos) << msg;
  msg = error_of(replaced(R"("pre_tokenizer": {"type": "ByteLevel")", R"("pre_tokenizer": {"type": "UnicodeScripts")"));
  EXPECT_NE(msg.find("field 'pre_tokenizer' has type \"UnicodeScripts\""), std::string::npos) << msg;
  EXPECT_NE(error_of(replaced(R"("merges": [")", R"("merges": [7, ")")).find("model.merges[0]"), std::string::npos);
  EXPECT_NE(error_of("{\"model\": 1").find("tok.json"), std::string::npos);
  // A merge of pieces the vocabulary lacks is refused naming the entry.
  msg = error_of(replaced(R"("merges": [")", R"("merges": ["q\u0120 zz", ")"));
  EXPECT_NE(msg.find("model.merges[0]"), std::string::npos) << msg;
  EXPECT_NE(error_of(replaced(R"("!": 2,)", R"("!": 2, "!": 3,)")).find("twice"), std::string::npos);
  EXPECT_NE(error_of(replaced(R"("type": "BPE")", R"("type": "BPE", "dropout": 0.1)")).find("dropout"),
            std::string::npos);
  // Normalizers hymba lacks are refused naming the field, nested ones with their index.
  msg = error_of(with_normalizer(R"({"type": "Precompiled", "precompiled_charsmap": "AA=="})"));
  EXPECT_NE(msg.find("field 'normalizer' has type \"Precompiled\""), std::string::npos) << msg;
  msg = error_of(with_normalizer(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]})"));
  EXPECT_NE(msg.find("field 'normalizer.normalizers[1]'"), std::string::npos) << msg;
  EXPECT_NE(error_of(with_normalizer(R"({"type": "Sequence"})")).find("normalizer.normalizers"), std::string::npos);
  std::string deep = R"({"type": "NFC"})";
  for (int i = 0; i < 9; ++i) deep = R"({"type": "Sequence", "normalizers": [)" + deep + "]}";
  EXPECT_NE(error_of(with_normalizer(deep)).find("more than 8 deep"), std::string::npos);
  EXPECT_NE(error_of(with_normalizer(R"("NFC")")).find("field 'normalizer'"), std::string::npos);
}

}  // namespace
}  // namespace hymba
