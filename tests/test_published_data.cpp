// The datasets the seeds name, read from local files in the layouts their
// owners publish (tests/fixtures/datasets): which file feeds which split, the
// documents read, and one-line errors for a wrong layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "cli_util.h"
#include "core/error.h"
#include "dataset_fixtures.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/published_corpus.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using Docs = std::vector<std::string>;

using test::dataset_fixture;
using test::error_of;
using test::expect_one_line_error;

class PublishedData : public test::DatasetScratch {};

TEST(PublishedCorpus, TinyStoriesTextPairMapsTrainAndValid) {
  const std::string dir = dataset_fixture("tinystories");
  for (const std::string& spec : {dir, dir + "/TinyStories-train.txt", dir + "/TinyStories-valid.txt"}) {
    const auto c = find_published_corpus(spec);
    ASSERT_TRUE(c.has_value()) << spec;
    EXPECT_EQ(c->format, "tinystories");
    EXPECT_EQ(fs::path(c->train.at(0)).filename(), "TinyStories-train.txt");
    EXPECT_EQ(fs::path(c->valid.at(0)).filename(), "TinyStories-valid.txt");
    EXPECT_TRUE(c->test.empty());
  }
  const Docs train = read_documents(dir);
  ASSERT_EQ(train.size(), 3u) << "three stories between <|endoftext|> lines";
  EXPECT_TRUE(train[0].starts_with("Once upon a time, there was a little girl named Lily."));
  EXPECT_TRUE(train[2].ends_with("gave her milk.")) << "trimmed: " << train[2];
  const Docs valid = read_documents(dir, CorpusSplit::kValid);
  ASSERT_EQ(valid.size(), 2u) << "the last story needs no separator after it";
  EXPECT_TRUE(valid[1].starts_with("Ben and Mia"));
  expect_one_line_error([&] { read_documents(dir, CorpusSplit::kTest); }, {"tinystories", "no published test split"});
}

TEST(PublishedCorpus, TinyStoriesJsonFormReadsEveryStory) {
  const Docs one = read_documents(dataset_fixture("TinyStories_all_data/data00.json"));
  EXPECT_EQ(one, (Docs{"Once upon a time, a bird sang on a tree. The bird was happy.",
                       "Max had a blue car. He drove it around the room and smiled."}));
  const Docs all = read_documents(dataset_fixture("TinyStories_all_data"));
  ASSERT_EQ(all.size(), 3u) << "data00.json then data01.json";
  EXPECT_EQ(all[2], "The sun was hot. Anna drank cold water and felt good.");
  EXPECT_FALSE(has_published_splits(dataset_fixture("TinyStories_all_data"))) << "the JSON form has no split";
  expect_one_line_error([&] { read_documents(dataset_fixture("TinyStories_all_data"), CorpusSplit::kValid); },
               {"TinyStories_all_data", "publishes no valid split"});
}

TEST(PublishedCorpus, WikiTextRawMapsItsThreeFiles) {
  const std::string dir = dataset_fixture("wikitext-103-raw");
  for (const std::string& spec : {dir, dir + "/wiki.train.raw", dir + "/wiki.test.raw"}) {
    const auto c = find_published_corpus(spec);
    ASSERT_TRUE(c.has_value()) << spec;
    EXPECT_EQ(c->format, "wikitext-103");
    EXPECT_EQ(fs::path(c->train.at(0)).filename(), "wiki.train.raw");
    EXPECT_EQ(fs::path(c->valid.at(0)).filename(), "wiki.valid.raw");
    EXPECT_EQ(fs::path(c->test.at(0)).filename(), "wiki.test.raw");
  }
  const Docs train = read_documents(dir);
  ASSERT_EQ(train.size(), 1u) << "a split is one document, as published";
  EXPECT_NE(train[0].find(" = Valkyria Chronicles III = "), std::string::npos);
  EXPECT_NE(train[0].find(" = Tower Building of the Little Rock Arsenal = "), std::string::npos);
  EXPECT_NE(read_documents(dir, CorpusSplit::kValid).at(0).find("Homarus gammarus"), std::string::npos);
  EXPECT_NE(read_documents(dir, CorpusSplit::kTest).at(0).find("Robert Boulter"), std::string::npos);
}

TEST(PublishedCorpus, Pg19MapsItsSplitFolders) {
  const auto c = find_published_corpus(dataset_fixture("pg19"));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->format, "pg19");
  ASSERT_EQ(c->train.size(), 2u);
  EXPECT_EQ(fs::path(c->train[0]).filename(), "10001.txt");
  EXPECT_EQ(fs::path(c->valid.at(0)).filename(), "20001.txt");
  EXPECT_EQ(fs::path(c->test.at(0)).filename(), "30001.txt");
  const Docs train = read_documents(dataset_fixture("pg19"));
  ASSERT_EQ(train.size(), 2u) << "one document per book";
  EXPECT_NE(train[1].find("The ship left the harbour"), std::string::npos);
  EXPECT_NE(read_documents(dataset_fixture("pg19"), CorpusSplit::kValid).at(0).find("garden"), std::string::npos);
  // One split folder alone is a plain directory of books.
  EXPECT_FALSE(has_published_splits(dataset_fixture("pg19/train")));
  EXPECT_EQ(read_documents(dataset_fixture("pg19/train")), train);
  // IMDB's aclImdb/ has train/ and test/ too, of pos/ and neg/ folders: not PG-19.
  EXPECT_FALSE(has_published_splits(dataset_fixture("aclImdb")));
  EXPECT_EQ(read_documents(dataset_fixture("aclImdb")).size(), 8u) << "every .txt below it, as any folder";
}

TEST_F(PublishedData, WrongLayoutsNameWhatIsMissing) {
  const std::string ts = copy("tinystories");
  fs::remove(fs::path(ts) / "TinyStories-valid.txt");
  expect_one_line_error([&] { read_documents(ts + "/TinyStories-train.txt"); },
               {"TinyStories-valid.txt: missing", "side by side"});
  expect_one_line_error([&] { read_documents(ts); }, {"TinyStories-valid.txt: missing"});
  std::ofstream(fs::path(ts) / "TinyStoriesV2-GPT4-train.txt") << "x";
  expect_one_line_error([&] { read_documents(ts); }, {"two TinyStories versions", "TinyStories and TinyStoriesV2-GPT4"});

  const std::string wiki = copy("wikitext-103-raw");
  fs::remove(fs::path(wiki) / "wiki.valid.raw");
  expect_one_line_error([&] { read_documents(wiki); }, {"wiki.valid.raw: missing", "WikiText-103"});
  expect_one_line_error([&] { corpus_files(wiki + "/wiki.train.raw"); }, {"wiki.valid.raw: missing"});

  const std::string pg = copy("pg19");
  fs::rename(fs::path(pg) / "validation", fs::path(pg) / "valid");
  expect_one_line_error([&] { read_documents(pg); }, {"pg19/validation: missing", "PG-19"});
  fs::rename(fs::path(pg) / "valid", fs::path(pg) / "validation");
  fs::remove(fs::path(pg) / "validation" / "20001.txt");
  expect_one_line_error([&] { read_documents(pg); }, {"pg19/validation", "no .txt books"});

  std::ofstream(dir_ / "story.json") << R"({"story": "not an array"})";
  expect_one_line_error([&] { read_documents((dir_ / "story.json").string()); }, {"story.json", "JSON array", "object"});
  std::ofstream(dir_ / "nostory.json") << R"([{"story": "ok"}, {"text": "no story"}])";
  expect_one_line_error([&] { read_documents((dir_ / "nostory.json").string()); }, {"nostory.json", "item 1", "\"story\""});
  std::ofstream(dir_ / "numstory.json") << R"([{"story": 3}])";
  expect_one_line_error([&] { read_documents((dir_ / "numstory.json").string()); }, {"item 0", "number", "string"});
}

// A published dataset keeps its splits in the token dataset: train and
// valid are each file's tokens (documents joined by eos), not a random cut.
TEST_F(PublishedData, TokenDatasetUsesThePublishedSplits) {
  auto tok = make_byte_tokenizer();
  auto tokens_of = [&](const Docs& docs) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (i > 0) out.push_back(tok->eos_id());
      const std::vector<int32_t> ids = tok->encode(docs[i]);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  };
  DatasetOptions o;
  o.cache_dir = (dir_ / "cache").string();
  o.with_test = true;
  const std::string wiki = dataset_fixture("wikitext-103-raw");
  const TokenDataset ds = TokenDataset::build(wiki, *tok, o);
  auto vec = [](std::span<const int32_t> s) { return std::vector<int32_t>(s.begin(), s.end()); };
  EXPECT_EQ(vec(ds.train()), tokens_of(read_documents(wiki)));
  EXPECT_EQ(vec(ds.val()), tokens_of(read_documents(wiki, CorpusSplit::kValid)));
  EXPECT_EQ(vec(ds.test()), tokens_of(read_documents(wiki, CorpusSplit::kTest)));
  EXPECT_EQ(ds.window_stride(), 0);
  EXPECT_FALSE(ds.loaded_from_cache());
  const TokenDataset again = TokenDataset::build(wiki, *tok, o);
  EXPECT_TRUE(again.loaded_from_cache()) << "each split has its own cache file";
  EXPECT_EQ(vec(again.val()), vec(ds.val()));
  EXPECT_TRUE(fs::path(ds.cache_path()).filename().string().starts_with("wikitext-103-raw.train-")) << ds.cache_path();

  DatasetOptions no_test = o;
  no_test.with_test = false;
  const TokenDataset stories = TokenDataset::build(dataset_fixture("tinystories"), *tok, no_test);
  EXPECT_EQ(vec(stories.val()), tokens_of(read_documents(dataset_fixture("tinystories"), CorpusSplit::kValid)));
  expect_one_line_error([&] { TokenDataset::build(dataset_fixture("tinystories"), *tok, o); }, {"no published test split"});
  expect_one_line_error([&] { TokenDataset::build(dataset_fixture("TinyStories_all_data"), *tok, o); }, {"publishes no test split"});
}

// Through the command line: a run on WikiText-103 validates on wiki.valid.raw,
// and `eval --split test` scores wiki.test.raw (byte tokens: one per byte).
TEST_F(PublishedData, TrainAndEvalUseThePublishedSplits) {
  const std::string wiki = copy("wikitext-103-raw");
  const std::string run = (dir_ / "run").string();
  const auto trained = test::run_cli("--threads 1 train --config " + std::string(HYMBA_FIXTURES_DIR) +
                                     "/tiny_hybrid/config.json --data " + wiki + " --out " + run +
                                     " --steps 2 --batch 2 --seq-len 16 --quiet");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto eval = [&](const std::string& split) {
    const auto r = test::run_cli_stdout("--threads 1 eval --ckpt " + run + " --split " + split + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.errors;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json();
  };
  const int64_t valid = static_cast<int64_t>(fs::file_size(fs::path(wiki) / "wiki.valid.raw"));
  const int64_t test = static_cast<int64_t>(fs::file_size(fs::path(wiki) / "wiki.test.raw"));
  EXPECT_EQ(eval("val")["tokens"], (valid - 1) / 16 * 16) << "every window of wiki.valid.raw";
  EXPECT_EQ(eval("test")["tokens"], (test - 1) / 16 * 16) << "every window of wiki.test.raw";
  std::ofstream(dir_ / "plain.txt") << std::string(200, 'a');
  const auto none = test::run_cli_stdout("--threads 1 eval --ckpt " + run + " --data " + (dir_ / "plain.txt").string() +
                                         " --split test");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.errors.find("publishes no test split"), std::string::npos) << none.errors;
}

}  // namespace
}  // namespace hymba
