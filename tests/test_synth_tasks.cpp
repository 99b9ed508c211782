// Synthetic task generators: deterministic by seed, right lengths and token
// ranges, scored positions exactly where each task's definition puts them,
// and every scored answer derivable from the input; bad settings are one-line
// errors naming the flag.
#include <gtest/gtest.h>

#include <map>
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
    if (s.kind == TaskKind::kMqar) s.vocab_size = 64;  // keep the test small
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

TEST(SynthTasks, NoisyRecallNeverScoresNoise) {
  TaskSpec s = spec(TaskKind::kNoisyRecall, 32, 64);
  s.frac_noise = 0.5;
  for (bool test : {false, true}) {
    const Dataset d = generate(s, 40, 2, test);
    int64_t noise = 0;
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t t = 0; t < d.seq; ++t) {
        noise += d.input(i)[t] >= 16;
        if (d.target(i)[t] != kIgnore) {
          EXPECT_LT(d.target(i)[t], 16);
        }
      }
    EXPECT_GT(noise, 40 * 64 / 4);  // about half the pair slots are noise
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

TEST(SynthTasks, SelectiveCopyingTargetsAreTheDataTokensInOrder) {
  TaskSpec s = spec(TaskKind::kSelectiveCopying, 16, 20);
  s.num_tokens_to_copy = 5;
  const Dataset d = generate(s, 50, 4, false);
  for (int64_t i = 0; i < d.n; ++i) {
    const int32_t* in = d.input(i);
    const int32_t* tg = d.target(i);
    std::vector<int32_t> data;
    for (int64_t t = 0; t < 14; ++t)
      if (in[t] != 14) data.push_back(in[t]);
    ASSERT_EQ(data.size(), 5u);
    EXPECT_EQ(in[14], 15);  // copy token, then blanks
    for (int64_t t = 15; t < 20; ++t) EXPECT_EQ(in[t], 14);
    for (int64_t t = 0; t < 15; ++t) EXPECT_EQ(tg[t], kIgnore);
    EXPECT_EQ(std::vector<int32_t>(tg + 15, tg + 20), data);
  }
}

TEST(SynthTasks, CompressionMemorizationMqarAndInductionHeads) {
  const Dataset comp = generate(spec(TaskKind::kCompression, 16, 32), 10, 1, true);
  EXPECT_EQ(comp.inputs, comp.targets);
  for (int64_t i = 0; i < comp.n; ++i) {
    EXPECT_EQ(comp.input(i)[31], 15);
    for (int64_t t = 0; t < 31; ++t) EXPECT_LT(comp.input(i)[t], 15);
  }

  // Memorization: one fixed table shared by train and test.
  const TaskSpec mem = spec(TaskKind::kMemorization, 256, 32);
  std::map<int32_t, int32_t> table;
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
      }
  }

  TaskSpec mq = spec(TaskKind::kMqar, 64, 64);
  mq.num_kv_pairs = 8;
  const Dataset q = generate(mq, 30, 2, true);
  for (int64_t i = 0; i < q.n; ++i) {
    const int32_t* in = q.input(i);
    std::map<int32_t, int32_t> kv;
    for (int64_t p = 0; p < 8; ++p) {
      ASSERT_TRUE(in[2 * p] >= 1 && in[2 * p] < 32);
      ASSERT_GE(in[2 * p + 1], 32);
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
  copy.num_tokens_to_copy = 10;  // needs L >= 21
  expect_flag_error(copy, "--num-tokens-to-copy");
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
  mq.vocab_size = 8192;
  mq.num_kv_pairs = 20;
  expect_flag_error(mq, "--seq-len");
  expect_flag_error(spec(TaskKind::kMemorization, 256, 31), "--seq-len");
  expect_flag_error(spec(TaskKind::kInductionHeads, 16, 1), "--seq-len");
  EXPECT_THROW(parse_task("recall"), Error);
  EXPECT_THROW(find_task_preset("nope"), Error);
  EXPECT_THROW(TaskSpec::from_json({{"seq_lenn", 3}}, TaskSpec{}, "suite.json"), Error);
  EXPECT_THROW(generate(spec(TaskKind::kCompression, 16, 32), 0, 1, false), Error);
}

}  // namespace
}  // namespace hymba::synth
