// Data as the seeds cut it: chunked splits (data_split chunks-shuffled),
// epochs of shuffled batches with drop_last (batching epochs), EOS as each
// chunk's last target (chunk_last_target eos), on hand-made token streams,
// and the recipe keys through training, the suites and a resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "ablate/suite.h"
#include "cli_util.h"
#include "core/error.h"
#include "data/chunk_split.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/batch_sampler.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "formats/checkpoint.h"
#include "train/trainer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The chunk index a window of stream 0, 1, 2, ... starts at.
int64_t chunk_of(const std::vector<int32_t>& windows, int64_t w, int64_t T) { return windows[w * (T + 1)] / T; }

TEST(ChunkSplit, Seed001CutsNextTokenWindowsAndSplitsNinetyTen) {
  const int64_t T = 10;
  const std::vector<int32_t> stream = iota_tokens(1000);
  const ChunkSplit s = split_chunks(stream, T, 0.1, 42, -1);
  // (1000 - 1) / 10 = 99 chunks: int(0.9 * 99) = 89 train, 10 validation.
  EXPECT_EQ(s.train_chunks, 89);
  EXPECT_EQ(s.val_chunks, 10);
  ASSERT_EQ(s.train.size(), 89u * (T + 1));
  ASSERT_EQ(s.val.size(), 10u * (T + 1));
  std::set<int64_t> seen;
  for (const auto* side : {&s.train, &s.val})
    for (int64_t w = 0; w < static_cast<int64_t>(side->size()) / (T + 1); ++w) {
      const int64_t c = chunk_of(*side, w, T);
      EXPECT_TRUE(seen.insert(c).second) << "chunk " << c << " on both sides or twice";
      for (int64_t t = 0; t <= T; ++t)  // inputs c*T .. c*T+T-1, the last target c*T+T
        ASSERT_EQ((*side)[w * (T + 1) + t], c * T + t);
    }
  EXPECT_EQ(seen.size(), 99u);
  EXPECT_EQ(*seen.rbegin(), 98);
  // Shuffled: not the stream order, reproducible by seed, other by another.
  std::vector<int64_t> order;
  for (int64_t w = 0; w < 89; ++w) order.push_back(chunk_of(s.train, w, T));
  EXPECT_FALSE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(split_chunks(stream, T, 0.1, 42, -1).val, s.val);
  EXPECT_NE(split_chunks(stream, T, 0.1, 43, -1).val, s.val);
}

TEST(ChunkSplit, Seed001SizesOnItsCorpus) {
  // Seed 001's Tiny Shakespeare: 1,194 chunks of 256 -> 1,074 train, 120 validation.
  const ChunkSplit s = split_chunks(iota_tokens(1194 * 256 + 1), 256, 0.1, 42, -1);
  EXPECT_EQ(s.train_chunks, 1074);
  EXPECT_EQ(s.val_chunks, 120);
  // One token fewer and the last chunk has no last target: 1,193 chunks.
  EXPECT_EQ(split_chunks(iota_tokens(1194 * 256), 256, 0.1, 42, -1).train_chunks +
                split_chunks(iota_tokens(1194 * 256), 256, 0.1, 42, -1).val_chunks,
            1193);
}

TEST(ChunkSplit, Seed002SetsEachChunksLastTargetToEos) {
  const int64_t T = 8;
  const int32_t eos = 9999;
  const std::vector<int32_t> stream = iota_tokens(8 * 40 + 7);  // floor(327 / 8) = 40 chunks; the tail is dropped
  const ChunkSplit s = split_chunks(stream, T, 0.05, 1, eos);
  EXPECT_EQ(s.train_chunks, 38);  // int(0.95 * 40) = 38
  EXPECT_EQ(s.val_chunks, 2);
  for (const auto* side : {&s.train, &s.val})
    for (size_t w = 0; w < side->size() / (T + 1); ++w) {
      const int32_t* win = side->data() + w * (T + 1);
      EXPECT_EQ(win[0] % T, 0);
      for (int64_t t = 1; t < T; ++t) EXPECT_EQ(win[t], win[0] + t) << "targets inside a chunk are the next tokens";
      EXPECT_EQ(win[T], eos) << "the last target is EOS, not the next chunk's first token";
    }
  // Exactly divisible: every token is in a chunk (seed 001's rule would lose the last chunk).
  EXPECT_EQ(split_chunks(iota_tokens(80), T, 0.1, 1, eos).train_chunks +
                split_chunks(iota_tokens(80), T, 0.1, 1, eos).val_chunks,
            10);
}

TEST(ChunkSplit, TooFewChunksNameSeqLenAndValFraction) {
  const std::vector<int32_t> stream = iota_tokens(25);
  try {
    split_chunks(stream, 10, 0.1, 0, -1);  // 2 chunks: int(0.9 * 2) = 1 train, 1 validation
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  for (double f : {0.001, 0.9}) {
    try {
      split_chunks(stream, 10, f, 0, -1);
      if (f == 0.9) FAIL() << "no training chunk left";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("seq_len 10"), std::string::npos) << m;
      EXPECT_NE(m.find("val_fraction"), std::string::npos) << m;
    }
  }
}

TEST(EpochBatches, DropLastAndReshuffleEachEpoch) {
  const int64_t T = 4, B = 16;
  // 1,074 whole windows of T + 1 tokens back to back, numbered by their first token.
  std::vector<int32_t> windows;
  for (int32_t w = 0; w < 1074; ++w)
    for (int64_t t = 0; t <= T; ++t) windows.push_back(static_cast<int32_t>(w * 100 + t));
  const BatchSampler s = BatchSampler::epochs(windows, T + 1, B, T, 42);
  EXPECT_EQ(s.steps_per_epoch(), 67) << "floor(1074 / 16): seed 001's 67 batches";
  std::vector<int32_t> ids, targets;
  auto epoch_windows = [&](int64_t epoch) {
    std::vector<int32_t> firsts;
    for (int64_t k = 0; k < 67; ++k) {
      s.batch_at(epoch * 67 + k, ids, targets);
      for (int64_t b = 0; b < B; ++b) {
        firsts.push_back(ids[b * T] / 100);
        for (int64_t t = 0; t < T; ++t) {
          EXPECT_EQ(ids[b * T + t], ids[b * T] + t) << "a whole window, not across two";
          EXPECT_EQ(targets[b * T + t], ids[b * T + t] + 1);
        }
      }
    }
    return firsts;
  };
  const std::vector<int32_t> e0 = epoch_windows(0), e1 = epoch_windows(1);
  EXPECT_EQ(std::set<int32_t>(e0.begin(), e0.end()).size(), 67u * 16) << "no window twice in an epoch";
  EXPECT_EQ(1074 - std::set<int32_t>(e0.begin(), e0.end()).size(), 2u) << "the last partial batch is dropped";
  EXPECT_NE(e0, e1) << "each epoch is shuffled anew";
  EXPECT_EQ(epoch_windows(0), e0) << "any step can be regenerated";
  // A stream (stride T): windows as evaluation cuts it, floor((n - 1) / T).
  const std::vector<int32_t> stream = iota_tokens(4 * 20 + 1);
  EXPECT_EQ(BatchSampler::epochs(stream, T, 3, T, 0).steps_per_epoch(), 6);  // 20 windows / 3
  try {
    BatchSampler::epochs(stream, T, 21, T, 0);
    FAIL() << "fewer windows than one batch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one batch of 21"), std::string::npos) << e.what();
  }
}

TEST(DataCuts, RecipeKeysMapAndAreRecordedWhenOn) {
  TrainOptions t;
  EXPECT_FALSE(recipe_core_json(t).contains("data_split")) << "defaults unwritten: older records still match";
  ablate::apply_train_settings(
      t, {{"data_split", "chunks-shuffled"}, {"batching", "epochs"}, {"chunk_last_target", "eos"}}, "flags");
  EXPECT_EQ(t.data_split, DataSplit::kChunksShuffled);
  EXPECT_TRUE(t.batching_epochs);
  EXPECT_TRUE(t.chunk_last_eos);
  const json j = ablate::train_settings_json(t);
  EXPECT_EQ(j["data_split"], "chunks-shuffled");
  EXPECT_EQ(j["batching"], "epochs");
  EXPECT_EQ(j["chunk_last_target"], "eos");
  EXPECT_THROW(ablate::apply_train_settings(t, {{"data_split", "random"}}, "flags"), Error);
  EXPECT_THROW(ablate::apply_train_settings(t, {{"batching", true}}, "flags"), Error);
  EXPECT_THROW(ablate::apply_train_settings(t, {{"chunk_last_target", "pad"}}, "flags"), Error);
  const DatasetOptions d = dataset_options(t);
  EXPECT_EQ(d.split, DataSplit::kChunksShuffled);
  EXPECT_EQ(d.chunk_tokens, t.seq_len);
  EXPECT_TRUE(d.chunk_last_eos);
}

TEST(DataCuts, SeedSuitesCutAsTheirSeeds) {
  auto train_of = [](const char* suite) {
    TrainOptions t;
    ablate::apply_train_settings(t, ablate::load_suite(suite, "tiny").train, suite);
    return t;
  };
  const TrainOptions s001 = train_of("seed-ablation");
  EXPECT_EQ(s001.data_split, DataSplit::kChunksShuffled);
  EXPECT_TRUE(s001.batching_epochs);
  EXPECT_FALSE(s001.chunk_last_eos);
  EXPECT_EQ(s001.seed, 42u);
  EXPECT_DOUBLE_EQ(s001.val_fraction, 0.1);
  for (const char* name : {"hymba-roadmap", "hymba-roadmap-epoch"}) {
    const TrainOptions s002 = train_of(name);
    EXPECT_EQ(s002.data_split, DataSplit::kChunksShuffled) << name;
    EXPECT_TRUE(s002.batching_epochs) << name;
    EXPECT_TRUE(s002.chunk_last_eos) << name;
    EXPECT_DOUBLE_EQ(s002.val_fraction, 0.05);
  }
  EXPECT_EQ(train_of("demo").data_split, DataSplit::kBlocks);
  EXPECT_EQ(train_of("seed-000").data_split, DataSplit::kBlocks);
}

// End to end: a chunked run trains whole epochs (drop_last), is evaluated on
// its validation chunks by `hymba eval`, and refuses a resume without them.
class DataCutsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_cuts_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream out(dir_ / "toy.txt");
    for (int i = 0; i < 200; ++i) out << "the cat sees the ball number " << i % 7 << ".\n";  // 6,000-odd bytes
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DataCutsRun, EpochsOfChunksTrainEvaluateAndResumeByRecipe) {
  const std::string data = (dir_ / "toy.txt").string();
  auto tok = make_byte_tokenizer();
  TrainOptions o;
  o.data = data;
  o.out_dir = (dir_ / "run").string();
  o.seq_len = 32;
  o.batch = 8;
  o.epochs = 2;
  o.data_split = DataSplit::kChunksShuffled;
  o.batching_epochs = true;
  o.chunk_last_eos = true;
  o.eval_interval = 1000;
  o.quiet = true;
  o.threads = 1;
  const TokenDataset ds = TokenDataset::build(data, *tok, dataset_options(o));
  const int64_t chunks = static_cast<int64_t>(ds.train().size() + ds.val().size()) / 33;
  const int64_t bytes = static_cast<int64_t>(fs::file_size(data));
  EXPECT_EQ(chunks, bytes / 32);
  const int64_t train_chunks = static_cast<int64_t>(ds.train().size()) / 33;
  const std::string config = std::string(HYMBA_FIXTURES_DIR) + "/tiny_hybrid/config.json";
  const TrainSummary s = train(load_config_file(config), o);
  EXPECT_EQ(s.steps, 2 * (train_chunks / 8)) << "two epochs of floor(train chunks / batch) batches";

  const auto ev = test::run_cli_stdout("--threads 1 eval --ckpt " + o.out_dir + " --json");
  ASSERT_EQ(ev.exit_code, 0) << ev.errors;
  const json r = json::parse(ev.output);
  EXPECT_EQ(r["tokens"].get<int64_t>(), (chunks - train_chunks) * 32) << "every validation chunk, whole";
  EXPECT_NEAR(r["loss"].get<double>(), s.final_val_loss, 1e-4);
  const auto other_len = test::run_cli_stdout("--threads 1 eval --ckpt " + o.out_dir + " --seq-len 16");
  EXPECT_NE(other_len.exit_code, 0);
  EXPECT_NE(other_len.errors.find("chunks of 32 tokens"), std::string::npos) << other_len.errors;

  // A resume that drops the EOS rewrite is refused by name.
  TrainOptions changed = o;
  changed.chunk_last_eos = false;
  changed.epochs = 3;
  changed.resume = true;
  try {
    train(load_config_file(config), changed);
    FAIL() << "a resume with another chunk_last_target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chunk-last-target \"eos\" -> \"next\""), std::string::npos) << e.what();
  }
  // Chunks under random windows would cross chunk borders: refused.
  changed = o;
  changed.batching_epochs = false;
  changed.out_dir = (dir_ / "other").string();
  EXPECT_THROW(train(load_config_file(config), changed), Error);
}

}  // namespace
}  // namespace hymba
