// `hymba synth`: tiny models learn the tasks they are known to solve, the
// compression decoder's and the hidden-state backward's gradients match
// float64 finite differences, suites write their files (and skip measured
// rows on a rerun), and bad input gives one-line errors naming the flag.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"
#include "synth/compression_head.h"
#include "synth/metrics.h"
#include "synth/runner.h"
#include "synth/trainer.h"

namespace hymba::synth {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TaskSpec task(TaskKind k, int64_t V, int64_t L) {
  TaskSpec s;
  s.kind = k;
  s.vocab_size = V;
  s.seq_len = L;
  return s;
}

TrainSettings quick(int64_t epochs, double lr, int64_t num_train) {
  TrainSettings t;
  t.epochs = epochs;
  t.batch_size = 16;
  t.lr = lr;
  t.num_train = num_train;
  t.num_test = 200;
  t.stop_at_acc = 0.9;
  t.seed = 1;
  return t;
}

// Attention solves in-context recall with an induction circuit (MAD, Zoology).
TEST(SynthLearning, TinyAttentionModelLearnsInContextRecall) {
  ArchSpec a;
  a.kind = ArchKind::kTransformer;
  a.hidden_size = 32;
  a.num_heads = 4;
  a.num_layers = 2;
  const RunResult r = train_on_task(task(TaskKind::kInContextRecall, 8, 16), a, quick(40, 1e-3, 2000));
  EXPECT_GE(r.last().eval_acc, 0.9) << "after " << r.epochs.size() << " epochs";
  EXPECT_LT(r.last().eval_loss, r.epochs.front().eval_loss);
}

// Mamba's input-dependent selection solves selective copying (Mamba paper).
TEST(SynthLearning, TinyMambaLearnsSelectiveCopying) {
  TaskSpec t = task(TaskKind::kSelectiveCopying, 8, 12);
  t.num_tokens_to_copy = 3;
  ArchSpec a;
  a.kind = ArchKind::kMamba;
  a.hidden_size = 32;
  a.num_layers = 2;
  const RunResult r = train_on_task(t, a, quick(30, 3e-3, 2000));
  EXPECT_GE(r.last().eval_acc, 0.9) << "after " << r.epochs.size() << " epochs";
}

TEST(SynthLearning, RunsAreReproducibleAndEveryArchitectureTrains) {
  TaskSpec t = task(TaskKind::kSelectiveCopying, 8, 12);
  t.num_tokens_to_copy = 3;
  TrainSettings s = quick(2, 3e-3, 64);
  s.stop_at_acc = 0;
  for (ArchKind k : {ArchKind::kTransformer, ArchKind::kMamba, ArchKind::kHymba, ArchKind::kHybrid}) {
    ArchSpec a;
    a.kind = k;
    a.hidden_size = 16;
    a.link = BlockLink::kGated;
    const RunResult one = train_on_task(t, a, s), two = train_on_task(t, a, s);
    ASSERT_EQ(one.epochs.size(), 2u) << to_string(k);
    EXPECT_EQ(one.last().train_loss, two.last().train_loss) << to_string(k);
    EXPECT_EQ(one.last().eval_acc, two.last().eval_acc) << to_string(k);
    EXPECT_TRUE(std::isfinite(one.last().eval_loss));
  }
  // Compression trains through its decoder head, other lengths test generalisation.
  ArchSpec m;
  m.kind = ArchKind::kMamba;
  m.hidden_size = 16;
  const RunResult c = train_on_task(task(TaskKind::kCompression, 8, 10), m, s);
  EXPECT_LT(c.last().eval_loss, std::log(8.0) + 0.5);
  TrainSettings longer = s;
  longer.test_seq_len = 24;
  EXPECT_EQ(train_on_task(task(TaskKind::kInductionHeads, 8, 12), m, longer).epochs.size(), 2u);
  longer.decoder_width = 8;
  EXPECT_THROW(train_on_task(task(TaskKind::kCompression, 8, 10), m, longer), Error);
}

// torchmetrics' macro accuracy by hand: class 0 has 3 targets, 1 right (1/3);
// class 1: 1 of 1; class 2: 0 of 1; class 3 is only predicted (counts 0);
// ignored positions count nowhere. Macro (1/3 + 1 + 0 + 0) / 4 = 1/3, token 2/5.
TEST(SynthMetrics, MacroAccuracyOnAHandComputedCase) {
  ClassCounts c(5);
  const std::vector<std::pair<int32_t, int32_t>> rows = {{0, 0}, {0, 1}, {0, 3}, {1, 1}, {2, 1}, {-100, 4}};
  for (const auto& [t, p] : rows) c.add(t, p);
  EXPECT_EQ(c.scored(), 5);
  EXPECT_DOUBLE_EQ(c.macro(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(ClassCounts(3).macro(), 0.0);
  EXPECT_THROW(c.add(5, 0), Error);

  // MAD's epoch figure: test batches of 2 examples, each batch's macro
  // accuracy weighted by its examples. Batch 0 (examples 0, 1): class 0 1/2,
  // class 1 1/1, class 2 0/1 -> 1/2; batch 1 (example 2): class 0 1/1 -> 1.
  // (1/2 x 2 + 1 x 1) / 3 = 2/3.
  MadAccuracy mad(4, 2);
  const int32_t t0[] = {0, 0}, p0[] = {0, 1}, t1[] = {1, 2}, p1[] = {1, 1}, t2[] = {0, -100}, p2[] = {0, 3};
  mad.add_example(0, t0, p0, 2);
  mad.add_example(1, t1, p1, 2);
  mad.add_example(2, t2, p2, 2);
  EXPECT_DOUBLE_EQ(mad.value(), 2.0 / 3.0);

  int32_t arg[2];
  const float logits[] = {0.1f, 0.7f, 0.7f, 2.0f, -1.0f, 0.0f};
  argmax_rows(arg, logits, 2, 3);
  EXPECT_EQ(arg[0], 1);  // the first of equal maxima, as torch.argmax
  EXPECT_EQ(arg[1], 0);
}

// The mad-* presets train as MAD's train.py: batch 128, 200 epochs, cosine
// per epoch to 1e-6, weight decay 0, no clipping, stop at macro acc 0.999.
TEST(SynthPresets, MadPresetsCarryMadsTrainingRecipe) {
  for (const TaskPreset& p : task_presets()) {
    if (p.name.rfind("mad-", 0) != 0) continue;
    const TrainSettings t = TrainSettings::from_json(p.train, TrainSettings{}, p.name);
    EXPECT_EQ(t.batch_size, 128) << p.name;
    EXPECT_EQ(t.epochs, 200) << p.name;
    EXPECT_EQ(t.schedule, "cosine") << p.name;
    EXPECT_EQ(t.weight_decay, 0.0) << p.name;
    EXPECT_LE(t.grad_clip, 0.0) << p.name;
    EXPECT_EQ(t.stop_at_acc, 0.999) << p.name;
    EXPECT_EQ(t.stop_metric, "macro") << p.name;
    EXPECT_EQ(t.num_test, 1280) << p.name;
  }
  const TrainSettings mq = TrainSettings::from_json(find_task_preset("mqar").train, TrainSettings{}, "mqar");
  EXPECT_GT(mq.test_num_kv_pairs, find_task_preset("mqar").spec.num_kv_pairs);
}

// MAD's CosineAnnealingLR(T_max = epochs) steps once per epoch: epoch e runs
// at 1e-6 + (lr - 1e-6)(1 + cos(pi (e-1) / epochs)) / 2. MQAR tests more pairs.
TEST(SynthLearning, PerEpochCosineAndMoreTestPairs) {
  TaskSpec t = task(TaskKind::kSelectiveCopying, 8, 12);
  t.num_tokens_to_copy = 3;
  TrainSettings s = quick(3, 1e-3, 32);
  s.stop_at_acc = 0;
  s.schedule = "cosine";
  ArchSpec m;
  m.kind = ArchKind::kMamba;
  m.hidden_size = 8;
  m.num_layers = 1;
  const RunResult r = train_on_task(t, m, s);
  ASSERT_EQ(r.epochs.size(), 3u);
  const double pi = 3.14159265358979323846;
  for (int64_t e = 0; e < 3; ++e)
    EXPECT_NEAR(r.epochs[static_cast<size_t>(e)].lr, 1e-6 + (1e-3 - 1e-6) * 0.5 * (1 + std::cos(pi * e / 3.0)), 1e-12);
  for (const EpochStats& e : r.epochs) EXPECT_TRUE(e.eval_macro_acc >= 0 && e.eval_macro_acc <= 1);
  s.warmup = 5;
  EXPECT_THROW(train_on_task(t, m, s), Error);  // MAD's per-epoch cosine has no warmup

  TaskSpec mq = task(TaskKind::kMqar, 64, 32);
  mq.num_kv_pairs = 2;
  TrainSettings q = quick(1, 1e-3, 16);
  q.test_num_kv_pairs = 8;  // 2 x 8 x 2 = 32 fits L 32
  q.stop_at_acc = 0;
  EXPECT_EQ(train_on_task(mq, m, q).epochs.size(), 1u);
  q.test_num_kv_pairs = 9;
  EXPECT_THROW(train_on_task(mq, m, q), Error);
}

// MAD's decoder in float64 scalar code: z = h + pe, two (RMSNorm, Linear,
// GELU) blocks, RMSNorm, Linear; mean cross-entropy over scored rows.
double head_loss_f64(const std::vector<double>& P, const ParamTable& t, const std::vector<float>& pe,
                     const std::vector<double>& h, const std::vector<int32_t>& targets, int64_t B, int64_t L,
                     int64_t d, int64_t W, int64_t V) {
  auto at = [&](const char* name) { return static_cast<size_t>(t.info(name).offset); };
  auto rmsnorm = [&](std::vector<double> x, size_t g) {
    double ms = 0;
    for (double v : x) ms += v * v;
    const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + 1e-5);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= rstd * P[g + i];
    return x;
  };
  auto linear = [&](const std::vector<double>& x, size_t w, size_t b, int64_t out) {
    std::vector<double> y(static_cast<size_t>(out));
    for (size_t o = 0; o < y.size(); ++o) {
      double s = P[b + o];
      for (size_t c = 0; c < x.size(); ++c) s += P[w + o * x.size() + c] * x[c];
      y[o] = s;
    }
    return y;
  };
  auto gelu = [](std::vector<double> x) {
    for (double& v : x) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    return x;
  };
  double total = 0;
  int64_t scored = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < L; ++p) {
      const int32_t y = targets[static_cast<size_t>(b * L + p)];
      if (y < 0) continue;
      std::vector<double> z(static_cast<size_t>(d));
      for (int64_t c = 0; c < d; ++c)
        z[static_cast<size_t>(c)] = h[static_cast<size_t>(b * d + c)] + pe[static_cast<size_t>(p * d + c)];
      auto x = gelu(linear(rmsnorm(z, at("compression.norm1.weight")), at("compression.fc1.weight"),
                           at("compression.fc1.bias"), W));
      x = gelu(linear(rmsnorm(x, at("compression.norm2.weight")), at("compression.fc2.weight"),
                      at("compression.fc2.bias"), W));
      const auto logit = linear(rmsnorm(x, at("compression.norm3.weight")), at("compression.unembed.weight"),
                                at("compression.unembed.bias"), V);
      double mx = -1e300;
      for (double l : logit) mx = std::max(mx, l);
      double sum = 0;
      for (double l : logit) sum += std::exp(l - mx);
      total += mx + std::log(sum) - logit[static_cast<size_t>(y)];
      ++scored;
    }
  return total / static_cast<double>(scored);
}

// MAD's posemb_sincos_1d at d = 4: frequencies 1 and 10000^-1.
TEST(SynthCompressionHead, SinCosPositionsAreMads) {
  const std::vector<float> pe = sincos_positions(3, 4);
  for (int p = 0; p < 3; ++p) {
    EXPECT_FLOAT_EQ(pe[static_cast<size_t>(p * 4 + 0)], static_cast<float>(std::sin(p)));
    EXPECT_FLOAT_EQ(pe[static_cast<size_t>(p * 4 + 1)], static_cast<float>(std::sin(p * 1e-4)));
    EXPECT_FLOAT_EQ(pe[static_cast<size_t>(p * 4 + 2)], static_cast<float>(std::cos(p)));
    EXPECT_FLOAT_EQ(pe[static_cast<size_t>(p * 4 + 3)], static_cast<float>(std::cos(p * 1e-4)));
  }
  const std::vector<float> odd = sincos_positions(2, 5);  // odd width: a zero column at the end
  EXPECT_EQ(odd[4], 0.0f);
  EXPECT_EQ(odd[9], 0.0f);
  EXPECT_FLOAT_EQ(odd[5 + 0], static_cast<float>(std::sin(1.0)));
}

TEST(SynthCompressionHead, BackwardMatchesFloat64FiniteDifferences) {
  const int64_t B = 2, L = 5, d = 6, W = 7, V = 9;
  CompressionHead head(L, d, W, V, true);
  EXPECT_EQ(head.params().num_params(), d + W * d + W + W + W * W + W + W + V * W + V);
  Rng rng(3);
  head.params().for_each([&](ParamSlot& s) {
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] = 0.5f * rng.normal();
  });
  std::vector<float> h(static_cast<size_t>(B * d));
  for (float& x : h) x = rng.normal();
  std::vector<int32_t> targets(static_cast<size_t>(B * L));
  for (int32_t& y : targets) y = static_cast<int32_t>(rng.below(V));
  targets[3] = -100;  // ignored positions contribute nothing
  head.params().zero_grad();
  head.forward(h.data(), targets.data(), B);
  std::vector<float> dh(h.size());
  head.backward(dh.data());

  const ParamTable& t = head.params();
  std::vector<double> P(t.values_block(), t.values_block() + t.total_floats());
  std::vector<double> hd(h.begin(), h.end());
  auto loss = [&] { return head_loss_f64(P, t, head.positions(), hd, targets, B, L, d, W, V); };
  const double eps = 1e-5;
  auto check = [&](double& x, double analytic, const std::string& what) {
    const double saved = x;
    x = saved + eps;
    const double up = loss();
    x = saved - eps;
    const double down = loss();
    x = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << what;
  };
  for (const ParamInfo& info : t.rows())
    for (int64_t i = 0; i < info.shape.numel(); i += 2)
      check(P[static_cast<size_t>(info.offset + i)], t.grads_block()[info.offset + i], info.name);
  for (size_t i = 0; i < hd.size(); ++i) check(hd[i], dh[i], "h");
  // The float forward agrees with the float64 one.
  const LossStats st = head.forward(h.data(), targets.data(), B);
  EXPECT_NEAR(st.loss_sum / static_cast<double>(st.scored), loss(), 1e-4);
}

// Model::backward_from_token_hidden against float64 differences of sum(hidden * w).
TEST(SynthCompressionHead, ModelBackwardFromHiddenMatchesFiniteDifferences) {
  const ModelConfig cfg = ModelConfig::from_json(
      {{"vocab_size", 7}, {"hidden_size", 8}, {"num_hidden_layers", 2}, {"layer_types", {"attention", "mamba"}},
       {"num_attention_heads", 2}, {"num_key_value_heads", 2}, {"mamba_d_state", 4}, {"intermediate_size", 8},
       {"block_layers", 2}, {"block_link", "gated"}, {"initializer_range", 0.3}});
  Model model(cfg, true);
  model.init(5);
  const int64_t B = 2, T = 4, d = 8;
  std::vector<int32_t> ids = {1, 3, 5, 2, 6, 0, 4, 4};
  Rng rng(8);
  std::vector<float> w(static_cast<size_t>(B * T * d));
  for (float& x : w) x = rng.normal();
  model.params().zero_grad();
  model.forward(ids.data(), nullptr, B, T);
  model.backward_from_token_hidden(w.data());

  const ParamTable& t = model.params();
  std::vector<double> P(t.values_block(), t.values_block() + t.total_floats());
  BasicArena<double> arena;
  Activations<double> acts;
  auto loss = [&] {
    arena.reset();
    model_forward(model.plan(), P.data(), ids.data(), static_cast<const int32_t*>(nullptr), B, T, ForwardOptions{},
                  arena, acts);
    double s = 0;
    for (size_t i = 0; i < w.size(); ++i) s += acts.hf_tok[i] * w[i];
    return s;
  };
  Rng pick(2);
  for (const ParamInfo& info : t.rows()) {
    double max_err = 0, max_num = 1e-4;
    for (int k = 0; k < 6; ++k) {
      const int64_t i = info.offset + static_cast<int64_t>(pick.below(static_cast<uint64_t>(info.shape.numel())));
      double& x = P[static_cast<size_t>(i)];
      const double saved = x;
      x = saved + 1e-5;
      const double up = loss();
      x = saved - 1e-5;
      const double down = loss();
      x = saved;
      const double numeric = (up - down) / 2e-5;
      max_num = std::max(max_num, std::abs(numeric));
      max_err = std::max(max_err, std::abs(numeric - t.grads_block()[i]));
    }
    EXPECT_LE(max_err / max_num, 3e-3) << info.name;
  }
}

class SynthSuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_synth_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write_suite(const json& j) {
    const std::string path = (dir_ / "suite.json").string();
    write_text_atomic(path, j.dump());
    return path;
  }
  fs::path dir_;
};

json tiny_suite() {
  return {{"title", "Tiny copy"},
          {"preset", "seed004-selective-copying"},
          {"task", {{"seq_len", 12}, {"num_tokens_to_copy", 3}, {"vocab_size", 8}}},
          {"train", {{"epochs", 2}, {"num_train", 64}, {"num_test", 16}, {"batch_size", 16}, {"lr", 3e-3}}},
          {"model", {{"hidden_size", 16}, {"num_heads", 2}}},
          {"reference_source", "a test"},
          {"rows",
           {{{"id", "mamba"}, {"model", {{"model", "mamba"}}}, {"reference", {{"epoch", 2}, {"eval_acc", 0.5}}}},
            {{"id", "hybrid-gated"}, {"model", {{"model", "hybrid"}, {"link", "gated"}, {"trans_layers", 1}, {"mamba_layers", 1}}},
             {"task", {{"seq_len", 14}}}}}}};
}

TEST_F(SynthSuiteTest, WritesResultsReportAndPlotsAndSkipsMeasuredRows) {
  const SynthSuite suite = load_synth_suite(write_suite(tiny_suite()));
  ASSERT_EQ(suite.rows.size(), 2u);
  EXPECT_EQ(suite.rows[1].name, "Hybrid blocks 1, Gated-res tLrs 1 mLrs 1");
  EXPECT_EQ(row_task(suite, suite.rows[1]).seq_len, 14);
  SuiteRunOptions opt;
  opt.out_dir = (dir_ / "out").string();
  opt.quiet = true;
  const SuiteRunSummary s = run_synth_suite(suite, opt);
  EXPECT_EQ(s.trained, 2);
  const json results = read_json_file((dir_ / "out" / "results.json").string());
  ASSERT_EQ(results["rows"].size(), 2u);
  EXPECT_EQ(results["rows"][0]["epochs"].size(), 2u);
  EXPECT_EQ(results["rows"][1]["task"]["seq_len"], 14);
  EXPECT_EQ(results["rows"][0]["reference"]["eval_acc"], 0.5);
  for (const json& e : results["rows"][0]["epochs"])
    for (const char* k : {"train_loss", "eval_loss", "eval_acc"}) EXPECT_TRUE(e[k].is_number()) << k;
  const std::string csv = read_file((dir_ / "out" / "results.csv").string());
  EXPECT_EQ(test::count_lines(csv), 3) << csv;
  const std::string md = read_file(s.report_md);
  EXPECT_NE(md.find("Hybrid blocks 1, Gated-res tLrs 1 mLrs 1"), std::string::npos);
  EXPECT_NE(md.find("Ref. eval acc"), std::string::npos);
  EXPECT_NE(read_file(s.report_html).find("<table>"), std::string::npos);
  if (s.plots_written) {
    EXPECT_GT(fs::file_size(dir_ / "out" / "plots" / "accuracy.png"), 0u);
    EXPECT_GT(fs::file_size(dir_ / "out" / "plots" / "accuracy.svg"), 0u);
  } else {
    EXPECT_NE(md.find("plots skipped"), std::string::npos);
  }
  // A rerun keeps both rows; a changed recipe measures again (no plots: faster).
  opt.gnuplot.clear();
  const SuiteRunSummary again = run_synth_suite(suite, opt);
  EXPECT_EQ(again.skipped, 2);
  EXPECT_EQ(again.rows[0].result.last().eval_acc, s.rows[0].result.last().eval_acc);
  SynthSuite changed = suite;
  changed.train.epochs = 1;
  EXPECT_EQ(run_synth_suite(changed, opt).trained, 2);
  // A row dropped from the suite stays in results.json but leaves the report.
  changed.rows.pop_back();
  const SuiteRunSummary fewer = run_synth_suite(changed, opt);
  EXPECT_EQ(fewer.skipped, 1);
  EXPECT_EQ(read_json_file((dir_ / "out" / "results.json").string())["rows"].size(), 2u);
  EXPECT_EQ(read_file(fewer.report_md).find("Gated-res"), std::string::npos);
  // A corrupt record is measured again, not trusted.
  json broken = read_json_file((dir_ / "out" / "results.json").string());
  broken["rows"][0].erase("epochs");
  write_text_atomic((dir_ / "out" / "results.json").string(), broken.dump());
  EXPECT_EQ(run_synth_suite(changed, opt).trained, 1);
}

// --repeats: runs per row with seeds seed + r, repeat 0 kept from the first
// run, the report's spread and questions, and the plots' bands.
TEST_F(SynthSuiteTest, RepeatsAddRunsWithDerivedSeedsAndAnswerTheQuestions) {
  json j = tiny_suite();
  j["train"]["seed"] = 5;
  j["questions"] = {{{"question", "Does Mamba beat the gated hybrid?"}, {"claim", "better"}, {"a", "mamba"},
                     {"b", "hybrid-gated"}},
                    {{"question", "Accuracy above 2?"}, {"claim", "above"}, {"a", "mamba"}, {"margin", 2.0}}};
  const SynthSuite suite = load_synth_suite(write_suite(j));
  ASSERT_EQ(suite.questions.size(), 2u);
  SuiteRunOptions opt;
  opt.out_dir = (dir_ / "rep").string();
  opt.quiet = true;
  EXPECT_EQ(run_synth_suite(suite, opt).trained, 2);
  opt.repeats = 3;
  const SuiteRunSummary s = run_synth_suite(suite, opt);
  EXPECT_EQ(s.skipped, 2);  // repeat 0 of both rows
  EXPECT_EQ(s.trained, 4);
  ASSERT_EQ(s.runs.size(), 6u);
  for (const RowRecord& r : s.runs) {
    EXPECT_EQ(r.seed, 5u + static_cast<uint64_t>(r.repeat));
    EXPECT_EQ(r.train["seed"], r.seed);
  }
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].repeat, 0);
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[0].spread.n, 3);
  EXPECT_EQ(s.answers[1].verdict, report::Verdict::kReversed);  // no accuracy is above 2
  const std::string md = read_file(s.report_md);
  EXPECT_NE(md.find("## Repeats and intervals"), std::string::npos) << md;
  EXPECT_NE(md.find("Does Mamba beat the gated hybrid?"), std::string::npos);
  EXPECT_EQ(test::count_lines(read_file((dir_ / "rep" / "results.csv").string())), 7);
  if (s.plots_written) {
    // epoch, then mean / min / max of accuracy, of eval loss and of training loss
    const std::string dat = read_file((dir_ / "rep" / "plots" / "epochs.dat").string());
    std::istringstream line(dat.substr(dat.find('\n') + 1));
    double v[10];
    for (double& x : v) ASSERT_TRUE(line >> x);
    EXPECT_LE(v[2], v[1]);
    EXPECT_GE(v[3], v[1]);
    EXPECT_LE(v[8], v[7]);
    EXPECT_GE(v[9], v[7]);
    EXPECT_NE(read_file((dir_ / "rep" / "plots" / "report.gp").string()).find("using 1:8 with lines dt 2"),
              std::string::npos);
  }
  // The first repeat's seed derivation does not depend on N: a rerun with N = 3 trains nothing.
  EXPECT_EQ(run_synth_suite(suite, opt).trained, 0);
  // A question on a metric synth does not have is refused before anything trains.
  j["questions"][0]["metric"] = "best_val_loss";
  EXPECT_THROW(run_synth_suite(load_synth_suite(write_suite(j)), opt), Error);
}

TEST_F(SynthSuiteTest, BadSuiteFilesNameTheKey) {
  auto expect_error = [&](json j, const std::string& needle) {
    try {
      load_synth_suite(write_suite(j));
      FAIL() << "no error for " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  json j = tiny_suite();
  j["rows"][0]["model"]["num_layerz"] = 2;
  expect_error(j, "num_layerz");
  j = tiny_suite();
  j["rows"][1]["id"] = "mamba";
  expect_error(j, "appears twice");
  j = tiny_suite();
  j["train"]["epochs"] = "many";
  expect_error(j, "epochs");
  j = tiny_suite();
  j["rows"] = json::array();
  expect_error(j, "rows");
  j = tiny_suite();
  j["rows"][0]["task"] = {{"num_tokens_to_copy", 9}};
  expect_error(j, "--num-tokens-to-copy");
  EXPECT_THROW(load_synth_suite("no-such-suite"), Error);
  EXPECT_THROW(load_synth_suite((dir_ / "missing.json").string()), Error);
}

TEST_F(SynthSuiteTest, InfoShowsTheSequentialBlocksOfAHybridConfig) {
  ArchSpec a;
  a.kind = ArchKind::kHybrid;
  a.num_blocks = 2;
  a.link = BlockLink::kResidual;
  const std::string path = (dir_ / "config.json").string();
  write_text_atomic(path, make_model_config(a, 16).to_json().dump());
  const auto r = test::run_cli("info --config " + path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sequential blocks: 2 of 4 layers, residual link"), std::string::npos) << r.output;
}

// --show prints what training uses: the train and test sets have separate seeds,
// and the first examples shown are the first of the full sets.
TEST(SynthCli, ShowPrintsTheSetsTrainingUses) {
  TaskSpec task;
  task.kind = TaskKind::kSelectiveCopying;
  task.vocab_size = 8;
  task.seq_len = 12;
  task.num_tokens_to_copy = 3;
  TrainSettings s;
  s.num_train = 16;
  s.num_test = 8;
  const TaskData shown = task_data(task, s, 2), full = task_data(task, s);
  ASSERT_EQ(shown.train.n, 2);
  ASSERT_EQ(full.train.n, 16);
  EXPECT_TRUE(std::equal(shown.train.inputs.begin(), shown.train.inputs.end(), full.train.inputs.begin()));
  EXPECT_TRUE(std::equal(shown.test.inputs.begin(), shown.test.inputs.end(), full.test.inputs.begin()));
  EXPECT_FALSE(std::equal(shown.train.inputs.begin(), shown.train.inputs.end(), shown.test.inputs.begin()));
  const auto r = test::run_cli("synth --task selective-copying --vocab_size 8 --seq_len 12 --num_tokens_to_copy 3 --show 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t train_at = r.output.find("input :"), test_at = r.output.find("input :", train_at + 1);
  ASSERT_NE(test_at, std::string::npos) << r.output;
  const auto line_at = [&](size_t at) { return r.output.substr(at, r.output.find('\n', at) - at); };
  EXPECT_NE(line_at(train_at), line_at(test_at)) << r.output;
}

TEST(SynthCli, RunsShowsAndRejectsBadInputWithOneLine) {
  auto r = test::run_cli(
      "-t 1 synth --task selective-copying --vocab_size 8 --seq_len 12 --num_tokens_to_copy 3 --model mamba "
      "--hidden-size 16 --epochs 1 --num_train_examples 32 --num_test_examples 8");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Mamba layers 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval acc"), std::string::npos) << r.output;
  r = test::run_cli("synth --preset seed004-selective-copying --show 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("target:"), std::string::npos) << r.output;
  r = test::run_cli("synth --list");
  EXPECT_NE(r.output.find("seed004-in-context-recall"), std::string::npos) << r.output;

  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"synth --task selective-copying --seq-len 20 --num-tokens-to-copy 12 --show 1", "--num-tokens-to-copy"},
           {"synth --task in-context-recall --vocab-size 1 --show 1", "--vocab-size"},
           {"synth --task recall", "--task"},
           {"synth --task in-context-recall --model hybrid --num-blocks 0 --epochs 1", "--num-blocks"},
           {"synth --task in-context-recall --num-heads 3 --epochs 1", "--num-heads"},
           {"synth --task in-context-recall --epochs 0", "--epochs"},
           {"synth --task in-context-recall --schedule linear", "--schedule"},
           {"synth --task mqar --show 1", "--vocab-size"},  // Zoology: V > L (defaults V 16, L 128)
           {"synth --task selective-copying --seq-len 11 --num-tokens-to-copy 5 --show 1", "--num-tokens-to-copy"},
           {"synth --task in-context-recall --test-num-kv-pairs 8 --epochs 1", "--test-num-kv-pairs"},
           {"synth --task in-context-recall --stop-metric best --epochs 1", "--stop-metric"},
           {"synth --suite seed004-selective-copying", "--out"},
           {"synth --suite nope.json --out /tmp/x", "nope.json"},
           {"synth", "--task"}}) {
    r = test::run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(test::count_lines(r.output), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace hymba::synth
