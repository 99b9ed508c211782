// IMDB as published, for `hymba classify`: the aclImdb/ folder (train|test,
// pos|neg) and CSV with text,label columns (tests/fixtures/datasets): which
// split each file maps to, the labels and texts read, one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "classify/data.h"
#include "core/error.h"
#include "dataset_fixtures.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;

using test::dataset_fixture;
using test::expect_one_line_error;

class ClassifyFormats : public test::DatasetScratch {};

TEST_F(ClassifyFormats, ImdbFolderAndCsvGiveLabelledReviews) {
  using classify::read_labeled;
  const std::string imdb = dataset_fixture("aclImdb");
  const auto train = read_labeled(imdb);
  ASSERT_EQ(train.size(), 4u) << "train/pos and train/neg; unsup/ and urls_*.txt are not read";
  EXPECT_EQ(train[0].label, "neg");
  EXPECT_EQ(fs::path(train[0].where).filename(), "0_2.txt");
  EXPECT_EQ(train[3].label, "pos");
  EXPECT_NE(train[2].text.find("<br /><br />Highly recommended."), std::string::npos) << "the review as published";
  EXPECT_EQ(classify::resolve_val_path(imdb, ""), imdb + "/test") << "IMDB's test split is the held-out one";
  EXPECT_EQ(classify::resolve_val_path(imdb, "dev.tsv"), "dev.tsv");
  EXPECT_EQ(classify::resolve_val_path(imdb + "/train", ""), "") << "one split: the engine splits it";
  const auto test = read_labeled(imdb + "/test");
  ASSERT_EQ(test.size(), 2u);
  EXPECT_EQ(test[1].text, "Charming, funny and beautifully shot.");

  const auto csv = read_labeled(dataset_fixture("imdb.csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0].text, "A wonderful film, with superb acting.");
  EXPECT_EQ(csv[0].label, "1");
  EXPECT_EQ(csv[1].text, "Dull and far too long. He said \"never again\".");
  EXPECT_EQ(csv[2].text, "A review\nover two lines.");
  const auto kaggle = read_labeled(dataset_fixture("imdb_kaggle.csv"));
  ASSERT_EQ(kaggle.size(), 2u) << "Kaggle's review,sentiment columns";
  EXPECT_EQ(kaggle[0].label, "positive");
  EXPECT_EQ(kaggle[1].text, "Boring.");

  const std::string broken = copy("aclImdb");
  fs::remove_all(fs::path(broken) / "train" / "neg");
  expect_one_line_error([&] { read_labeled(broken); }, {"train/neg: missing", "pos/ and neg/"});
  fs::remove_all(fs::path(broken) / "test");
  expect_one_line_error([&] { classify::resolve_val_path(broken, ""); }, {"aclImdb/test: missing"});
  std::ofstream(dir_ / "cols.csv") << "body,stars\nnice,5\n";
  expect_one_line_error([&] { read_labeled((dir_ / "cols.csv").string()); }, {"cols.csv:1", "no 'text' column", "body, stars"});
  std::ofstream(dir_ / "short.csv") << "text,label\n\"just text\"\n";
  expect_one_line_error([&] { read_labeled((dir_ / "short.csv").string()); }, {"short.csv: row 2", "1 fields", "2"});
  std::ofstream(dir_ / "open.csv") << "text,label\n\"never closed,1\n";
  expect_one_line_error([&] { read_labeled((dir_ / "open.csv").string()); }, {"open.csv: row 2", "not closed"});
}

}  // namespace
}  // namespace hymba
