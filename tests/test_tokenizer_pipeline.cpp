// The tokenizer.json pipeline's parts (src/tokenizer/hf/) on hand-worked
// cases, with expectations derived from HF `tokenizers`' source: Split
// behaviours, the published split regexes through PCRE2 on non-Latin text,
// Metaspace, BPE merge order and options, Unigram's Viterbi, WordPiece,
// added-token options, decoders, post-processors; and the linear-time
// guarantees (a 100,000-letter pre-token, many added tokens).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/hf/normalizers.h"
#include "tokenizer/hf/pre_tokenizers.h"
#include "test_util.h"

namespace hymba {
namespace {

using nlohmann::json;
using Strings = std::vector<std::string>;
const std::string kFixtures = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers";

// Pieces of `text` after a pre-tokenizer given as JSON.
Strings pre_tokenize(const std::string& pre_tokenizer, const std::string& text) {
  const auto p = tok::make_pre_tokenizer(json::parse(pre_tokenizer), "test: field 'pre_tokenizer'");
  tok::PreTokenized pieces;
  pieces.push_back({tok::NormalizedString(text), -1});
  p->pre_tokenize(pieces);
  Strings out;
  for (const auto& piece : pieces) out.push_back(piece.text.text());
  return out;
}

std::string normalize(const std::string& normalizer, const std::string& text) {
  const auto n = tok::make_normalizer(json::parse(normalizer), "test: field 'normalizer'");
  tok::NormalizedString s(text);
  n->normalize(s);
  return s.text();
}

std::string split_json(const std::string& behavior, bool invert = false) {
  return R"({"type": "Split", "pattern": {"String": "-"}, "behavior": ")" + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

TEST(PreTokenizers, SplitBehaviours) {
  EXPECT_EQ(pre_tokenize(split_json("Removed"), "a-b--c"), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(split_json("Isolated"), "a-b--c"), (Strings{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithPrevious"), "a-b--c"), (Strings{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithNext"), "a-b--c"), (Strings{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pre_tokenize(split_json("Contiguous"), "a-b--c"), (Strings{"a", "-", "b", "--", "c"}));
  // Inverted: the letters are the matches and go; each "-" was its own match.
  EXPECT_EQ(pre_tokenize(split_json("Removed", /*invert=*/true), "a-b--c"), (Strings{"-", "-", "-"}));
}

TEST(PreTokenizers, PublishedRegexesRunVerbatim) {
  // Llama-3's pattern: case-insensitive contractions, digits in threes, newlines kept together.
  const std::string llama3 =
      R"({"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex": )"
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}})";
  EXPECT_EQ(pre_tokenize(llama3, "I'VE 12345 apples\n\n"),
            (Strings{"I", "'VE", " ", "123", "45", " apples", "\n\n"}));
  // GPT-2's \p{L} does not cover Devanagari's combining vowel signs and virama (Mn/Mc).
  const std::string gpt2 = R"({"type": "Split", "behavior": "Isolated", "pattern": {"Regex": )" +
                           json(std::string(tok::kGpt2Pattern)).dump() + "}}";
  EXPECT_EQ(pre_tokenize(gpt2, "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"),  // नमस्ते
            (Strings{"\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D", "\xE0\xA4\xA4", "\xE0\xA5\x87"}));
  // Arabic-Indic digits are \p{N}; U+0964 DEVANAGARI DANDA is punctuation.
  EXPECT_EQ(pre_tokenize(gpt2, "x \xD9\xA1\xD9\xA2\xE0\xA5\xA4"),
            (Strings{"x", " \xD9\xA1\xD9\xA2", "\xE0\xA5\xA4"}));
  // A pattern PCRE2 cannot compile is refused naming the field.
  try {
    pre_tokenize(R"({"type": "Split", "behavior": "Isolated", "pattern": {"Regex": "(?<"}})", "x");
    FAIL() << "bad regex accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'pre_tokenizer.pattern'"), std::string::npos) << e.what();
  }
}

TEST(PreTokenizers, MetaspaceWhitespaceDigitsPunctuation) {
  const std::string ws = "\xE2\x96\x81";  // ▁
  EXPECT_EQ(pre_tokenize(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true})",
                         "Hello  world"),
            (Strings{ws + "Hello", ws, ws + "world"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": false})",
                         "a b"),
            (Strings{"a" + ws + "b"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Whitespace"})", "Hey man!! How's it?"),
            (Strings{"Hey", "man", "!!", "How", "'", "s", "it", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "WhitespaceSplit"})", " a\tb\xC2\xA0" "c "), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": true})", "a123"), (Strings{"a", "1", "2", "3"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": false})", "a123b"), (Strings{"a", "123", "b"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Punctuation"})", "Hey, you!"), (Strings{"Hey", ",", " you", "!"}));
  // ByteLevel: GPT-2's split, then bytes as printable characters (space is U+0120).
  EXPECT_EQ(pre_tokenize(R"({"type": "ByteLevel", "add_prefix_space": false})", "Hello  world!\n"),
            (Strings{"Hello", "\xC4\xA0", "\xC4\xA0world", "!", "\xC4\x8A"}));
}

TEST(Normalizers, CaseStripReplacePrependBert) {
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xC3\x80" "B \xC4\xB0"), "\xC3\xA0" "b i\xCC\x87");  // ÀB İ
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": false})", "  a  "), "a  ");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})", "a b"), "a\xE2\x96\x81" "b");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "_"})", "a \t b"), "a_b");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "▁"})", "a"), "\xE2\x96\x81" "a");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  // clean_text (tab -> space), CJK spacing, accents stripped because lowercase is on.
  EXPECT_EQ(normalize(R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                          "strip_accents": null, "lowercase": true})",
                      "H\xC3\xA9llo\t\xE4\xB8\x96\xE7\x95\x8C"),
            "hello  \xE4\xB8\x96  \xE7\x95\x8C ");
}

// A tokenizer.json with the given model and, optionally, other fields.
std::unique_ptr<Tokenizer> with_model(const std::string& model, const std::string& rest = "") {
  return load_hf_tokenizer_json("test.json", R"({"added_tokens": [{"id": 0, "content": "<eos>", "special": true}],)" +
                                                 rest + R"("model": )" + model + "}");
}

TEST(Models, BpeMergesByRankThenLeftmost) {
  const std::string vocab = R"("vocab": {"<eos>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "bc": 5, "aa": 6, "abc": 7})";
  // "b c" outranks "a b": abc -> a, bc (no merge makes abc from a + bc).
  auto t = with_model(R"({"type": "BPE", )" + vocab + R"(, "merges": ["b c", "a b", "a a"]})");
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(t->encode("aaa"), (std::vector<int32_t>{6, 1}));  // ties: leftmost pair first
  // ignore_merges: a word that is a vocabulary entry is taken whole.
  t = with_model(R"({"type": "BPE", "ignore_merges": true, )" + vocab + R"(, "merges": ["b c", "a b"]})");
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{7}));
  // Dropout is random: refused.
  EXPECT_THROW(with_model(R"({"type": "BPE", "dropout": 0.1, )" + vocab + R"(, "merges": []})"), Error);
}

TEST(Models, BpeByteFallbackUnknownsAndAffixes) {
  const std::string bytes = R"("<0xC3>": 4, "<0xA9>": 5)";
  auto t = with_model(R"({"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true,
                          "vocab": {"<eos>": 0, "<unk>": 1, "a": 2, "b": 3, )" + bytes + R"(}, "merges": []})");
  EXPECT_EQ(t->encode("a\xC3\xA9" "b"), (std::vector<int32_t>{2, 4, 5, 3}));  // é -> <0xC3><0xA9>
  EXPECT_EQ(t->encode("axyb"), (std::vector<int32_t>{2, 1, 3}));              // x, y fused into one unk
  t = with_model(R"({"type": "BPE", "unk_token": "<unk>", "fuse_unk": false,
                     "vocab": {"<eos>": 0, "<unk>": 1, "a": 2}, "merges": []})");
  EXPECT_EQ(t->encode("xya"), (std::vector<int32_t>{1, 1, 2}));
  // continuing_subword_prefix and end_of_word_suffix (the merged piece drops b's prefix).
  t = with_model(R"({"type": "BPE", "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
                     "vocab": {"<eos>": 0, "a": 1, "##b</w>": 2, "ab</w>": 3}, "merges": ["a ##b</w>"]})");
  EXPECT_EQ(t->encode("ab"), (std::vector<int32_t>{3}));
}

TEST(Models, UnigramViterbiUnknownsAndBytes) {
  auto t = with_model(R"({"type": "Unigram", "unk_id": 1, "byte_fallback": false, "vocab": [["<eos>", 0],
                          ["<unk>", 0], ["a", -1], ["b", -2], ["ab", -1.5], ["c", -3]]})");
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{4, 5}));   // ab + c (-4.5) beats a + b + c (-6)
  EXPECT_EQ(t->encode("axxb"), (std::vector<int32_t>{2, 1, 3})); // unknown run fused into one unk
  t = with_model(R"({"type": "Unigram", "unk_id": 1, "byte_fallback": true, "vocab": [["<eos>", 0], ["<unk>", 0],
                     ["a", -1], ["<0x78>", -5]]})");
  EXPECT_EQ(t->encode("axx"), (std::vector<int32_t>{2, 3, 3}));  // unknown x's spelled as bytes
}

TEST(Models, WordPieceLongestFirst) {
  auto t = with_model(R"({"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                          "max_input_chars_per_word": 100, "vocab": {"<eos>": 0, "[UNK]": 1, "un": 2,
                          "##aff": 3, "##able": 4, "a": 5}})",
                      R"("pre_tokenizer": {"type": "WhitespaceSplit"}, "decoder": {"type": "WordPiece", "prefix": "##",
                          "cleanup": true},)");
  EXPECT_EQ(t->encode("unaffable xyz a"), (std::vector<int32_t>{2, 3, 4, 1, 5}));
  EXPECT_EQ(t->decode({2, 3, 4, 5}), "unaffable a");
}

TEST(AddedTokens, StripSingleWordAndLongestMatch) {
  auto t = load_hf_tokenizer_json("test.json", R"({
    "added_tokens": [
      {"id": 10, "content": "<eos>", "special": true},
      {"id": 11, "content": "<L>", "lstrip": true, "special": true},
      {"id": 12, "content": "<R>", "rstrip": true, "special": true},
      {"id": 13, "content": "cat", "single_word": true, "special": false},
      {"id": 14, "content": "<L><R>", "special": true}],
    "pre_tokenizer": {"type": "WhitespaceSplit"},
    "model": {"type": "WordLevel", "unk_token": "?", "vocab": {"?": 0, "x": 1, "concat": 2}}})");
  // Ids as HF gives them: the file's ids are ignored; contents the model lacks
  // take the ids after its 3 pieces, in file order (<eos> 3, <L> 4, ...).
  EXPECT_EQ(t->vocab_size(), 3 + 5);
  EXPECT_EQ(t->eos_id(), 3);
  EXPECT_EQ(t->encode("x  <L>x"), (std::vector<int32_t>{1, 4, 1}));  // lstrip takes the spaces before
  EXPECT_EQ(t->encode("x<R>  x"), (std::vector<int32_t>{1, 5, 1}));  // rstrip the spaces after
  EXPECT_EQ(t->encode("x cat x"), (std::vector<int32_t>{1, 6, 1}));
  EXPECT_EQ(t->encode("concat"), (std::vector<int32_t>{2}));  // not a single word here
  EXPECT_EQ(t->encode("x<L><R>x"), (std::vector<int32_t>{1, 7, 1}));  // the longest token wins
  // No decoder: tokens joined by spaces, as HF does.
  EXPECT_EQ(t->decode_full({1, 4, 6}, /*skip_special_tokens=*/false), "x <L> cat");
  EXPECT_EQ(t->decode_full({1, 4, 6}, /*skip_special_tokens=*/true), "x cat");
}

TEST(PostProcessors, TemplateAndBert) {
  auto t = with_model(R"({"type": "WordLevel", "unk_token": "<eos>", "vocab": {"<eos>": 0, "[CLS]": 1, "[SEP]": 2,
                          "hi": 3}})",
                      R"("post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},)");
  EXPECT_EQ(t->encode_full("hi", true).ids, (std::vector<int32_t>{1, 3, 2}));
  EXPECT_EQ(t->encode_full("hi", false).ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(t->encode("hi"), (std::vector<int32_t>{3}));  // plain encode adds nothing
}

// Decoding as Llama-2's tokenizer.json does, and offsets through normalizers.
TEST(Pipeline, Llama2ShapeRoundTripsAndOffsets) {
  const auto t = load_tokenizer(kFixtures + "/llama2/tokenizer.json");
  for (const std::string s : {"first line\nsecond line", "  two spaces", "caf\xC3\xA9 \xF0\x9F\x98\x80"})
    EXPECT_EQ(t->decode_full(t->encode(s), true), s) << s;
  const Encoding e = t->encode_full("Hi there", true);
  ASSERT_EQ(e.ids.size(), e.offsets.size());
  EXPECT_EQ(e.offsets.front().end, 0u);  // <s> added by the template
  EXPECT_EQ(e.offsets.back().end, 8u);
}

TEST(Sentencepiece, WholeTextWithDummyPrefixRoundTrips) {
  // Llama's settings (add_dummy_prefix): the second line gets no "▁" of its own.
  const auto t = load_tokenizer(kFixtures + "/spm_bpe/tokenizer.model");
  const std::string text = "first line\nsecond line";
  const std::vector<int32_t> ids = t->encode(text);
  EXPECT_EQ(t->decode(ids), text);
  const std::vector<int32_t> second = t->encode("second line");  // as the first line of a text: with "▁"
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(std::find(ids.begin(), ids.end(), second.front()), ids.end());
}

TEST(Sentencepiece, BosEosAsTokenizerConfigSays) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hymba_spm_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kFixtures + "/spm_bpe/tokenizer.model", dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  const auto plain = load_tokenizer((dir / "tokenizer.model").string());
  EXPECT_EQ(plain->encode_full("hi", true).ids, plain->encode("hi"));  // no config: nothing added
  write_text_atomic((dir / "tokenizer_config.json").string(), R"({"add_bos_token": true, "add_eos_token": true})");
  const auto t = load_checkpoint_tokenizer(dir.string());
  const Encoding e = t.tokenizer->encode_full("hi", true);
  ASSERT_EQ(e.ids.size(), t.tokenizer->encode("hi").size() + 2);
  EXPECT_EQ(e.ids.front(), t.tokenizer->bos_id());
  EXPECT_EQ(e.ids.back(), t.tokenizer->eos_id());
  EXPECT_EQ(t.tokenizer->encode_full("hi", false).ids, t.tokenizer->encode("hi"));
  EXPECT_TRUE(t.add_bos);
  std::filesystem::remove_all(dir);
}

TEST(LinearTime, LongRunAndManyAddedTokens) {
  const std::string run(100000, 'a');
  for (const char* family : {"gpt2", "llama3", "llama2", "unigram"}) {
    const auto t = load_tokenizer(kFixtures + "/" + family + "/tokenizer.json");
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = t->encode(run);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 1.0 * test::kSlowBuildFactor) << family;  // about 0.1 s; quadratic merging took minutes
    EXPECT_EQ(t->decode(ids), run) << family;
  }
  // Llama-3's 256 added tokens all start "<|": text full of near misses.
  const auto llama3 = load_tokenizer(kFixtures + "/llama3/tokenizer.json");
  std::string near;
  for (int i = 0; i < 25000; ++i) near += "<|eot_i";
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = llama3->encode(near + "<|eot_id|>");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            1.0 * test::kSlowBuildFactor);
  EXPECT_EQ(llama3->decode_full(ids, false), near + "<|eot_id|>");
}

}  // namespace
}  // namespace hymba
