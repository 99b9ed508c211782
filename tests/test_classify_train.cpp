// Classifier training end to end on tiny backbones and a synthetic separable
// dataset: frozen mode allocates nothing for the backbone and leaves it bit
// for bit unchanged, unfrozen mode trains it, two-backbone heads, save/load,
// and the CLI's outputs and one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "classify/classifier.h"
#include "classify/trainer.h"
#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "formats/checkpoint.h"
#include "formats/gguf_model.h"
#include "model/model.h"
#include "train/run_state.h"

namespace hymba::classify {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ClassifyTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hymba_classify_train_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    hybrid_ = backbone("hybrid", 16, 1);
    // Separable: class "low" texts use letters a-h, "high" letters q-x.
    Rng rng(11);
    std::string train, val;
    for (int i = 0; i < 120; ++i) {
      const bool high = i % 2 == 1;
      std::string text;
      const int len = 3 + static_cast<int>(rng.below(10));
      for (int k = 0; k < len; ++k) text += static_cast<char>((high ? 'q' : 'a') + rng.below(8));
      (i < 80 ? train : val) += std::string(high ? "high" : "low") + "\t" + text + "\n";
    }
    train_ = write("train.tsv", train);
    val_ = write("val.tsv", val);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  // A tiny byte-level backbone checkpoint with random weights.
  std::string backbone(const std::string& layers, int64_t width, uint64_t seed) {
    json j = {{"vocab_size", 259}, {"hidden_size", width}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
              {"num_key_value_heads", 1}, {"mamba_d_state", 4}, {"mamba_d_conv", 3}, {"mamba_expand", 2},
              {"intermediate_size", 24}, {"layer_types", layers}};
    if (layers == "hybrid") j["num_memory_tokens"] = 2;
    Model m(ModelConfig::from_json(j, "tiny"), false);
    m.init(seed);
    const std::string dir = (dir_ / ("bb-" + layers + std::to_string(width))).string();
    save_inference_checkpoint(dir, m, *make_byte_tokenizer());
    return dir;
  }
  ClassifyTrainOptions options(const std::string& out) const {
    ClassifyTrainOptions o;
    o.backbones = {hybrid_};
    o.train_path = train_;
    o.val_path = val_;
    o.out_dir = (dir_ / out).string();
    o.pooling = "mean";
    o.max_len = 16;
    o.batch = 8;
    o.epochs = 8;
    o.lr = 2e-2;
    o.backbone_lr = 1e-3;
    o.quiet = true;
    return o;
  }
  static std::vector<float> weights(const std::string& ckpt_dir) {
    auto m = hymba::load_model(ckpt_dir, false);
    const ParamTable& t = m->params();
    return {t.values_block(), t.values_block() + t.total_floats()};
  }

  fs::path dir_;
  std::string hybrid_, train_, val_;
};

TEST_F(ClassifyTrain, FrozenBackboneHasNoGradientsAndStaysBitIdentical) {
  Classifier frozen({hybrid_}, HeadConfig{}, {"a", "b"}, 16, /*train_backbones=*/false, true, 1);
  const ParamTable& bt = frozen.backbones()[0].model->params();
  EXPECT_FALSE(bt.has_grads());
  EXPECT_FALSE(bt.has_optimizer());
  EXPECT_EQ(frozen.backbone_grad_optimizer_bytes(), 0);
  EXPECT_TRUE(frozen.head_params().has_grads());
  EXPECT_THROW(frozen.backward_features({}, {}), Error);
  Classifier unfrozen({hybrid_}, HeadConfig{}, {"a", "b"}, 16, true, true, 1);
  EXPECT_EQ(unfrozen.backbone_grad_optimizer_bytes(), 3 * unfrozen.backbone_value_bytes());

  const json s = train_classifier(options("frozen"));
  EXPECT_EQ(s["mode"], "frozen");
  EXPECT_GE(s["metrics"]["accuracy"].get<double>(), 0.95) << s.dump(2);
  EXPECT_EQ(s["memory"]["backbone_grads_optimizer_mb"].get<double>(), 0.0);
  EXPECT_GT(s["memory"]["peak_rss_mb"].get<double>(), 0.0);
  EXPECT_EQ(weights((dir_ / "frozen" / "backbone-0").string()), weights(hybrid_));
  for (const char* f : {"classifier.json", "head.safetensors", "summary.json", "report.md", "report.html",
                        "metrics.jsonl"})
    EXPECT_TRUE(fs::exists(dir_ / "frozen" / f)) << f;
  const std::string report = read_file((dir_ / "frozen" / "report.md").string());
  EXPECT_NE(report.find("Confusion matrix"), std::string::npos);
  EXPECT_NE(report.find("| high |"), std::string::npos);
  // A second run into the same directory is refused.
  EXPECT_THROW(train_classifier(options("frozen")), Error);
}

TEST_F(ClassifyTrain, UnfrozenTrainsTheBackboneAndEvalReloadsIt) {
  ClassifyTrainOptions o = options("unfrozen");
  o.freeze = false;
  o.pooling = "last";
  o.hidden = 8;
  o.epochs = 4;
  const json s = train_classifier(o);
  EXPECT_EQ(s["mode"], "unfrozen");
  EXPECT_GE(s["metrics"]["accuracy"].get<double>(), 0.95) << s.dump(2);
  EXPECT_GT(s["memory"]["backbone_grads_optimizer_mb"].get<double>(), 0.0);
  EXPECT_NE(weights((dir_ / "unfrozen" / "backbone-0").string()), weights(hybrid_));

  // classify eval loads the saved classifier and reproduces the figures.
  ClassifyEvalOptions e;
  e.classifier_dir = o.out_dir;
  e.data_path = val_;
  e.batch = 3;  // other padding than in training: same predictions
  e.quiet = true;
  const json r = eval_classifier(e);
  EXPECT_EQ(r["metrics"]["confusion_matrix"], s["metrics"]["confusion_matrix"]);
  EXPECT_NEAR(r["metrics"]["loss"].get<double>(), s["metrics"]["loss"].get<double>(), 1e-5);
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "eval" / "summary.json"));
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "eval" / "report.md"));

  // Unknown labels in eval data name the file and line.
  e.data_path = write("odd.tsv", "low\tabc\nmedium\tqqq\n");
  try {
    eval_classifier(e);
    ADD_FAILURE() << "unknown label accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("odd.tsv:2: field 'label' is 'medium'"), std::string::npos) << err.what();
  }
}

TEST_F(ClassifyTrain, PublishedCheckpointWithTokenizerJsonIsABackbone) {
  // An HF MambaForCausalLM directory (sharded safetensors, byte-level BPE
  // tokenizer.json) is a backbone as it is; the saved classifier keeps its tokenizer.
  ClassifyTrainOptions o = options("published");
  o.backbones = {std::string(HYMBA_FIXTURES_DIR) + "/import/hf_mamba"};
  o.epochs = 2;
  const json s = train_classifier(o);
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "backbone-0" / "tokenizer.json"));
  ClassifyEvalOptions e;
  e.classifier_dir = o.out_dir;
  e.data_path = val_;
  e.quiet = true;
  EXPECT_EQ(eval_classifier(e)["metrics"]["confusion_matrix"], s["metrics"]["confusion_matrix"]);
}

TEST_F(ClassifyTrain, GgufFileIsABackbone) {
  // The hybrid backbone exported as GGUF (arch hymba) trains the same head as
  // its directory, and the saved classifier keeps the tokenizer as a file.
  const std::string file = (dir_ / "bb.gguf").string();
  (void)gguf::export_gguf(*hymba::load_model(hybrid_, false), hybrid_, file, gguf::ExportDtype::kF32);
  ClassifyTrainOptions o = options("from_gguf");
  o.backbones = {file};
  o.epochs = 2;
  const json s = train_classifier(o);
  ClassifyTrainOptions d = options("from_dir");
  d.epochs = 2;
  EXPECT_EQ(s["metrics"]["confusion_matrix"], train_classifier(d)["metrics"]["confusion_matrix"]);
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "backbone-0" / kTokenizerFile));
  EXPECT_FALSE(fs::exists(fs::path(o.out_dir) / "backbone-0" / "bb.gguf"));
  ClassifyEvalOptions e;
  e.classifier_dir = o.out_dir;
  e.data_path = val_;
  e.quiet = true;
  EXPECT_EQ(eval_classifier(e)["metrics"]["confusion_matrix"], s["metrics"]["confusion_matrix"]);
}

TEST_F(ClassifyTrain, TwoBackboneHeadsConcatAndGated) {
  const std::string mamba = backbone("mamba", 12, 2);
  for (const char* fusion : {"concat", "gated"}) {
    ClassifyTrainOptions o = options(std::string("two-") + fusion);
    o.backbones = {hybrid_, mamba};
    o.fusion = fusion;
    const json s = train_classifier(o);
    EXPECT_EQ(s["head"]["fusion"], fusion);
    EXPECT_EQ(s["head"]["widths"], json({16, 12}));
    EXPECT_EQ(s["backbones"].size(), 2u);
    EXPECT_GE(s["metrics"]["accuracy"].get<double>(), 0.95) << fusion << " " << s.dump(2);
    auto clf = Classifier::load(o.out_dir);
    EXPECT_EQ(clf->backbones().size(), 2u);
    // Gated with unequal widths projects backbone B's features.
    EXPECT_EQ(clf->head_params().contains("proj_b.weight"), std::string(fusion) == "gated");
  }
  // Unfrozen, both backbones learn through the gated head.
  ClassifyTrainOptions o = options("two-gated-unfrozen");
  o.backbones = {hybrid_, mamba};
  o.fusion = "gated";
  o.freeze = false;
  o.steps = 6;
  const json s = train_classifier(o);
  EXPECT_EQ(s["mode"], "unfrozen");
  EXPECT_NE(weights((dir_ / "two-gated-unfrozen" / "backbone-0").string()), weights(hybrid_));
  EXPECT_NE(weights((dir_ / "two-gated-unfrozen" / "backbone-1").string()), weights(mamba));
}

TEST_F(ClassifyTrain, GptNeoAloneAndBesideMambaAsSeed004Runs) {
  // Seed 004's rows: GPT-Neo (an HF GPTNeoForCausalLM directory with its GPT-2
  // tokenizer.json, as published), and GPT-Neo beside Mamba with concatenated
  // features; each backbone keeps its own tokenizer.
  const std::string neo = std::string(HYMBA_FIXTURES_DIR) + "/import/hf_gpt_neo";
  const std::string mamba = backbone("mamba", 12, 2);
  const std::string alone = (dir_ / "neo").string(), both = (dir_ / "neo-mamba").string();
  const std::string common = " --data " + train_ + " --val " + val_ + " --pooling mean --max-len 12 --epochs 12" +
                             " --lr 0.05 --quiet --out ";
  auto r = test::run_cli("classify train --backbone " + neo + common + alone);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_cli("classify train --backbone " + neo + " --backbone " + mamba + " --fusion concat" + common + both);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& out : {alone, both}) {
    r = test::run_cli("classify eval --classifier " + out + " --data " + val_ + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Chance is 0.5; the toy GPT-Neo's 16-wide random features separate less than the others'.
    EXPECT_GE(json::parse(r.output)["metrics"]["accuracy"].get<double>(), 0.8) << out;
  }
  auto clf = Classifier::load(both);
  ASSERT_EQ(clf->backbones().size(), 2u);
  EXPECT_EQ(clf->backbones()[0].model->config().attention_scale, AttentionScale::kNone);
  EXPECT_EQ(clf->head_params().contains("proj_b.weight"), false);  // concat: no projection
  // The fixture has 12 learned positions: a longer --max-len is refused naming the flag.
  r = test::run_cli("classify train --backbone " + neo + " --data " + train_ + " --max-len 13 --out " +
                    (dir_ / "long").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--max-len 13"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max_position_embeddings 12"), std::string::npos) << r.output;
}

TEST_F(ClassifyTrain, CliTrainEvalAndOneLineErrors) {
  const std::string out = (dir_ / "cli").string();
  auto r = test::run_cli("classify train --backbone " + hybrid_ + " --data " + train_ + " --val " + val_ + " --out " +
                         out + " --pooling mean --max-len 16 --epochs 6 --lr 0.02 --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("accuracy"), std::string::npos);
  r = test::run_cli("classify eval --classifier " + out + " --data " + val_ + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_GE(j["metrics"]["accuracy"].get<double>(), 0.9);

  const std::string bad = write("bad.tsv", "low\tabc\nno tab\n");
  r = test::run_cli("classify train --backbone " + hybrid_ + " --data " + bad + " --out " + (dir_ / "x").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("bad.tsv:2: no tab"), std::string::npos) << r.output;
  r = test::run_cli("classify train --backbone " + hybrid_ + " --data " + train_ + " --fusion gated --out " +
                    (dir_ / "y").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--fusion"), std::string::npos) << r.output;
  r = test::run_cli("classify eval --classifier " + (dir_ / "nothing").string() + " --data " + val_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not a classifier directory"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hymba::classify
