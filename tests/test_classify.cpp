// Sequence classification pieces: labelled-data parsing and its errors,
// metrics, the head's and the pooled backbone's gradients against float64
// finite differences, and padding masks (a padded batch gives each sequence
// the features it has alone).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "classify/data.h"
#include "classify/head.h"
#include "classify/metrics.h"
#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

namespace hymba::classify {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ClassifyData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hymba_classify_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  // The message of the hymba::Error that reading path throws ("" if none).
  static std::string error_of(const std::string& path, const ReadOptions& opt = {}) {
    try {
      read_labeled(path, opt);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(ClassifyData, ReadsTsvWithEscapesAndSkipsBlankLines) {
  const std::string p = write("a.tsv", "pos\thello\\nworld\\tx\\\\y\\q\n\nneg\tbad\tmovie\r\n   \n");
  const auto ex = read_labeled(p);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].label, "pos");
  EXPECT_EQ(ex[0].text, "hello\nworld\tx\\y\\q");
  EXPECT_EQ(ex[1].label, "neg");
  EXPECT_EQ(ex[1].text, "bad\tmovie");  // only the first tab separates
  EXPECT_EQ(ex[1].where, p + ":3");
}

TEST_F(ClassifyData, ReadsJsonlWithFieldNamesAndIntegerLabels) {
  const std::string p = write("a.jsonl", "{\"y\": 1, \"body\": \"one\"}\n\n{\"y\": \"two\", \"body\": \"2\"}\n");
  ReadOptions opt;
  opt.label_field = "y";
  opt.text_field = "body";
  const auto ex = read_labeled(p, opt);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].label, "1");
  EXPECT_EQ(ex[1].label, "two");
  EXPECT_EQ(ex[1].text, "2");
  // A .txt file read as JSONL when asked.
  const std::string q = write("b.txt", "{\"label\": \"a\", \"text\": \"t\"}\n");
  ReadOptions j;
  j.format = "jsonl";
  EXPECT_EQ(read_labeled(q, j).size(), 1u);
}

TEST_F(ClassifyData, BadInputNamesFileLineAndField) {
  EXPECT_NE(error_of(write("empty.tsv", "\n \n")).find("empty.tsv: no examples"), std::string::npos);
  EXPECT_NE(error_of((dir_ / "missing.tsv").string()).find("missing.tsv"), std::string::npos);
  const std::string notab = error_of(write("t.tsv", "a\tx\nb\ty\nno tab here\n"));
  EXPECT_NE(notab.find("t.tsv:3: no tab"), std::string::npos) << notab;
  EXPECT_NE(error_of(write("l.tsv", "\ttext\n")).find("l.tsv:1: field 'label' is empty"), std::string::npos);
  EXPECT_NE(error_of(write("x.tsv", "a\t  \n")).find("x.tsv:1: field 'text' is empty"), std::string::npos);
  const std::string bad = error_of(write("b.jsonl", "{\"label\":\"a\",\"text\":\"t\"}\n{\"label\": \n"));
  EXPECT_NE(bad.find("b.jsonl:2: not valid JSON"), std::string::npos) << bad;
  const std::string twice = error_of(write("d.jsonl", "{\"label\":\"a\",\"text\":\"t\",\"label\":\"b\"}\n"));
  EXPECT_NE(twice.find("d.jsonl:1: the top-level object has key 'label' twice"), std::string::npos) << twice;
  EXPECT_NE(error_of(write("m.jsonl", "{\"text\":\"t\"}\n")).find("m.jsonl:1: field 'label' is missing"),
            std::string::npos);
  EXPECT_NE(error_of(write("n.jsonl", "{\"label\":\"a\",\"text\":3}\n")).find("n.jsonl:1: field 'text' is a number"),
            std::string::npos);
  EXPECT_NE(error_of(write("o.jsonl", "[1]\n")).find("o.jsonl:1: expected a JSON object"), std::string::npos);
  ReadOptions odd;
  odd.format = "xml";  // csv is a format now (classify/data_formats.h)
  EXPECT_NE(error_of(write("c.tsv", "a\tb\n"), odd).find("--format"), std::string::npos);
}

TEST_F(ClassifyData, ClassListAndUnknownLabels) {
  const auto ex = read_labeled(write("a.tsv", "spam\tx\nham\ty\nspam\tz\n"));
  EXPECT_EQ(class_list(ex), (std::vector<std::string>{"ham", "spam"}));
  EXPECT_EQ(class_list(ex, "spam,ham"), (std::vector<std::string>{"spam", "ham"}));
  EXPECT_THROW(class_list(ex, "spam,spam"), Error);
  EXPECT_THROW(class_list(ex, "spam,"), Error);
  EXPECT_THROW(class_list(read_labeled(write("one.tsv", "a\tx\na\ty\n"))), Error);

  auto tok = make_byte_tokenizer();
  const auto other = read_labeled(write("e.tsv", "ham\tok\neggs\tnope\n"));
  try {
    encode_examples(other, {"ham", "spam"}, {tok.get()}, 16);
    ADD_FAILURE() << "unknown label accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("e.tsv:2: field 'label' is 'eggs'"), std::string::npos) << e.what();
  }
  const auto enc = encode_examples(ex, {"ham", "spam"}, {tok.get(), tok.get()}, 2);
  ASSERT_EQ(enc.size(), 3u);
  EXPECT_EQ(enc[0].label, 1);
  EXPECT_EQ(enc[1].label, 0);
  ASSERT_EQ(enc[0].ids.size(), 2u);  // one id list per tokenizer
  EXPECT_EQ(enc[0].ids[0], (std::vector<int32_t>{'x'}));
}

TEST_F(ClassifyData, SplitIsDeterministicAndComplete) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += (i % 2 ? "a\t" : "b\t") + std::to_string(i) + "\n";
  const auto all = read_labeled(write("s.tsv", text));
  std::vector<LabeledText> tr, va, tr2, va2;
  split_train_val(all, 0.2, 7, tr, va);
  split_train_val(all, 0.2, 7, tr2, va2);
  EXPECT_EQ(tr.size(), 40u);
  EXPECT_EQ(va.size(), 10u);
  for (size_t i = 0; i < va.size(); ++i) EXPECT_EQ(va[i].text, va2[i].text);
  std::vector<std::string> seen;
  for (const auto* part : {&tr, &va})
    for (const auto& e : *part) seen.push_back(e.text);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_THROW(split_train_val({all[0]}, 0.2, 7, tr, va), Error);
}

TEST(ClassifyBatch, PadsOnTheRight) {
  std::vector<Example> ex(3);
  ex[0].ids = {{5, 6, 7}};
  ex[1].ids = {{8}};
  ex[2].ids = {{9, 10}};
  const PaddedBatch b = pad_batch(ex, {1, 0}, 0, -1);
  EXPECT_EQ(b.B, 2);
  EXPECT_EQ(b.T, 3);
  EXPECT_EQ(b.ids, (std::vector<int32_t>{8, -1, -1, 5, 6, 7}));
  EXPECT_EQ(b.lengths, (std::vector<int64_t>{1, 3}));
}

TEST(ClassifyMetrics, HandMadeCase) {
  // truth: a a a b b c ; predicted: a b a b c c
  const Metrics m = compute_metrics({0, 0, 0, 1, 1, 2}, {0, 1, 0, 1, 2, 2}, {"a", "b", "c"});
  EXPECT_EQ(m.correct, 4);
  EXPECT_DOUBLE_EQ(m.accuracy, 4.0 / 6.0);
  EXPECT_EQ(m.confusion, (std::vector<std::vector<int64_t>>{{2, 1, 0}, {0, 1, 1}, {0, 0, 1}}));
  // a: P 2/2, R 2/3; b: P 1/2, R 1/2; c: P 1/2, R 1/1.
  EXPECT_DOUBLE_EQ(m.classes[0].precision, 1.0);
  EXPECT_DOUBLE_EQ(m.classes[0].recall, 2.0 / 3.0);
  EXPECT_NEAR(m.classes[0].f1, 0.8, 1e-12);
  EXPECT_DOUBLE_EQ(m.classes[1].f1, 0.5);
  EXPECT_NEAR(m.classes[2].f1, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(m.macro_f1, (0.8 + 0.5 + 2.0 / 3.0) / 3.0, 1e-12);
  EXPECT_EQ(m.classes[2].support, 1);
  EXPECT_EQ(m.classes[2].predicted, 2);
  // A class never predicted: precision and F1 are 0, not NaN.
  const Metrics z = compute_metrics({0, 1}, {0, 0}, {"a", "b"});
  EXPECT_EQ(z.classes[1].precision, 0.0);
  EXPECT_EQ(z.classes[1].f1, 0.0);
  const json j = m.to_json();
  EXPECT_EQ(j["confusion_matrix"][0][1], 1);
  EXPECT_EQ(j["per_class"][2]["class"], "c");
  EXPECT_THROW(compute_metrics({0}, {3}, {"a", "b"}), Error);
}

// ---- head gradients ----------------------------------------------------

struct HeadCase {
  const char* name;
  std::vector<int64_t> widths;
  FeatureFusion fusion;
  int64_t hidden;
};

class HeadGrad : public ::testing::TestWithParam<HeadCase> {};

TEST_P(HeadGrad, MatchesFloat64FiniteDifferences) {
  const HeadCase& hc = GetParam();
  HeadConfig cfg;
  cfg.widths = hc.widths;
  cfg.fusion = hc.fusion;
  cfg.hidden = hc.hidden;
  cfg.num_classes = 3;
  cfg.loss_on_raw_logits = std::string(hc.name).starts_with("raw_logits");  // seed 004's NLL on raw logits
  ParamTable table;
  declare_head(cfg, table);
  table.allocate(true, false);
  table.init(Rng(3));
  Rng noise(4);
  table.for_each([&](ParamSlot& s) {  // biases away from zero, weights off their init
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] += 0.3f * noise.normal();
  });
  const HeadPlan plan = HeadPlan::make(cfg, table);
  const int64_t B = 4;
  std::vector<std::vector<float>> feats;
  for (int64_t w : cfg.widths) feats.push_back(test::random_floats(static_cast<size_t>(B * w), noise, -1.5f, 1.5f));
  const std::vector<int32_t> labels = {2, 0, 1, 2};

  std::vector<const float*> fp;
  std::vector<std::vector<float>> dfeats;
  std::vector<float*> dp;
  for (auto& f : feats) {
    fp.push_back(f.data());
    dfeats.emplace_back(f.size(), 123.0f);  // overwritten by the backward
  }
  for (auto& d : dfeats) dp.push_back(d.data());
  table.zero_grad();
  HeadActs<float> acts;
  const LossStats s = head_forward(plan, table.values_block(), fp, B, labels.data(), acts);
  head_backward(plan, table.values_block(), table.grads_block(), acts, labels.data(), 1.0f / B, dp);

  std::vector<double> P(table.values_block(), table.values_block() + table.total_floats());
  std::vector<std::vector<double>> fd;
  for (auto& f : feats) fd.push_back(test::to_double(f));
  HeadActs<double> dacts;
  auto loss = [&] {
    std::vector<const double*> p;
    for (auto& f : fd) p.push_back(f.data());
    return head_forward(plan, P.data(), p, B, labels.data(), dacts).loss_sum / B;
  };
  EXPECT_NEAR(s.loss_sum / B, loss(), 1e-5);
  for (const ParamInfo& info : table.rows()) {
    std::vector<double> x(P.begin() + info.offset, P.begin() + info.offset + info.shape.numel());
    auto sub_loss = [&] {
      std::copy(x.begin(), x.end(), P.begin() + info.offset);
      return loss();
    };
    const std::vector<float> ana(table.grads_block() + info.offset,
                                 table.grads_block() + info.offset + info.shape.numel());
    test::expect_grad_matches(sub_loss, x, ana, 2e-3, std::string(hc.name) + " " + info.name);
    std::copy(x.begin(), x.end(), P.begin() + info.offset);
  }
  for (size_t k = 0; k < fd.size(); ++k)
    test::expect_grad_matches(loss, fd[k], dfeats[k], 2e-3, std::string(hc.name) + " features " + std::to_string(k));

  // A frozen backbone passes null: the head's own gradients are unchanged.
  std::vector<float> before(table.grads_block(), table.grads_block() + table.total_floats());
  table.zero_grad();
  head_backward(plan, table.values_block(), table.grads_block(), acts, labels.data(), 1.0f / B,
                std::vector<float*>(fp.size(), nullptr));
  for (int64_t i = 0; i < table.total_floats(); ++i) ASSERT_EQ(table.grads_block()[i], before[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Fusions, HeadGrad,
                         ::testing::Values(HeadCase{"single_linear", {6}, FeatureFusion::kSingle, 0},
                                           HeadCase{"single_hidden", {6}, FeatureFusion::kSingle, 5},
                                           HeadCase{"concat_hidden", {6, 4}, FeatureFusion::kConcat, 3},
                                           HeadCase{"gated_equal", {5, 5}, FeatureFusion::kGated, 0},
                                           HeadCase{"gated_projected_hidden", {6, 4}, FeatureFusion::kGated, 4},
                                           HeadCase{"raw_logits_single_hidden", {6}, FeatureFusion::kSingle, 5},
                                           HeadCase{"raw_logits_concat", {6, 4}, FeatureFusion::kConcat, 0}),
                         [](const auto& p) { return std::string(p.param.name); });

// Seed 004's loss without log-softmax on a hand-made case: a linear head
// whose logits are the features themselves (W = I, b = 0) gives
// -sum(logits[label]), however large the logit; log-softmax does not.
TEST(HeadLoss, RawLogitsIsMinusTheLabelsLogit) {
  for (const bool raw : {false, true}) {
    HeadConfig cfg;
    cfg.widths = {2};
    cfg.num_classes = 2;
    cfg.loss_on_raw_logits = raw;
    ParamTable table;
    declare_head(cfg, table);
    table.allocate(false, false);
    const HeadPlan plan = HeadPlan::make(cfg, table);
    float* P = table.values_block();
    std::fill(P, P + table.total_floats(), 0.0f);
    P[plan.out_w] = P[plan.out_w + 3] = 1.0f;  // identity [2 x 2]
    const std::vector<float> feats = {3.0f, -1.0f, 50.0f, 2.0f};
    const std::vector<int32_t> labels = {0, 0};
    HeadActs<float> acts;
    const LossStats s = head_forward(plan, static_cast<const float*>(P), {feats.data()}, 2, labels.data(), acts);
    const double ce = std::log1p(std::exp(-4.0)) + std::log1p(std::exp(-48.0));
    EXPECT_NEAR(s.loss_sum, raw ? -53.0 : ce, 1e-5) << raw;
    EXPECT_EQ(s.correct, 2);
  }
  HeadConfig c;
  c.widths = {4};
  c.loss_on_raw_logits = true;
  EXPECT_EQ(c.to_json()["loss"], "raw_logits");
  EXPECT_TRUE(HeadConfig::from_json(c.to_json(), "x").loss_on_raw_logits);
  c.loss_on_raw_logits = false;
  EXPECT_FALSE(c.to_json().contains("loss"));  // classifiers written before the key read the same
  EXPECT_THROW(parse_raw_logits_loss("softmax", "--loss"), Error);
  nlohmann::json bad = c.to_json();
  bad["loss"] = "nll";
  EXPECT_THROW(HeadConfig::from_json(bad, "x"), Error);
}

TEST(HeadConfig, RejectsImpossibleCombinations) {
  HeadConfig c;
  c.widths = {8};
  c.fusion = FeatureFusion::kGated;
  EXPECT_THROW(c.validate(), Error);
  c.widths = {8, 8};
  c.fusion = FeatureFusion::kSingle;
  EXPECT_THROW(c.validate(), Error);
  c.fusion = FeatureFusion::kConcat;
  c.num_classes = 1;
  EXPECT_THROW(c.validate(), Error);
  EXPECT_THROW(parse_pooling("max"), Error);
  EXPECT_THROW(parse_feature_fusion("sum"), Error);
  c.num_classes = 4;
  const HeadConfig back = HeadConfig::from_json(c.to_json(), "x");
  EXPECT_EQ(back.to_json(), c.to_json());
}

// ---- pooling through the backbone --------------------------------------

json tiny_backbone(json over = json::object()) {
  json j = {{"vocab_size", 13}, {"hidden_size", 8}, {"num_hidden_layers", 3}, {"num_attention_heads", 2},
            {"num_key_value_heads", 1}, {"mamba_d_state", 4}, {"mamba_d_conv", 3}, {"mamba_expand", 2},
            {"intermediate_size", 12}, {"initializer_range", 0.3}, {"layer_types", "hybrid"},
            {"global_attn_idx", {0}}, {"sliding_window", 3}, {"num_memory_tokens", 2}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

void perturb(Model& m, uint64_t seed) {
  Rng noise(seed);
  m.params().for_each([&](ParamSlot& s) {
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] += 0.1f * noise.normal();
  });
}

// Features of sequences batched with right padding equal their features alone.
TEST(ClassifyPadding, BatchedFeaturesEqualEachSequenceAlone) {
  for (const char* layers : {"hybrid", "attention", "mamba"}) {
    json cfg_json = tiny_backbone({{"layer_types", layers}});
    if (std::string(layers) == "mamba") {
      cfg_json.erase("global_attn_idx");
      cfg_json.erase("sliding_window");
    }
    Model m(ModelConfig::from_json(cfg_json, "tiny"), false);
    m.init(5);
    perturb(m, 6);
    const std::vector<std::vector<int32_t>> seqs = {{1, 2, 3}, {4, 5, 6, 7, 8, 9, 10}, {11}, {3, 3, 3, 3, 12}};
    const int64_t d = 8, M = 2, T = 7, B = static_cast<int64_t>(seqs.size());
    std::vector<int32_t> ids(static_cast<size_t>(B * T), 0);  // pad id 0
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < B; ++b) {
      std::copy(seqs[b].begin(), seqs[b].end(), ids.begin() + b * T);
      lengths.push_back(static_cast<int64_t>(seqs[b].size()));
    }
    for (Pooling pooling : {Pooling::kLast, Pooling::kMean}) {
      ForwardOptions fo;
      fo.hidden_only = true;
      m.forward(ids.data(), nullptr, B, T, fo);
      EXPECT_EQ(m.logits(), nullptr);
      std::vector<float> batched(static_cast<size_t>(B * d));
      pool_forward(batched.data(), m.hidden(), B, M + T, M, d, lengths.data(), pooling);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t n = lengths[b];
        m.forward(seqs[b].data(), nullptr, 1, n, fo);
        std::vector<float> alone(static_cast<size_t>(d));
        pool_forward(alone.data(), m.hidden(), 1, M + n, M, d, &n, pooling);
        for (int64_t j = 0; j < d; ++j)
          EXPECT_NEAR(batched[b * d + j], alone[j], 1e-5 * std::max(1.0f, std::abs(alone[j])))
              << layers << " " << to_string(pooling) << " sequence " << b << " feature " << j;
      }
      // Changing a pad token changes nothing.
      std::vector<int32_t> other = ids;
      other[2 * T + 3] = 7;
      m.forward(other.data(), nullptr, B, T, fo);
      std::vector<float> again(static_cast<size_t>(B * d));
      pool_forward(again.data(), m.hidden(), B, M + T, M, d, lengths.data(), pooling);
      for (size_t i = 0; i < again.size(); ++i) ASSERT_EQ(again[i], batched[i]) << layers << " " << i;
    }
  }
}

// Frozen backbones run forwards that keep one layer's activations at a time:
// the same hidden states bit for bit, a lower activation peak, no backward.
TEST(ClassifyFrozenForward, ReleasingActivationsKeepsHiddenStatesAndCutsMemory) {
  // KV sharing across layers, and seed 004's sequential blocks (a gated link
  // reads its block's first input after that layer's activations are gone).
  for (const json& over : {json{{"num_hidden_layers", 4}, {"global_attn_idx", {0, 3}}, {"kv_reuse_group", "auto"}},
                           json{{"num_hidden_layers", 4}, {"layer_types", {"attention", "attention", "mamba", "mamba"}},
                                {"block_layers", 2}, {"block_link", "gated"}, {"num_memory_tokens", 0}}}) {
    const ModelConfig cfg = ModelConfig::from_json(tiny_backbone(over), "tiny");
    Model full(cfg, true), lean(cfg, true);
    full.init(3);
    lean.init(3);
    const int64_t B = 3, T = 9, R = B * (cfg.num_memory_tokens + T);
    std::vector<int32_t> ids(static_cast<size_t>(B * T));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % cfg.vocab_size);
    ForwardOptions fo;
    fo.hidden_only = true;
    full.forward(ids.data(), nullptr, B, T, fo);
    fo.release_activations = true;
    lean.forward(ids.data(), nullptr, B, T, fo);
    for (int64_t i = 0; i < R * cfg.hidden_size; ++i) ASSERT_EQ(lean.hidden()[i], full.hidden()[i]) << over << i;
    EXPECT_LT(lean.activation_bytes() * 2, full.activation_bytes()) << over;
    std::vector<float> dh(static_cast<size_t>(R * cfg.hidden_size), 1.0f);
    EXPECT_THROW(lean.backward_from_hidden(dh.data()), Error);
  }
}

// Unfrozen: the backbone's gradients through pooling and the head, against
// float64 finite differences of the same pipeline on the reference kernels.
TEST(ClassifyBackboneGrad, ThroughPoolingMatchesFloat64FiniteDifferences) {
  for (Pooling pooling : {Pooling::kLast, Pooling::kMean}) {
    const ModelConfig cfg = ModelConfig::from_json(tiny_backbone(), "tiny");
    Model m(cfg, true);
    m.set_activation_poison(true);
    m.init(7);
    perturb(m, 8);
    HeadConfig hc;
    hc.widths = {cfg.hidden_size};
    hc.pooling = pooling;
    hc.hidden = 4;
    hc.num_classes = 3;
    ParamTable head;
    declare_head(hc, head);
    head.allocate(true, false);
    head.init(Rng(9));
    const HeadPlan plan = HeadPlan::make(hc, head);

    const int64_t B = 3, T = 6, M = cfg.num_memory_tokens, S = M + T, d = cfg.hidden_size;
    const std::vector<int32_t> ids = {1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0};
    const std::vector<int64_t> lengths = {4, 6, 2};
    const std::vector<int32_t> labels = {1, 2, 0};
    ForwardOptions fo;
    fo.hidden_only = true;

    m.params().zero_grad();
    head.zero_grad();
    m.forward(ids.data(), nullptr, B, T, fo);
    std::vector<float> feat(static_cast<size_t>(B * d)), dfeat(feat.size());
    pool_forward(feat.data(), m.hidden(), B, S, M, d, lengths.data(), pooling);
    HeadActs<float> acts;
    head_forward(plan, head.values_block(), {feat.data()}, B, labels.data(), acts);
    head_backward(plan, head.values_block(), head.grads_block(), acts, labels.data(), 1.0f / B, {dfeat.data()});
    std::vector<float> dhidden(static_cast<size_t>(B * S * d), 0.0f);
    pool_backward(dhidden.data(), dfeat.data(), B, S, M, d, lengths.data(), pooling);
    m.backward_from_hidden(dhidden.data());

    const ParamTable& table = m.params();
    std::vector<double> P(table.values_block(), table.values_block() + table.total_floats());
    const std::vector<double> H(head.values_block(), head.values_block() + head.total_floats());
    BasicArena<double> arena;
    Activations<double> dacts;
    HeadActs<double> hacts;
    auto loss = [&] {
      arena.reset();
      model_forward(m.plan(), P.data(), ids.data(), nullptr, B, T, fo, arena, dacts);
      std::vector<double> f(static_cast<size_t>(B * d));
      pool_forward(f.data(), dacts.hf, B, S, M, d, lengths.data(), pooling);
      return head_forward(plan, H.data(), {f.data()}, B, labels.data(), hacts).loss_sum / B;
    };
    Rng pick(10);
    for (const ParamInfo& info : table.rows()) {
      const test::SampledGradError e = test::sampled_grad_error(
          loss, P.data() + info.offset, table.grads_block() + info.offset, info.shape.numel(), 8, pick);
      EXPECT_LE(e.relative(), 3e-3) << to_string(pooling) << " " << info.name << ": max error " << e.max_err
                                    << " vs max |numeric| " << e.max_num;
    }
  }
}

}  // namespace
}  // namespace hymba::classify
