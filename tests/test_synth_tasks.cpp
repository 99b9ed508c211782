// Synthetic task generators: deterministic by seed, right lengths and token
// ranges, scored positions exactly where each task's definition puts them,
// and every scored answer derivable from the input; bad settings are one-line
// errors naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cross_entropy.h"
#include "synth/tasks.h"

namespace hymba::synth {
namespace {

constexpr int32_t kIgnore = cpu::kIgnoreIndex;

TaskSpec spec(TaskKind k, int64_t V, int64_t L) {
  TaskSpec s;
  s.kind = k;
  s.vocab_size = V;
  s.seq_len = L;
  return s;
}

std::vector<TaskSpec> all_tasks() {
  std::vector<TaskSpec> v;
  for (const TaskPreset& p : task_presets()) {
    TaskSpec s = p.spec;
    if (s.kind == TaskKind::kMqar) s.vocab_size = 128;  // keep the test small (Zoology: V > L = 64)
    v.push_back(s);
  }
  return v;
}

TEST(SynthTasks, DeterministicBySeedWithRightLengthsAndTokenRanges) {
  for (const TaskSpec& s : all_tasks()) {
    SCOPED_TRACE(to_string(s.kind));
    for (bool test : {false, true}) {
      const Dataset a = generate(s, 20, 5, test), b = generate(s, 20, 5, test), c = generate(s, 20, 6, test);
      EXPECT_EQ(a.inputs, b.inputs);
      EXPECT_EQ(a.targets, b.targets);
      EXPECT_NE(a.inputs, c.inputs);
      EXPECT_EQ(a.seq, input_length(s));
      ASSERT_EQ(a.inputs.size(), static_cast<size_t>(20 * a.seq));
      for (int32_t t : a.inputs) ASSERT_TRUE(t >= 0 && t < s.vocab_size) << t;
      for (int32_t t : a.targets) ASSERT_TRUE(t == kIgnore || (t >= 0 && t < s.vocab_size)) << t;
      for (int64_t i = 0; i < a.n; ++i) {
        int64_t scored = 0;
        for (int64_t t = 0; t < a.seq; ++t) scored += a.target(i)[t] != kIgnore;
        EXPECT_GE(scored, 1) << "example " << i;
      }
      // Example i does not depend on how many are generated.
      const Dataset few = generate(s, 3, 5, test);
      EXPECT_TRUE(std::equal(few.inputs.begin(), few.inputs.end(), a.inputs.begin()));
    }
  }
}

TEST(SynthTasks, InContextRecallAnswersFollowTheKeysFirstValue) {
  const TaskSpec s = spec(TaskKind::kInContextRecall, 16, 64);
  const Dataset train = generate(s, 50, 1, false), test = generate(s, 50, 1, true);
  EXPECT_EQ(train.inputs, test.inputs);  // the same sequences, scored differently
  EXPECT_EQ(train.scored(), 50 * 63);    // training scores every next token
  for (int64_t i = 0; i < test.n; ++i) {
    const int32_t* in = test.input(i);
    const int32_t* tg = test.target(i);
    std::map<int32_t, int32_t> first_value;
    for (int64_t t = 0; t + 1 < test.seq; t += 2) {
      ASSERT_LT(in[t], 8);  // keys 0..7 at even positions, values 8..15 after them
      ASSERT_GE(in[t + 1], 8);
      EXPECT_EQ(tg[t + 1], kIgnore);
      const bool repeated = first_value.count(in[t]) != 0;
      if (!repeated) first_value[in[t]] = in[t + 1];
      EXPECT_EQ(tg[t] != kIgnore, repeated) << "example " << i << " position " << t;
      if (repeated) {
        EXPECT_EQ(tg[t], first_value[in[t]]);
      }
    }
    // The final probe: the last input is a key seen before; its value is the last target.
    const int32_t probe = in[test.seq - 1];
    ASSERT_TRUE(first_value.count(probe));
    EXPECT_EQ(tg[test.seq - 1], first_value[probe]);
  }
}

// MAD's single-query variant: a copy prefix (V-1) before the final probe;
// keys 0..6 and values 7..14 at V = 16; only the probe's value is scored at
// test; the L + 1 tokens shift to L positions.
TEST(SynthTasks, SingleQueryRecallScoresOnlyTheProbeAfterTheCopyPrefix) {
  TaskSpec s = spec(TaskKind::kInContextRecall, 16, 64);
  s.multi_query = false;
  EXPECT_EQ(input_length(s), 64);
  const Dataset train = generate(s, 50, 1, false), test = generate(s, 50, 1, true);
  EXPECT_EQ(train.inputs, test.inputs);
  EXPECT_EQ(train.scored(), 50 * 64);  // training: every next token, the copy prefix included
  EXPECT_EQ(test.scored(), 50);
  for (int64_t i = 0; i < test.n; ++i) {
    const int32_t* in = test.input(i);
    std::map<int32_t, int32_t> value_of;
    for (int64_t t = 0; t + 2 < 64; t += 2) {
      ASSERT_LT(in[t], 7);
      ASSERT_TRUE(in[t + 1] >= 7 && in[t + 1] < 15);
      value_of.emplace(in[t], in[t + 1]);
      EXPECT_EQ(test.target(i)[t], kIgnore);
      EXPECT_EQ(test.target(i)[t + 1], kIgnore);
    }
    EXPECT_EQ(in[62], 15);  // copy prefix, then the probe key
    ASSERT_TRUE(value_of.count(in[63]));
    EXPECT_EQ(test.target(i)[63], value_of[in[63]]);
    EXPECT_EQ(train.target(i)[61], 15);  // training predicts the copy prefix too
  }
  s.vocab_size = 2;  // one token left beside the copy prefix: no room for a key and a value
  EXPECT_THROW(s.validate(), Error);
}

// Test: noise is never scored. Training (MAD): the targets are the shifted
// inputs, noise included.
TEST(SynthTasks, NoisyRecallScoresNoiseOnlyInTraining) {
  TaskSpec s = spec(TaskKind::kNoisyRecall, 32, 64);
  s.frac_noise = 0.5;
  for (bool test : {false, true}) {
    const Dataset d = generate(s, 40, 2, test);
    int64_t noise = 0, noise_targets = 0;
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t t = 0; t < d.seq; ++t) {
        noise += d.input(i)[t] >= 16;
        noise_targets += d.target(i)[t] >= 16;
        if (!test) {
          if (t + 1 < d.seq) {
            EXPECT_EQ(d.target(i)[t], d.input(i)[t + 1]);
          }
        }
      }
    EXPECT_GT(noise, 40 * 64 / 4);  // about half the pair slots are noise
    if (test) {
      EXPECT_EQ(noise_targets, 0);
    } else {
      EXPECT_EQ(d.scored(), 40 * 63);
      EXPECT_GT(noise_targets, 0);
    }
  }
}

// Splits a fuzzy-recall sequence into (key tuple, value tuple, value start) segments.
struct Segment {
  std::vector<int32_t> key, value;
  int64_t value_at;
};
std::vector<Segment> fuzzy_segments(const std::vector<int32_t>& seq, int32_t pad, int32_t first_value) {
  std::vector<Segment> runs;
  for (size_t t = 0; t < seq.size(); ++t) {
    if (seq[t] == pad) continue;
    const bool is_value = seq[t] >= first_value;
    if (!is_value && (runs.empty() || !runs.back().value.empty())) runs.push_back({});
    if (is_value && runs.back().value.empty()) runs.back().value_at = static_cast<int64_t>(t);
    (is_value ? runs.back().value : runs.back().key).push_back(seq[t]);
  }
  return runs;
}

TEST(SynthTasks, FuzzyRecallScoresTheValuesOfRepeatedKeyTuples) {
  const TaskSpec s = spec(TaskKind::kFuzzyRecall, 16, 64);
  const Dataset d = generate(s, 40, 3, true);
  for (int64_t i = 0; i < d.n; ++i) {
    std::vector<int32_t> seq(d.input(i), d.input(i) + d.seq);
    seq.push_back(d.target(i)[d.seq - 1]);  // the last token is only a target
    const std::vector<Segment> runs = fuzzy_segments(seq, 15, 7);
    ASSERT_GE(runs.size(), 2u);
    EXPECT_EQ(runs.back().key.size(), 3u);  // test keys have the full length
    std::map<std::vector<int32_t>, std::vector<int32_t>> value_of;
    std::vector<bool> scored(seq.size(), false);
    for (const Segment& r : runs) {
      ASSERT_FALSE(r.key.empty());
      ASSERT_FALSE(r.value.empty());
      if (value_of.count(r.key)) {
        EXPECT_EQ(value_of[r.key], r.value);
        for (size_t k = 0; k < r.value.size(); ++k) scored[static_cast<size_t>(r.value_at) + k] = true;
      } else {
        value_of[r.key] = r.value;
      }
    }
    EXPECT_TRUE(scored.back());  // the probe repeated at the end
    for (int64_t t = 0; t < d.seq; ++t)
      EXPECT_EQ(d.target(i)[t] != kIgnore, scored[static_cast<size_t>(t + 1)]) << "example " << i << " at " << t;
  }
}

TEST(SynthTasks, FuzzyRecallTrainingScoresEveryNextTokenPaddingIncluded) {
  const TaskSpec s = spec(TaskKind::kFuzzyRecall, 16, 64);
  const Dataset d = generate(s, 30, 3, false);
  EXPECT_EQ(d.scored(), 30 * 64);
  int64_t pad_targets = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    for (int64_t t = 0; t + 1 < d.seq; ++t) EXPECT_EQ(d.target(i)[t], d.input(i)[t + 1]);
    pad_targets += d.target(i)[0] == 15;
  }
  EXPECT_GT(pad_targets, 0);  // MAD's targets include the left padding
  // Single query: pad 14, copy prefix 15 before the final probe; only the probe's value scored.
  TaskSpec single = s;
  single.multi_query = false;
  const Dataset q = generate(single, 30, 3, true);
  for (int64_t i = 0; i < q.n; ++i) {
    std::vector<int32_t> seq(q.input(i), q.input(i) + q.seq);
    seq.push_back(q.target(i)[q.seq - 1]);
    int64_t copy_at = -1, scored = 0;
    for (size_t t = 0; t < seq.size(); ++t) {
      ASSERT_LE(seq[t], 15);
      if (seq[t] == 15) copy_at = static_cast<int64_t>(t);
    }
    ASSERT_GE(copy_at, 0);
    for (int64_t t = 0; t < q.seq; ++t)
      if (q.target(i)[t] != kIgnore) {
        ++scored;
        EXPECT_GE(t, copy_at + 3) << "only the final probe's value (after its 3-token key)";
      }
    EXPECT_GE(scored, 1);
    EXPECT_EQ(copy_at, 61 - scored) << "the sequence ends: copy prefix, 3 key tokens, the scored value";
  }
}

// MAD's rule: the n data tokens first, each blank np.insert-ed before a data
// token drawn from 0..n-1, so the last data token sits right before the copy
// token; then the copy token and n blanks; targets the data tokens in order.
TEST(SynthTasks, SelectiveCopyingPlacesBlanksAsMad) {
  TaskSpec s = spec(TaskKind::kSelectiveCopying, 16, 20);
  s.num_tokens_to_copy = 5;
  const int64_t n = 5, prefix = 14, blanks = 20 - 2 * n - 1;
  const Dataset d = generate(s, 2000, 4, false);
  std::vector<double> gap_sum(n, 0.0);
  int64_t leading_blank = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const int32_t* in = d.input(i);
    const int32_t* tg = d.target(i);
    std::vector<int32_t> data;
    int64_t gap = 0;
    for (int64_t t = 0; t < prefix; ++t) {
      if (in[t] == 14) {
        ++gap;
        continue;
      }
      ASSERT_LT(in[t], 14);
      gap_sum[data.size()] += static_cast<double>(gap);
      gap = 0;
      data.push_back(in[t]);
    }
    ASSERT_EQ(data.size(), 5u);
    EXPECT_EQ(gap, 0) << "a blank after the last data token, example " << i;
    EXPECT_NE(in[prefix - 1], 14);
    leading_blank += in[0] == 14;
    EXPECT_EQ(in[prefix], 15);  // copy token, then blanks
    for (int64_t t = 15; t < 20; ++t) EXPECT_EQ(in[t], 14);
    for (int64_t t = 0; t < 15; ++t) EXPECT_EQ(tg[t], kIgnore);
    EXPECT_EQ(std::vector<int32_t>(tg + 15, tg + 20), data);
  }
  // Blanks before each data token: Binomial(L-2n-1, 1/n), mean 9/5 = 1.8 for every token.
  for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(gap_sum[static_cast<size_t>(j)] / 2000.0, 1.8, 0.12) << "token " << j;
  // The first token is preceded by a blank unless no index drew it: 1 - (4/5)^9 = 0.866.
  EXPECT_NEAR(static_cast<double>(leading_blank) / 2000.0, 1.0 - std::pow(0.8, 9), 0.03);
  (void)blanks;
}

TEST(SynthTasks, CompressionMemorizationMqarAndInductionHeads) {
  const Dataset comp = generate(spec(TaskKind::kCompression, 16, 32), 10, 1, true);
  EXPECT_EQ(comp.inputs, comp.targets);
  for (int64_t i = 0; i < comp.n; ++i) {
    EXPECT_EQ(comp.input(i)[31], 15);
    for (int64_t t = 0; t < 31; ++t) EXPECT_LT(comp.input(i)[t], 15);
  }

  // Memorization: one fixed one-to-one table shared by train and test (MAD).
  const TaskSpec mem = spec(TaskKind::kMemorization, 256, 32);
  std::map<int32_t, int32_t> table;
  std::map<int32_t, int32_t> key_of;
  for (bool test : {false, true}) {
    const Dataset d = generate(mem, 30, test ? 9 : 8, test);
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t t = 0; t < 32; t += 2) {
        const int32_t key = d.input(i)[t];
        ASSERT_LT(key, 127);
        EXPECT_EQ(d.input(i)[t + 1], 255);
        EXPECT_EQ(d.target(i)[t], kIgnore);
        const int32_t v = d.target(i)[t + 1];
        ASSERT_TRUE(v >= 127 && v <= 254);
        if (table.count(key)) {
          EXPECT_EQ(table[key], v);
        }
        table[key] = v;
        if (key_of.count(v)) {
          EXPECT_EQ(key_of[v], key) << "two keys share value " << v;
        }
        key_of[v] = key;
      }
  }
  // All 127 keys: 127 distinct values (many examples see every key).
  const Dataset all = generate(mem, 400, 10, false);
  std::map<int32_t, int32_t> full;
  for (int64_t i = 0; i < all.n; ++i)
    for (int64_t t = 0; t < 32; t += 2) full[all.input(i)[t]] = all.target(i)[t + 1];
  ASSERT_EQ(full.size(), 127u);
  std::set<int32_t> values;
  for (const auto& [k, v] : full) values.insert(v);
  EXPECT_EQ(values.size(), 127u);

  TaskSpec mq = spec(TaskKind::kMqar, 128, 64);
  mq.num_kv_pairs = 8;
  mq.random_non_queries = false;  // Zoology's random_non_queries=False: non-query slots 0
  const Dataset q = generate(mq, 30, 2, true);
  for (int64_t i = 0; i < q.n; ++i) {
    const int32_t* in = q.input(i);
    std::map<int32_t, int32_t> kv;
    for (int64_t p = 0; p < 8; ++p) {
      ASSERT_TRUE(in[2 * p] >= 1 && in[2 * p] < 64);
      ASSERT_GE(in[2 * p + 1], 64);
      EXPECT_TRUE(kv.emplace(in[2 * p], in[2 * p + 1]).second) << "keys are distinct";
    }
    int64_t queries = 0;
    for (int64_t t = 16; t < 64; ++t) {
      if (q.target(i)[t] == kIgnore) {
        EXPECT_EQ(in[t], 0);
        continue;
      }
      EXPECT_EQ((t - 16) % 2, 0);
      ASSERT_TRUE(kv.count(in[t]));
      EXPECT_EQ(q.target(i)[t], kv[in[t]]);
      ++queries;
    }
    EXPECT_EQ(queries, 8);
  }

  const Dataset ih = generate(spec(TaskKind::kInductionHeads, 16, 40), 30, 3, true);
  for (int64_t i = 0; i < ih.n; ++i) {
    const int32_t* in = ih.input(i);
    EXPECT_EQ(in[39], 15);
    int64_t at = -1, specials = 0;
    for (int64_t t = 0; t < 39; ++t)
      if (in[t] == 15) at = t, ++specials;
    ASSERT_EQ(specials, 1);
    for (int64_t t = 0; t < 39; ++t) EXPECT_EQ(ih.target(i)[t], kIgnore);
    EXPECT_EQ(ih.target(i)[39], in[at + 1]);
  }
}

// Zoology's random_non_queries=True (the default): every non-query slot of
// the query region holds a token of the whole vocabulary, so the example's
// keys also turn up there unscored (distractors); num_passes repeats the context.
TEST(SynthTasks, MqarRandomNonQueriesHoldDistractorKeysAndPassesRepeatTheContext) {
  TaskSpec mq = spec(TaskKind::kMqar, 40, 32);
  mq.num_kv_pairs = 4;
  mq.num_passes = 2;
  ASSERT_TRUE(mq.random_non_queries);
  const Dataset d = generate(mq, 300, 7, true);
  int64_t distractors = 0, zeros = 0, high = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const int32_t* in = d.input(i);
    std::map<int32_t, int32_t> kv;
    for (int64_t p = 0; p < 4; ++p) {
      kv.emplace(in[2 * p], in[2 * p + 1]);
      EXPECT_EQ(in[8 + 2 * p], in[2 * p]) << "second pass";
      EXPECT_EQ(in[8 + 2 * p + 1], in[2 * p + 1]);
    }
    int64_t queries = 0;
    for (int64_t t = 16; t < 32; ++t) {
      if (d.target(i)[t] != kIgnore) {
        EXPECT_EQ((t - 16) % 2, 0);
        EXPECT_EQ(d.target(i)[t], kv.at(in[t]));
        ++queries;
        continue;
      }
      distractors += kv.count(in[t]);
      zeros += in[t] == 0;
      high += in[t] >= 20;  // values too: the whole vocabulary
    }
    EXPECT_EQ(queries, 4);
    for (int64_t t = 0; t < 16; ++t) EXPECT_EQ(d.target(i)[t], kIgnore);
  }
  // 12 random slots per example, each a given key with probability 4/40.
  EXPECT_NEAR(static_cast<double>(distractors) / (300.0 * 12), 0.1, 0.025);
  EXPECT_LT(zeros, 300 * 12 / 10);
  EXPECT_GT(high, 300 * 12 / 3);
  mq.num_passes = 3;  // 2 x 4 x (3 + 1) = 32 fits; 4 passes would not
  EXPECT_NO_THROW(mq.validate());
  mq.num_passes = 4;
  EXPECT_THROW(mq.validate(), Error);
}

void expect_flag_error(const TaskSpec& s, const char* flag) {
  try {
    s.validate();
    FAIL() << "expected an error naming " << flag;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(flag, 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(SynthTasks, ImpossibleSettingsNameTheFlag) {
  TaskSpec copy = spec(TaskKind::kSelectiveCopying, 16, 20);
  copy.num_tokens_to_copy = 10;  // needs L > 21
  expect_flag_error(copy, "--num-tokens-to-copy");
  copy.seq_len = 21;  // MAD: L > 2n+1, so 21 = 2 x 10 + 1 is refused too
  expect_flag_error(copy, "--num-tokens-to-copy");
  copy.seq_len = 22;
  EXPECT_NO_THROW(copy.validate());
  copy.seq_len = 20;
  copy.num_tokens_to_copy = 0;
  expect_flag_error(copy, "--num-tokens-to-copy");
  copy.num_tokens_to_copy = 5;
  copy.vocab_size = 2;  // no room for data tokens beside blank and copy
  expect_flag_error(copy, "--vocab-size");
  expect_flag_error(spec(TaskKind::kInContextRecall, 16, 63), "--seq-len");
  expect_flag_error(spec(TaskKind::kNoisyRecall, 16, 64), "--vocab-size");  // all 16 tokens are noise
  expect_flag_error(spec(TaskKind::kFuzzyRecall, 6, 64), "--vocab-size");
  expect_flag_error(spec(TaskKind::kFuzzyRecall, 16, 10), "--seq-len");
  TaskSpec mq = spec(TaskKind::kMqar, 8, 64);
  expect_flag_error(mq, "--vocab-size");
  mq.vocab_size = 64;  // Zoology: V > L
  expect_flag_error(mq, "--vocab-size");
  mq.vocab_size = 8192;
  mq.num_kv_pairs = 20;
  expect_flag_error(mq, "--seq-len");
  mq.num_kv_pairs = 4;
  mq.num_passes = 0;
  expect_flag_error(mq, "--num-passes");
  expect_flag_error(spec(TaskKind::kMemorization, 256, 31), "--seq-len");
  expect_flag_error(spec(TaskKind::kInductionHeads, 16, 1), "--seq-len");
  EXPECT_THROW(parse_task("recall"), Error);
  EXPECT_THROW(find_task_preset("nope"), Error);
  EXPECT_THROW(TaskSpec::from_json({{"seq_lenn", 3}}, TaskSpec{}, "suite.json"), Error);
  EXPECT_THROW(generate(spec(TaskKind::kCompression, 16, 32), 0, 1, false), Error);
}

}  // namespace
}  // namespace hymba::synth
