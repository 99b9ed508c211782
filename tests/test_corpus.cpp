#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/batch_sampler.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;

// A byte-level tokenizer (ids 0..255 bytes, then pad, bos, eos) that does not
// depend on the real tokenizer implementation; the fingerprint is settable so
// tests can pretend the tokenizer changed.
class FakeByteTokenizer : public Tokenizer {
 public:
  explicit FakeByteTokenizer(std::string fingerprint = "fake-byte-1") : fp_(std::move(fingerprint)) {}
  TokenizerKind kind() const override { return TokenizerKind::kByte; }
  int32_t vocab_size() const override { return 259; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids)
      if (id < 256) s.push_back(static_cast<char>(id));
    return s;
  }
  int32_t bos_id() const override { return 257; }
  int32_t eos_id() const override { return 258; }
  int32_t pad_id() const override { return 256; }
  int32_t unk_id() const override { return -1; }
  std::string fingerprint() const override { return fp_; }
  void save(const std::string& path) const override { write_text_atomic(path, fp_); }

 private:
  std::string fp_;
};

std::vector<int32_t> bytes_of(std::string_view s) { return FakeByteTokenizer().encode(s); }

// Spelled out: GCC 12 warns about designated initializers that skip fields.
DatasetOptions options(double val_fraction, int64_t block_tokens = 256, uint64_t split_seed = 0,
                       const std::string& cache_dir = "") {
  DatasetOptions o;
  o.val_fraction = val_fraction;
  o.block_tokens = block_tokens;
  o.split_seed = split_seed;
  o.cache_dir = cache_dir;
  return o;
}

std::vector<int32_t> to_vec(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

// Runs `f` and returns the hymba::Error message it throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every test gets its own directory under the system temp dir, removed after.
class CorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("hymba_test_corpus_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cache_ = (dir_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& rel, const std::string& content) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string path(const std::string& rel) const { return (dir_ / rel).string(); }

  fs::path dir_;
  std::string cache_;
};

// Text whose 16-byte blocks are all different, so a split can be checked by
// matching blocks.
std::string random_text(size_t n, uint64_t seed) {
  Rng r(seed);
  std::string s(n, ' ');
  for (auto& c : s) c = static_cast<char>('a' + r.below(26));
  return s;
}

TEST_F(CorpusTest, TextFileIsOneDocument) {
  std::string f = write("a.txt", "\xEF\xBB\xBFHello\n\nworld, caf\xC3\xA9.\n");
  auto docs = read_documents(f);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0], "Hello\n\nworld, caf\xC3\xA9.\n") << "BOM skipped, blank lines kept";
}

TEST_F(CorpusTest, DirectoryReadsNestedTxtFilesSortedByPath) {
  write("d/b.txt", "bee");
  write("d/a/z.txt", "zed");
  write("d/a/y/deep.txt", "deep");
  write("d/notes.md", "ignored");
  write("d/data.jsonl", "{\"text\": \"ignored\"}\n");
  write("d/blank.txt", " \n\t\n");
  fs::create_directories(path("d/dir.txt"));  // a directory named *.txt is not a file
  EXPECT_EQ(read_documents(path("d")), (std::vector<std::string>{"deep", "zed", "bee"}));
  EXPECT_EQ(read_documents(path("d") + "/"), (std::vector<std::string>{"deep", "zed", "bee"}));
  EXPECT_EQ(corpus_files(path("d")).size(), 4u) << "listed files include the blank one";
}

TEST_F(CorpusTest, JsonlReadsTheTextFieldOfEachLine) {
  std::string f = write("s.jsonl",
                        "{\"text\": \"Once upon a time.\", \"id\": 1}\n"
                        "\n"
                        "   \r\n"
                        "{\"id\": 2, \"text\": \"Line\\nbreak \\u00e9\"}\r\n"
                        "{\"text\": \"  \"}\n"
                        "{\"text\": \"last, no newline\"}");
  EXPECT_EQ(read_documents(f),
            (std::vector<std::string>{"Once upon a time.", "Line\nbreak \xC3\xA9", "last, no newline"}));
}

TEST_F(CorpusTest, DefaultCorpusIsTheFortunes) {
  if (!fs::is_directory(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " missing (run scripts/setup.sh)";
  auto docs = read_documents(kDefaultCorpus);
  EXPECT_GT(docs.size(), 500u);
  size_t bytes = 0;
  for (const auto& d : docs) {
    bytes += d.size();
    EXPECT_EQ(d.find("\n%\n"), std::string::npos);
    EXPECT_FALSE(d.starts_with("%\n"));
  }
  EXPECT_GT(bytes, 50000u);
  EXPECT_EQ(docs, read_documents(kDefaultCorpus)) << "deterministic order";
  auto files = corpus_files(kDefaultCorpus);
  EXPECT_FALSE(files.empty());
  for (const auto& f : files) EXPECT_FALSE(f.ends_with(".dat") || f.ends_with(".u8")) << f;
  std::cout << "[ default corpus: " << docs.size() << " documents, " << bytes << " bytes ]\n";
}

TEST_F(CorpusTest, FortuneFilesSplitOnPercentLines) {
  write("f/b", "second file\n%\n");
  write("f/a", "one\nline two\n%\n%\n  \n%\r\n100% sure\n%\n");
  write("f/a.dat", "\x01\x02binary index");
  fs::create_symlink("a", path("f/a.u8"));
  fs::create_symlink("b", path("f/c"));  // another name for b: read once
  EXPECT_EQ(read_fortunes(path("f")), (std::vector<std::string>{"one\nline two\n", "100% sure\n", "second file\n"}));
}

TEST_F(CorpusTest, MissingFortunesSayHowToInstallThem) {
  std::string msg = error_of([&] { read_fortunes(path("nope")); });
  EXPECT_NE(msg.find(path("nope")), std::string::npos) << msg;
  EXPECT_NE(msg.find("fortunes-min"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scripts/setup.sh"), std::string::npos) << msg;
}

TEST_F(CorpusTest, ErrorsNameTheFileAndLine) {
  auto expect_error = [](const std::string& msg, const std::vector<std::string>& parts) {
    ASSERT_FALSE(msg.empty()) << "expected an error";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
  };
  std::string missing = path("missing.txt");
  expect_error(error_of([&] { read_documents(missing); }), {missing, "no such file"});
  std::string other = write("data.csv", "a,b\n");
  expect_error(error_of([&] { read_documents(other); }), {other, ".txt", ".jsonl"});
  write("empty_dir/readme.md", "no txt here");
  expect_error(error_of([&] { read_documents(path("empty_dir")); }), {path("empty_dir"), "no .txt files"});
  std::string blank = write("blank.txt", "\n \n");
  expect_error(error_of([&] { read_documents(blank); }), {blank, "empty"});
  write("blank_dir/x.txt", "");
  write("blank_dir/y/z.txt", "   ");
  expect_error(error_of([&] { read_documents(path("blank_dir")); }), {path("blank_dir"), "empty"});
  std::string blank_jsonl = write("blank.jsonl", "\n{\"text\": \"\"}\n");
  expect_error(error_of([&] { read_documents(blank_jsonl); }), {blank_jsonl, "empty"});

  std::string bad_utf8 = write("bad.txt", "fine\nstill fine\nnot \xC3\x28 fine\n");
  expect_error(error_of([&] { read_documents(bad_utf8); }), {bad_utf8 + ":3:", "invalid UTF-8", "byte 20"});
  write("bad_dir/ok.txt", "ok");
  std::string overlong = write("bad_dir/sub/overlong.txt", "\xC0\xAF");
  expect_error(error_of([&] { read_documents(path("bad_dir")); }), {overlong + ":1:", "invalid UTF-8", "byte 0"});
  std::string surrogate = write("surrogate.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\xED\xA0\x80\"}\n");
  expect_error(error_of([&] { read_documents(surrogate); }), {surrogate + ":2:", "invalid UTF-8"});

  std::string j = write("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"text\": oops}\n");
  expect_error(error_of([&] { read_documents(j); }), {j + ":3:", "not valid JSON"});
  j = write("array.jsonl", "{\"text\": \"ok\"}\n[\"text\"]\n");
  expect_error(error_of([&] { read_documents(j); }), {j + ":2:", "JSON object", "array"});
  j = write("notext.jsonl", "{\"story\": \"ok\"}\n");
  expect_error(error_of([&] { read_documents(j); }), {j + ":1:", "no \"text\""});
  j = write("number.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": 42}\n");
  expect_error(error_of([&] { read_documents(j); }), {j + ":3:", "\"text\"", "number", "string"});

  std::string locked = write("locked.txt", "secret");
  fs::permissions(locked, fs::perms::none);
  if (::access(locked.c_str(), R_OK) != 0) {  // root reads anything; then there is nothing to test
    expect_error(error_of([&] { read_documents(locked); }), {locked, "cannot open"});
  }
  fs::permissions(locked, fs::perms::owner_all);
}

TEST_F(CorpusTest, DocumentsAreJoinedWithEos) {
  write("d/1.txt", "ab");
  write("d/2.txt", "c");
  write("d/3.txt", "de\n");
  FakeByteTokenizer tok;
  auto ds = TokenDataset::build(path("d"), tok, options(0.0, 256, 0, cache_));
  std::vector<int32_t> want = {'a', 'b', 258, 'c', 258, 'd', 'e', '\n'};
  EXPECT_EQ(to_vec(ds.train()), want);
  EXPECT_TRUE(ds.val().empty());
}

TEST_F(CorpusTest, LongDocumentsTokeniseInPiecesWithoutSeams) {
  // Over 64 KiB with newlines: encoded in pieces, joined without eos.
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += "line " + std::to_string(i) + " of a long file\n";
  std::string f = write("long.txt", text);
  FakeByteTokenizer tok;
  auto ds = TokenDataset::build(f, tok, options(0.0));
  EXPECT_EQ(to_vec(ds.train()), bytes_of(text));
}

// Seed 001's byte-level BPE on a one-file corpus cut into pieces: the ids are
// those of one encode call over the whole text, even where newlines start
// whitespace runs (a cut inside a run would split GPT-2's pre-tokens).
TEST_F(CorpusTest, ByteLevelBpeIdsMatchOneEncodeCallAcrossPieces) {
  std::string text;
  for (int i = 0; text.size() < 200000; ++i)
    text += "line " + std::to_string(i) + " of a file\n" + (i % 3 == 0 ? "\n\n   indented" : " spaced") + "\n";
  const std::string f = write("bl.txt", text);
  TokenizerTrainOptions t;
  t.kind = TokenizerKind::kByteLevelBpe;
  t.vocab_size = 400;
  t.corpus_alphabet = true;
  const auto tok = train_tokenizer({text}, t);
  auto ds = TokenDataset::build(f, *tok, options(0.0, 256, 0, cache_));
  EXPECT_EQ(to_vec(ds.train()), tok->encode(text));
}

TEST_F(CorpusTest, SplitIsDeterministicDisjointAndCoversTheStream) {
  const std::string text = random_text(1000, 1);
  std::string f = write("s.txt", text);
  FakeByteTokenizer tok;
  DatasetOptions opt = options(0.25, 16, 3);
  auto ds = TokenDataset::build(f, tok, opt);
  const int64_t blocks = (1000 + 15) / 16;  // 63, the last one 8 tokens
  ASSERT_EQ(ds.train().size() + ds.val().size(), 1000u);

  // Walk the stream block by block: each must be the next piece of exactly
  // one split, so the splits are disjoint, keep stream order and cover it.
  auto stream = bytes_of(text);
  size_t ti = 0, vi = 0;
  int64_t val_blocks = 0;
  std::vector<bool> is_val;
  for (int64_t b = 0; b < blocks; ++b) {
    size_t len = std::min<size_t>(16, 1000 - b * 16);
    auto block = std::span(stream).subspan(b * 16, len);
    auto matches = [&](std::span<const int32_t> part, size_t at) {
      return at + len <= part.size() && std::equal(block.begin(), block.end(), part.begin() + at);
    };
    if (matches(ds.train(), ti)) {
      ti += len;
      is_val.push_back(false);
    } else {
      ASSERT_TRUE(matches(ds.val(), vi)) << "block " << b << " is in neither split in order";
      vi += len;
      ++val_blocks;
      is_val.push_back(true);
    }
  }
  EXPECT_EQ(ti, ds.train().size());
  EXPECT_EQ(vi, ds.val().size());
  EXPECT_EQ(val_blocks, 16) << "round(0.25 * 63)";

  // Same seed: same split (fresh or cached); another seed: another split.
  auto again = TokenDataset::build(f, tok, opt);
  EXPECT_TRUE(again.loaded_from_cache());
  EXPECT_EQ(to_vec(again.val()), to_vec(ds.val()));
  EXPECT_EQ(to_vec(again.train()), to_vec(ds.train()));
  auto fresh = TokenDataset::build(f, tok, options(0.25, 16, 3, cache_));
  EXPECT_FALSE(fresh.loaded_from_cache());
  EXPECT_EQ(to_vec(fresh.val()), to_vec(ds.val()));
  auto other = TokenDataset::build(f, tok, options(0.25, 16, 4));
  EXPECT_EQ(other.val().size() / 16, ds.val().size() / 16);
  EXPECT_NE(to_vec(other.val()), to_vec(ds.val()));
  // Held-out blocks are spread over the stream, not bunched at one end.
  EXPECT_NE(std::find(is_val.begin(), is_val.begin() + blocks / 2, true), is_val.begin() + blocks / 2);
  EXPECT_NE(std::find(is_val.begin() + blocks / 2, is_val.end(), true), is_val.end());
}

TEST_F(CorpusTest, SplitSizesAndLimits) {
  std::string f = write("s.txt", random_text(100, 2));  // 7 blocks of 16 (the last 4 tokens)
  FakeByteTokenizer tok;
  auto val_blocks = [&](double frac) {
    auto ds = TokenDataset::build(f, tok, options(frac, 16));
    EXPECT_EQ(ds.train().size() + ds.val().size(), 100u);
    return ds;
  };
  EXPECT_TRUE(val_blocks(0.0).val().empty());
  EXPECT_EQ(val_blocks(0.0).train().size(), 100u);
  auto one = val_blocks(0.01);  // round(0.07) = 0, raised to 1
  EXPECT_TRUE(one.val().size() == 16u || one.val().size() == 4u) << one.val().size();
  auto half = val_blocks(0.5);  // round(3.5) = 4 blocks
  EXPECT_TRUE(half.val().size() == 64u || half.val().size() == 52u) << half.val().size();

  std::string msg = error_of([&] { TokenDataset::build(f, tok, options(0.95, 16)); });
  EXPECT_NE(msg.find(f), std::string::npos) << msg;
  EXPECT_NE(msg.find("no training data"), std::string::npos) << msg;
  msg = error_of([&] { TokenDataset::build(f, tok, options(0.1, 100)); });
  EXPECT_NE(msg.find(f), std::string::npos) << msg;
  EXPECT_NE(msg.find("too few tokens"), std::string::npos) << msg;
  // Without a validation split one block is enough.
  EXPECT_EQ(TokenDataset::build(f, tok, options(0.0, 1000)).train().size(), 100u);
  EXPECT_NE(error_of([&] { TokenDataset::build(f, tok, options(1.0)); }).find("val_fraction"), std::string::npos);
  EXPECT_NE(error_of([&] { TokenDataset::build(f, tok, options(0.1, 0)); }).find("block_tokens"), std::string::npos);
}

TEST_F(CorpusTest, CacheIsReusedAndRebuiltWhenTheSourceOrTokenizerChanges) {
  std::string f = write("c.txt", random_text(500, 5));
  FakeByteTokenizer tok;
  DatasetOptions opt = options(0.1, 32);
  auto first = TokenDataset::build(f, tok, opt);
  EXPECT_FALSE(first.loaded_from_cache());
  EXPECT_TRUE(first.cache_path().starts_with(f + ".")) << first.cache_path();
  EXPECT_TRUE(first.cache_path().ends_with(".tokens")) << first.cache_path();
  EXPECT_TRUE(fs::exists(first.cache_path()));
  EXPECT_EQ(fs::file_size(first.cache_path()), 64u + 4u * 500u);

  auto second = TokenDataset::build(f, tok, opt);
  EXPECT_TRUE(second.loaded_from_cache());
  EXPECT_EQ(second.cache_path(), first.cache_path());
  EXPECT_EQ(to_vec(second.train()), to_vec(first.train()));
  EXPECT_EQ(to_vec(second.val()), to_vec(first.val()));

  // Touching the file (same bytes, new mtime) rebuilds.
  fs::last_write_time(f, fs::last_write_time(f) + std::chrono::seconds(5));
  EXPECT_FALSE(TokenDataset::build(f, tok, opt).loaded_from_cache());
  EXPECT_TRUE(TokenDataset::build(f, tok, opt).loaded_from_cache());

  // New contents rebuild and give the new tokens.
  const std::string changed = random_text(600, 6);
  write("c.txt", changed);
  fs::last_write_time(f, fs::last_write_time(f) + std::chrono::seconds(10));
  auto rebuilt = TokenDataset::build(f, tok, options(0.0));
  EXPECT_FALSE(rebuilt.loaded_from_cache());
  EXPECT_EQ(to_vec(rebuilt.train()), bytes_of(changed));

  // Another tokenizer fingerprint: its own cache file, built fresh.
  FakeByteTokenizer other("fake-byte-2");
  auto with_other = TokenDataset::build(f, other, opt);
  EXPECT_FALSE(with_other.loaded_from_cache());
  EXPECT_NE(with_other.cache_path(), first.cache_path());
  EXPECT_TRUE(TokenDataset::build(f, other, opt).loaded_from_cache());
  EXPECT_TRUE(TokenDataset::build(f, tok, opt).loaded_from_cache()) << "the first tokenizer's cache is untouched";
}

TEST_F(CorpusTest, DirectoryCacheSitsBesideItAndNoticesNewFiles) {
  write("d/a.txt", random_text(300, 1));
  FakeByteTokenizer tok;
  DatasetOptions opt = options(0.0);
  auto first = TokenDataset::build(path("d"), tok, opt);
  EXPECT_EQ(fs::path(first.cache_path()).parent_path(), dir_) << first.cache_path();
  EXPECT_TRUE(TokenDataset::build(path("d") + "/", tok, opt).loaded_from_cache()) << "trailing slash, same data";
  write("d/sub/b.txt", "more");
  auto grown = TokenDataset::build(path("d"), tok, opt);
  EXPECT_FALSE(grown.loaded_from_cache());
  EXPECT_EQ(grown.train().size(), 300u + 1u + 4u);
}

TEST_F(CorpusTest, CorruptOrTruncatedCacheIsRebuilt) {
  const std::string text = random_text(400, 7);
  std::string f = write("c.txt", text);
  FakeByteTokenizer tok;
  DatasetOptions opt = options(0.0);
  const std::string cache = TokenDataset::build(f, tok, opt).cache_path();
  auto expect_rebuilt = [&](const char* what) {
    auto ds = TokenDataset::build(f, tok, opt);
    EXPECT_FALSE(ds.loaded_from_cache()) << what;
    EXPECT_EQ(to_vec(ds.train()), bytes_of(text)) << what;
    EXPECT_TRUE(TokenDataset::build(f, tok, opt).loaded_from_cache()) << what << ": the rebuilt cache loads";
  };
  auto patch = [&](size_t offset, char byte) {
    std::fstream io(cache, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(offset));
    io.put(byte);
  };

  fs::resize_file(cache, fs::file_size(cache) - 4);
  expect_rebuilt("truncated by one token");
  fs::resize_file(cache, 30);
  expect_rebuilt("truncated inside the header");
  fs::resize_file(cache, fs::file_size(cache) + 4);
  expect_rebuilt("extended");
  patch(64 + 4 * 123, '{');  // still a valid id: only the checksum notices
  expect_rebuilt("a changed token");
  patch(64 + 4 * 10 + 2, 0x01);  // an id past the vocabulary
  expect_rebuilt("a token out of range");
  patch(0, 'X');
  expect_rebuilt("bad magic");
  patch(32, 0x7F);
  expect_rebuilt("a wrong token count");
  write_text_atomic(cache, "");
  expect_rebuilt("an empty file");
  write_text_atomic(cache, std::string(64 + 4 * 400, '\0'));
  expect_rebuilt("zeros");
}

TEST_F(CorpusTest, DefaultCorpusCachesInTheUserCacheDir) {
  if (!fs::is_directory(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " missing (run scripts/setup.sh)";
  FakeByteTokenizer tok;
  const char* old = std::getenv("XDG_CACHE_HOME");
  std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", path("xdg").c_str(), 1);
  auto ds = TokenDataset::build(kDefaultCorpus, tok, {});
  auto again = TokenDataset::build(kDefaultCorpus, tok, {});
  auto in_dir = TokenDataset::build(kDefaultCorpus, tok, options(0.1, 256, 0, cache_));
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");

  EXPECT_TRUE(ds.cache_path().starts_with(path("xdg") + "/hymba/default.")) << ds.cache_path();
  EXPECT_FALSE(ds.loaded_from_cache());
  EXPECT_TRUE(again.loaded_from_cache());
  EXPECT_TRUE(in_dir.cache_path().starts_with(cache_ + "/default.")) << in_dir.cache_path();
  EXPECT_EQ(to_vec(in_dir.train()), to_vec(ds.train()));
  EXPECT_GT(ds.train().size(), 50000u);
  EXPECT_GT(ds.val().size(), 5000u);
  std::cout << "[ default corpus: " << ds.train().size() + ds.val().size() << " byte tokens ]\n";
}

TEST_F(CorpusTest, CacheDirOptionNamesFilesUniquely) {
  std::string a = write("x/data.txt", "first data set");
  std::string b = write("y/data.txt", "second data set");
  FakeByteTokenizer tok;
  DatasetOptions opt = options(0.0, 256, 0, cache_);
  auto da = TokenDataset::build(a, tok, opt);
  auto db = TokenDataset::build(b, tok, opt);
  EXPECT_EQ(fs::path(da.cache_path()).parent_path(), fs::path(cache_));
  EXPECT_NE(da.cache_path(), db.cache_path());
  EXPECT_TRUE(TokenDataset::build(a, tok, opt).loaded_from_cache());
  EXPECT_EQ(to_vec(TokenDataset::build(b, tok, opt).train()), bytes_of("second data set"));
}

TEST(BatchSampler, WindowsAreDeterministicShiftedAndInRange) {
  std::vector<int32_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  const int64_t B = 4, T = 32;
  BatchSampler s(tokens, B, T, 9), same(tokens, B, T, 9), other(tokens, B, T, 10);
  std::vector<int32_t> ids, targets, ids2, targets2;
  s.batch_at(7, ids, targets);
  ASSERT_EQ(ids.size(), static_cast<size_t>(B * T));
  ASSERT_EQ(targets.size(), ids.size());
  for (int64_t b = 0; b < B; ++b) {
    int32_t o = ids[b * T];
    EXPECT_GE(o, 0);
    EXPECT_LE(o, 1000 - T - 1);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(ids[b * T + t], o + t);
      EXPECT_EQ(targets[b * T + t], o + t + 1);
    }
  }
  same.batch_at(3, ids2, targets2);
  same.batch_at(7, ids2, targets2);
  EXPECT_EQ(ids2, ids) << "a step does not depend on the steps drawn before";
  EXPECT_EQ(targets2, targets);
  s.batch_at(8, ids2, targets2);
  EXPECT_NE(ids2, ids);
  other.batch_at(7, ids2, targets2);
  EXPECT_NE(ids2, ids);
  EXPECT_EQ(s.steps_per_epoch(), 1000 / (B * T));
}

TEST(BatchSampler, EveryOffsetIsReachable) {
  std::vector<int32_t> tokens = {10, 11, 12, 13, 14, 15};  // T=3: offsets 0, 1, 2
  BatchSampler s(tokens, 2, 3, 1);
  std::set<int32_t> starts;
  std::vector<int32_t> ids, targets;
  for (int64_t step = 0; step < 50; ++step) {
    s.batch_at(step, ids, targets);
    starts.insert(ids[0]);
    starts.insert(ids[3]);
  }
  EXPECT_EQ(starts, (std::set<int32_t>{10, 11, 12}));
  EXPECT_EQ(s.steps_per_epoch(), 1);
}

TEST(BatchSampler, TooFewTokensNamesSeqLen) {
  std::vector<int32_t> tokens(64, 1);
  EXPECT_NO_THROW(BatchSampler(tokens, 1, 63, 0));
  std::string msg = error_of([&] { BatchSampler(tokens, 1, 64, 0); });
  EXPECT_NE(msg.find("seq_len"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  EXPECT_FALSE(error_of([&] { BatchSampler(tokens, 0, 8, 0); }).empty());
  EXPECT_FALSE(error_of([&] { BatchSampler(tokens, 1, 0, 0); }).empty());
}

TEST(EvalWindows, CountNonOverlappingWindowsOfTPlusOne) {
  auto windows = [](size_t n, int64_t T) { return num_eval_windows(std::vector<int32_t>(n, 0), T); };
  EXPECT_EQ(windows(0, 8), 0);
  EXPECT_EQ(windows(8, 8), 0);
  EXPECT_EQ(windows(9, 8), 1);
  EXPECT_EQ(windows(16, 8), 1);
  EXPECT_EQ(windows(17, 8), 2);
  EXPECT_EQ(windows(1001, 10), 100);
  EXPECT_FALSE(error_of([&] { windows(10, 0); }).empty());
}

}  // namespace
}  // namespace hymba
