// Decode steps choose one thread or all of them by timing
// (infer/step_threads.h): the chooser's trials, and the property that makes
// the choice sound, a step's logits independent of its thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "core/threading.h"
#include "infer/decoder.h"
#include "infer/step_threads.h"
#include "model/model.h"
#include "decode_families.h"

namespace hymba {
namespace {

using nlohmann::json;
using infer::Decoder;
using infer::SequenceCache;
using test::Family;
using test::families;
using test::random_ids;
using test::tiny;

// Decoders time one thread against all on their first steps and keep the
// faster (infer/step_threads.h): that is only sound if a step's logits do
// not depend on its thread count, in every format. Widths of 64 and more so
// that the products, attention and scan split between the threads.
TEST(Decode, StepResultsDoNotDependOnTheThreadCount) {
  ASSERT_GE(num_threads(), 2) << "CTest runs these tests with OMP_NUM_THREADS=2";
  const int64_t total = 12, prompt_len = 3;
  for (const Family& f : families()) {
    for (const infer::WeightFormat format :
         {infer::WeightFormat::kF32, infer::WeightFormat::kQ8, infer::WeightFormat::kQ4}) {
      SCOPED_TRACE(std::string(f.name) + " " + infer::to_string(format));
      json over = f.over;
      over["hidden_size"] = 64;
      over["vocab_size"] = 97;
      if (!over.contains("intermediate_size")) over["intermediate_size"] = 96;
      const ModelConfig c = ModelConfig::from_json(tiny(over));
      Model m(c, false);
      m.init(5);
      const std::vector<int32_t> ids = random_ids(total, c.vocab_size, 3);
      std::vector<std::vector<float>> runs;
      for (const int threads : {1, 2}) {
        Decoder dec(m, format);
        dec.set_step_threads(threads);
        EXPECT_EQ(dec.step_threads(1), threads);
        SequenceCache a = dec.new_cache(total), b = dec.new_cache(total);
        dec.prefill(a, std::vector<int32_t>(ids.begin(), ids.begin() + prompt_len));
        dec.prefill(b, std::vector<int32_t>(ids.begin() + 1, ids.begin() + prompt_len + 1));
        std::vector<float> all, logits(static_cast<size_t>(2 * c.vocab_size));
        const int64_t team_jobs = spin_team_jobs();
        for (int64_t t = prompt_len; t + 1 < total; ++t) {
          SequenceCache* both[] = {&a, &b};
          const int32_t tokens[] = {ids[static_cast<size_t>(t)], ids[static_cast<size_t>(t + 1)]};
          dec.step(both, tokens, logits.data());
          all.insert(all.end(), logits.begin(), logits.end());
        }
        // Several threads run the step's block products on the spinning team
        // (core/parallel.h); f32 products of two rows are OpenBLAS's sgemm.
        if (threads > 1 && format != infer::WeightFormat::kF32) {
          EXPECT_GT(spin_team_jobs(), team_jobs);
        }
        runs.push_back(all);
      }
      ASSERT_EQ(runs[0].size(), runs[1].size());
      EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
    }
  }
}

// The choice between one thread and all: an untimed first step, then the
// two alternate, each keeping its fastest step; one thread is kept only when
// clearly faster (kOneThreadMargin), else all threads.
TEST(StepThreads, KeepsTheFasterAfterAlternatingTrials) {
  const auto choose = [](const std::vector<double>& one, const std::vector<double>& all) {
    infer::StepThreads s(2);
    EXPECT_EQ(s.next(), 2);  // the warm-up
    s.record(9.0);
    for (int k = 0; k < infer::StepThreads::kTrialsEach; ++k) {
      EXPECT_EQ(s.chosen(), 0);
      EXPECT_EQ(s.next(), 1);
      s.record(one[static_cast<size_t>(k)]);
      EXPECT_EQ(s.next(), 2);
      s.record(all[static_cast<size_t>(k)]);
    }
    const int c = s.chosen();
    EXPECT_EQ(s.next(), c);
    s.record(0.0);  // later steps change nothing
    EXPECT_EQ(s.chosen(), c);
    return c;
  };
  static_assert(infer::StepThreads::kTrialsEach == 3, "the cases below time three steps each");
  EXPECT_EQ(choose({0.010, 0.012, 0.011}, {0.020, 0.018, 0.019}), 1);
  EXPECT_EQ(choose({0.010, 0.030, 0.012}, {0.011, 0.009, 0.013}), 2);  // each candidate's fastest step counts
  EXPECT_EQ(choose({0.010, 0.010, 0.010}, {0.010, 0.010, 0.010}), 2);  // a tie keeps all threads
  EXPECT_EQ(choose({0.0095, 0.012, 0.011}, {0.011, 0.010, 0.012}), 2);  // 5 % faster is within the noise
  EXPECT_EQ(choose({0.0085, 0.012, 0.011}, {0.011, 0.010, 0.012}), 1);  // 15 % faster is not
  infer::StepThreads single(1);
  EXPECT_EQ(single.chosen(), 1);
  EXPECT_EQ(single.next(), 1);
}

// A step's products run in the format at any number of sequences
// (Decoder::step), so a sequence's logits do not depend on how many others
// share its step: 17 sequences (over DecoderLinears::kFloatRows) give each
// the bits it gets alone, in q8 and q4 (f32 steps of several rows run sgemm,
// of one row sgemv: close, not equal).
TEST(Decode, ASequenceGetsTheSameLogitsInABatchOfAnySize) {
  const int64_t R = 17, prompt_len = 3;
  ASSERT_GE(R, infer::DecoderLinears::kFloatRows);
  const Family f = families().front();
  json over = f.over;
  over["hidden_size"] = 64;
  over["vocab_size"] = 97;
  const ModelConfig c = ModelConfig::from_json(tiny(over));
  Model m(c, false);
  m.init(7);
  for (const infer::WeightFormat format : {infer::WeightFormat::kQ8, infer::WeightFormat::kQ4}) {
    SCOPED_TRACE(infer::to_string(format));
    Decoder dec(m, format);
    dec.set_step_threads(1);
    std::vector<SequenceCache> caches;
    std::vector<SequenceCache*> all;
    for (int64_t b = 0; b < R; ++b) caches.push_back(dec.new_cache(prompt_len + 1));
    for (int64_t b = 0; b < R; ++b) {
      dec.prefill(caches[static_cast<size_t>(b)], random_ids(prompt_len, c.vocab_size, 100 + static_cast<uint64_t>(b)));
      all.push_back(&caches[static_cast<size_t>(b)]);
    }
    // The last sequence alone, on a copy of its cache, then all of them together.
    SequenceCache alone_cache = caches.back();
    const std::vector<int32_t> tokens = random_ids(R, c.vocab_size, 5);
    std::vector<float> alone(static_cast<size_t>(c.vocab_size)), batch(static_cast<size_t>(R * c.vocab_size));
    SequenceCache* one[] = {&alone_cache};
    dec.step(one, std::span<const int32_t>(tokens).last(1), alone.data());
    dec.step(all, tokens, batch.data());
    EXPECT_EQ(std::memcmp(alone.data(), batch.data() + (R - 1) * c.vocab_size, alone.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace hymba
