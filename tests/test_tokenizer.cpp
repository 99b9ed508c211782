// Tokenizers: byte-level ids, sentencepiece BPE/Unigram training on a small
// synthetic corpus, exact round trips (including bytes the vocabulary never
// saw), determinism, the tokenizer file and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("hymba_tok_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

// Expects `f` to throw hymba::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected hymba::Error containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

// A few hundred varied English-like lines, as documents of ~20 lines each.
std::vector<std::string> synthetic_corpus() {
  const std::vector<std::string> who = {"The old fisherman",       "A small girl",  "Her brother", "The teacher",
                                        "Every morning the baker", "Our neighbour", "The captain", "A tired dog"};
  const std::vector<std::string> did = {"walked to",  "looked at", "painted",      "remembered", "carried",
                                        "dreamed of", "found",     "talked about", "cleaned"};
  const std::vector<std::string> what = {"the quiet harbour",    "a bright red kite", "the village market",
                                         "an enormous mountain", "the broken clock",  "some fresh bread",
                                         "the library window",   "a forgotten letter"};
  const std::vector<std::string> how = {"slowly",       "with great care", "before sunrise",
                                        "after dinner", "again",           "without a word"};
  const std::vector<std::string> syllables = {"ka", "lo", "mi", "ren", "sa", "to", "vel", "dor", "an", "is", "ul"};
  std::vector<std::string> docs;
  std::string doc;
  for (int i = 0; i < 360; ++i) {
    const std::string name = syllables[i % 11] + syllables[(i / 11) % 11] + syllables[(i * 7 / 3) % 11];
    doc += who[i % who.size()] + " " + did[(i * 7) % did.size()] + " " + what[(i * 5 + i / 9) % what.size()] + " " +
           how[(i * 3) % how.size()];
    doc += i % 4 == 0 ? ", and counted " + std::to_string(17 * i + 3) + " boats." : ".";
    doc += i % 3 == 0 ? " They called it " + name + "." : "";
    doc += i % 5 == 0 ? "\n\n" : "\n";
    if (i % 20 == 19) {
      docs.push_back(doc);
      doc.clear();
    }
  }
  return docs;
}

std::unique_ptr<Tokenizer> train(TokenizerKind kind, int32_t vocab, uint64_t seed = 0) {
  TokenizerTrainOptions opt;
  opt.kind = kind;
  opt.vocab_size = vocab;
  opt.seed = seed;
  return train_tokenizer(synthetic_corpus(), opt);
}

constexpr int32_t kVocab = 400;

// Texts every tokenizer must round-trip exactly.
std::vector<std::string> tricky_texts() {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  return {
      "",
      "The captain walked to the quiet harbour slowly.",
      "  leading, double  spaces,   trailing   ",
      "lines\nand\n\nblank lines\r\nand\ttabs\n",
      "unseen characters: Zürich, naïve, 日本語, Ελληνικά, emoji \xF0\x9F\x98\x80!",
      "sentencepiece's own space marker \xE2\x96\x81 and \xE2\x96\x81\xE2\x96\x81 twice",
      "invalid UTF-8: \xFF\xFE, lone continuation \x80, truncated \xE2\x82, overlong \xC0\xAF",
      std::string("a NUL \0 byte", 12),
      "numbers 1234567890 and 3.14159",
      all_bytes,
  };
}

// ---------------------------------------------------------------------------
// Byte tokenizer

TEST(ByteTokenizer, IdsAreTheBytesAndSpecialsFollow) {
  auto tok = make_byte_tokenizer();
  EXPECT_EQ(tok->kind(), TokenizerKind::kByte);
  EXPECT_EQ(tok->vocab_size(), 259);
  EXPECT_EQ(tok->pad_id(), 256);
  EXPECT_EQ(tok->bos_id(), 257);
  EXPECT_EQ(tok->eos_id(), 258);
  EXPECT_EQ(tok->unk_id(), -1);
  EXPECT_EQ(tok->encode("Hi!"), (std::vector<int32_t>{72, 105, 33}));
  EXPECT_EQ(tok->encode("é"), (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_EQ(tok->encode("\xFF"), (std::vector<int32_t>{255}));
}

TEST(ByteTokenizer, RoundTripsAnyBytesAndDropsSpecials) {
  auto tok = make_byte_tokenizer();
  for (const std::string& text : tricky_texts()) EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->decode({257, 104, 256, 105, 258}), "hi");
  expect_error([&] { tok->decode({259}); }, "token id 259");
  expect_error([&] { tok->decode({-1}); }, "token id -1");
}

TEST(ByteTokenizer, SavesAndLoads) {
  TempDir dir;
  const std::string path = dir.file(kTokenizerFile);
  auto tok = make_byte_tokenizer();
  tok->save(path);
  auto loaded = load_tokenizer(path);
  EXPECT_EQ(loaded->kind(), TokenizerKind::kByte);
  EXPECT_EQ(loaded->fingerprint(), tok->fingerprint());
  EXPECT_EQ(loaded->encode("abc"), tok->encode("abc"));
  // A later format version is refused, naming the file.
  write_text_atomic(path, "hymba-byte-tokenizer 2\n");
  expect_error([&] { load_tokenizer(path); }, path);
}

TEST(TokenizerKind, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_tokenizer_kind("byte"), TokenizerKind::kByte);
  EXPECT_EQ(parse_tokenizer_kind("bpe"), TokenizerKind::kBpe);
  EXPECT_EQ(parse_tokenizer_kind("unigram"), TokenizerKind::kUnigram);
  EXPECT_EQ(parse_tokenizer_kind("byte-level-bpe"), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(parse_tokenizer_kind("hf-unigram"), TokenizerKind::kHfUnigram);
  for (TokenizerKind k : {TokenizerKind::kByte, TokenizerKind::kBpe, TokenizerKind::kUnigram,
                          TokenizerKind::kByteLevelBpe, TokenizerKind::kHfUnigram})
    EXPECT_EQ(parse_tokenizer_kind(to_string(k)), k);
  expect_error([] { parse_tokenizer_kind("wordpiece"); }, "--type");
  expect_error([] { parse_tokenizer_kind("byte-level", "tokenizer"); }, "byte-level-bpe");
}

// ---------------------------------------------------------------------------
// sentencepiece tokenizers, once per kind

class Trained : public ::testing::TestWithParam<TokenizerKind> {};

TEST_P(Trained, HasTheAskedVocabularyAndSpecialIds) {
  auto tok = train(GetParam(), kVocab);
  EXPECT_EQ(tok->kind(), GetParam());
  EXPECT_EQ(tok->vocab_size(), kVocab);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->unk_id(), 1);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 3);
  EXPECT_EQ(tok->decode({0, 1, 2, 3}), "");
  expect_error([&] { tok->decode({kVocab}); }, "token id " + std::to_string(kVocab));
}

TEST_P(Trained, RoundTripsExactlyIncludingUnseenBytes) {
  auto tok = train(GetParam(), kVocab);
  for (const std::string& text : tricky_texts()) {
    const std::vector<int32_t> ids = tok->encode(text);
    for (int32_t id : ids) {
      ASSERT_GE(id, 4) << "special or unknown id in the encoding of: " << text;
      ASSERT_LT(id, kVocab);
    }
    EXPECT_EQ(tok->decode(ids), text);
  }
  // Concatenated encodings decode to the concatenated texts (no dummy prefix).
  std::vector<int32_t> both = tok->encode("first part");
  const std::vector<int32_t> second = tok->encode(" and second\n");
  both.insert(both.end(), second.begin(), second.end());
  EXPECT_EQ(tok->decode(both), "first part and second\n");
  // Lines are encoded independently of what precedes them.
  const std::string a = "Her brother found the broken clock.\n\n", b = "The teacher cleaned a forgotten letter.\n";
  std::vector<int32_t> parts = tok->encode(a);
  const std::vector<int32_t> tail = tok->encode(b);
  parts.insert(parts.end(), tail.begin(), tail.end());
  EXPECT_EQ(tok->encode(a + b), parts);
}

TEST_P(Trained, CompressesTextLikeItsCorpus) {
  auto tok = train(GetParam(), kVocab);
  const std::string text = "The old fisherman walked to the quiet harbour slowly.\n";
  std::string pieces;
  for (int32_t id : tok->encode(text)) pieces += "[" + tok->decode({id}) + "]";
  // Characters alone would give one token per byte here.
  EXPECT_LT(tok->encode(text).size() * 3, text.size() * 2) << "over 1.5 bytes per token in-domain: " << pieces;
}

TEST_P(Trained, IsDeterministic) {
  auto a = train(GetParam(), kVocab);
  auto b = train(GetParam(), kVocab);
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  const std::string text = "A tired dog dreamed of the broken clock again.";
  EXPECT_EQ(a->encode(text), b->encode(text));
}

TEST_P(Trained, EncodesFromSeveralThreadsAtOnce) {
  auto tok = train(GetParam(), kVocab);
  std::string text;
  for (const std::string& d : synthetic_corpus()) text += d;
  const std::vector<int32_t> expected = tok->encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = tok->encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST_P(Trained, SampledTrainingIsDeterministicInTheSeed) {
  TokenizerTrainOptions opt;
  opt.kind = GetParam();
  opt.vocab_size = 320;
  opt.max_train_bytes = 8000;  // about half of the corpus
  opt.seed = 5;
  const auto docs = synthetic_corpus();
  auto a = train_tokenizer(docs, opt);
  auto b = train_tokenizer(docs, opt);
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_EQ(a->vocab_size(), 320);
}

TEST_P(Trained, SamplesBlocksOfOneHugeDocument) {
  // 2.5 MB in one document, trained on a ~24 kB sample of 4 kB blocks. An
  // omega appears once, at the very end: trained on the whole document it
  // would get a piece of its own; the sample (fixed by the seed) misses it.
  std::string huge;
  for (const std::string& d : synthetic_corpus()) huge += d;
  const size_t once = huge.size();
  while (huge.size() < 2'500'000) huge.append(huge, 0, once);
  huge += "\u03A9\n";
  TokenizerTrainOptions opt;
  opt.kind = GetParam();
  opt.vocab_size = 320;
  opt.max_train_bytes = 24000;
  auto a = train_tokenizer({huge}, opt);
  EXPECT_EQ(a->vocab_size(), 320);
  EXPECT_EQ(a->encode("\u03A9").size(), 2u) << "omega was trained on, so the whole document was";
  EXPECT_EQ(a->decode(a->encode(huge.substr(0, 5000))), huge.substr(0, 5000));
  EXPECT_EQ(a->fingerprint(), train_tokenizer({huge}, opt)->fingerprint());
}

TEST_P(Trained, SavesAndLoadsTheSameModel) {
  TempDir dir;
  const std::string path = dir.file(kTokenizerFile);
  auto tok = train(GetParam(), kVocab);
  tok->save(path);
  auto loaded = load_tokenizer(path);
  EXPECT_EQ(loaded->kind(), GetParam());
  EXPECT_EQ(loaded->vocab_size(), kVocab);
  EXPECT_EQ(loaded->fingerprint(), tok->fingerprint());
  EXPECT_EQ(loaded->bos_id(), tok->bos_id());
  for (const std::string& text : tricky_texts()) {
    EXPECT_EQ(loaded->encode(text), tok->encode(text));
    EXPECT_EQ(loaded->decode(loaded->encode(text)), text);
  }
  // Saving what was loaded writes the same bytes.
  const std::string again = dir.file("again.model");
  loaded->save(again);
  EXPECT_EQ(read_file(again), read_file(path));
}

TEST_P(Trained, BadVocabularySizesNameTheFlag) {
  // Below the 260 fixed pieces, below those plus the corpus's characters,
  // and more than the corpus can fill.
  expect_error([&] { train(GetParam(), 100); }, "--vocab-size 100");
  expect_error([&] { train(GetParam(), 270); }, "--vocab-size 270");
  expect_error([&] { train(GetParam(), 20000); }, "--vocab-size 20000");
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Trained, ::testing::Values(TokenizerKind::kBpe, TokenizerKind::kUnigram),
                         [](const ::testing::TestParamInfo<TokenizerKind>& p) {
                           return std::string(to_string(p.param));
                         });

// ---------------------------------------------------------------------------
// Across kinds, and the file's errors

TEST(Tokenizer, FingerprintsDifferBetweenKinds) {
  const std::string byte = make_byte_tokenizer()->fingerprint();
  const std::string bpe = train(TokenizerKind::kBpe, kVocab)->fingerprint();
  const std::string unigram = train(TokenizerKind::kUnigram, kVocab)->fingerprint();
  EXPECT_NE(byte, bpe);
  EXPECT_NE(byte, unigram);
  EXPECT_NE(bpe, unigram);
  EXPECT_EQ(byte.rfind("byte:", 0), 0u) << byte;
  EXPECT_EQ(bpe.rfind("bpe:", 0), 0u) << bpe;
  EXPECT_EQ(unigram.rfind("unigram:", 0), 0u) << unigram;
  EXPECT_NE(bpe, train(TokenizerKind::kBpe, kVocab + 8)->fingerprint());
}

TEST(Tokenizer, TrainingByteNeedsNoCorpus) {
  TokenizerTrainOptions opt;
  opt.kind = TokenizerKind::kByte;
  EXPECT_EQ(train_tokenizer({}, opt)->kind(), TokenizerKind::kByte);
}

TEST(Tokenizer, TrainingOnNoTextFails) {
  TokenizerTrainOptions opt;
  opt.vocab_size = 300;
  expect_error([&] { train_tokenizer({"", "\n\n"}, opt); }, "no text");
}

TEST(Tokenizer, LongLinesAreTrainedOn) {
  // One 20 kB line without spaces and one with: sentencepiece skips
  // sentences over its length limit, so they must be cut, not dropped.
  std::string line;
  while (line.size() < 20000) line += "ünïcödé";
  std::string spaced;
  while (spaced.size() < 20000) spaced += "word ";
  TokenizerTrainOptions opt;
  opt.vocab_size = 290;
  auto tok = train_tokenizer({line, spaced}, opt);
  EXPECT_EQ(tok->decode(tok->encode(line)), line);
  EXPECT_LT(tok->encode(line).size(), line.size() / 2) << "the long line's characters were learned";
}

TEST(Tokenizer, LoadingAMissingOrCorruptFileNamesIt) {
  TempDir dir;
  const std::string missing = dir.file("missing.model");
  expect_error([&] { load_tokenizer(missing); }, missing);

  const std::string empty = dir.file("empty.model");
  write_text_atomic(empty, "");
  expect_error([&] { load_tokenizer(empty); }, empty);

  const std::string garbage = dir.file("garbage.model");
  write_text_atomic(garbage, "this is not a tokenizer, just some text\n");
  expect_error([&] { load_tokenizer(garbage); }, garbage);

  const std::string good = dir.file("good.model");
  train(TokenizerKind::kBpe, kVocab)->save(good);
  const std::string model = read_file(good);
  const std::string truncated = dir.file("truncated.model");
  write_text_atomic(truncated, model.substr(0, model.size() / 2));
  expect_error([&] { load_tokenizer(truncated); }, truncated);

  expect_error([&] { load_tokenizer(dir.file("")); }, dir.file(""));
}

}  // namespace
}  // namespace hymba
