// Training in bf16 (`--precision bf16`, kernels/cpu/matmul.h): whole-model
// gradients within a stated tolerance of float32's, a run that learns as
// the float32 run does, the recipe key, and the refusal on CPUs without
// AVX512-BF16. On such CPUs the tests run the portable bf16 kernels.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/rng.h"
#include "kernels/cpu/matmul.h"
#include "model/model.h"
#include "train/trainer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// bf16 keeps 8 bits of each factor: a product's relative error is up to
// 2^-8 (0.4 %), and through a few layers the gradients drift by more.
constexpr double kGradTol = 3e-2;   // max |bf16 - f32| over max |f32|, per tensor
constexpr double kLossTol = 5e-3;   // relative, on the mean loss

json config(json over) {
  json j = {{"vocab_size", 64},        {"hidden_size", 48},   {"num_hidden_layers", 3}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"mamba_d_state", 8}, {"mamba_d_conv", 4},      {"mamba_expand", 2},
            {"intermediate_size", 96},  {"global_attn_idx", {0}}, {"sliding_window", 8},
            {"num_memory_tokens", 4},   {"tie_word_embeddings", true}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

struct Grads {
  double loss;
  std::vector<float> g;
};

Grads gradients(Model& model, const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, int64_t B,
                int64_t T) {
  model.params().zero_grad();
  const LossStats s = model.forward(ids.data(), targets.data(), B, T, ForwardOptions{});
  model.backward();
  const ParamTable& t = model.params();
  return {s.loss_sum / static_cast<double>(s.scored),
          std::vector<float>(t.grads_block(), t.grads_block() + t.total_floats())};
}

TEST(MixedPrecision, WholeModelGradientsStayWithinBf16ToleranceOfFloat32) {
  const cpu::Bf16GemmIsa isa = cpu::best_bf16_gemm_isa();
  for (const char* layers : {"hybrid", "attention", "mamba"}) {
    SCOPED_TRACE(std::string(layers) + " on " + to_string(isa));
    json j = config({{"layer_types", layers}});
    if (std::string(layers) == "mamba") {
      for (const char* k : {"global_attn_idx", "sliding_window", "num_memory_tokens"}) j.erase(k);
    }
    const ModelConfig cfg = ModelConfig::from_json(j, layers);
    Model model(cfg, /*training=*/true);
    model.init(11);
    const int64_t B = 2, T = 24;
    Rng data(5);
    std::vector<int32_t> ids(B * T), targets(B * T);
    for (int64_t i = 0; i < B * T; ++i) {
      ids[i] = static_cast<int32_t>(data.below(cfg.vocab_size));
      targets[i] = static_cast<int32_t>(data.below(cfg.vocab_size));
    }
    const Grads f32 = gradients(model, ids, targets, B, T);
    Grads bf16;
    {
      const cpu::MatmulPrecisionScope scope(cpu::MatmulPrecision::kBf16, isa);
      bf16 = gradients(model, ids, targets, B, T);
    }
    EXPECT_NEAR(bf16.loss, f32.loss, kLossTol * f32.loss);
    EXPECT_NE(bf16.g, f32.g) << "the bf16 scope changed no gradient";
    for (const ParamInfo& info : model.params().rows()) {
      double worst = 0.0, scale = 0.0;
      for (int64_t i = info.offset; i < info.offset + info.shape.numel(); ++i) {
        worst = std::max(worst, std::fabs(double{bf16.g[i]} - f32.g[i]));
        scale = std::max(scale, std::fabs(double{f32.g[i]}));
      }
      if (scale == 0.0) continue;
      EXPECT_LE(worst / scale, kGradTol) << info.name;
    }
  }
}

class MixedPrecisionTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_mixed_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream out(path("toy.txt"));
    const char* words[] = {"the cat sees", "a dog likes", "my friend finds", "the ball.", "a red apple.", "some water."};
    Rng r(1);
    for (int i = 0; i < 3000; ++i) out << words[r.below(3)] << ' ' << words[3 + r.below(3)] << '\n';
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  TrainSummary run(cpu::MatmulPrecision p, const std::string& name) const {
    TrainOptions o;
    o.data = path("toy.txt");
    o.out_dir = path(name);
    o.steps = 60;
    o.batch = 4;
    o.seq_len = 48;
    o.lr = 3e-3;
    o.warmup = 5;
    o.eval_interval = 60;
    o.quiet = true;
    o.threads = 1;
    o.precision = p;
    o.bf16_isa = cpu::best_bf16_gemm_isa();
    return train(ModelConfig::from_json(config({{"layer_types", "hybrid"}}), "mixed"), o);
  }
  fs::path dir_;
};

TEST_F(MixedPrecisionTraining, LearnsAsFloat32DoesAndRecordsItsPrecision) {
  const TrainSummary f32 = run(cpu::MatmulPrecision::kF32, "f32");
  const TrainSummary bf16 = run(cpu::MatmulPrecision::kBf16, "bf16");
  EXPECT_LT(bf16.best_val_loss, 0.6 * std::log(64.0)) << "bf16 did not learn";
  EXPECT_NEAR(bf16.best_val_loss, f32.best_val_loss, 0.02 * f32.best_val_loss);
  EXPECT_NE(bf16.best_val_loss, f32.best_val_loss) << "the run trained in float32";
  EXPECT_EQ(cpu::matmul_precision(), cpu::MatmulPrecision::kF32) << "the run left its precision set";
  // The run's recipe names its precision, so a resume cannot change it.
  auto recipe = [&](const std::string& run) {
    std::string latest;
    std::ifstream(path(run + "/latest")) >> latest;
    return json::parse(std::ifstream(path(run + "/" + latest + "/train_state.json")))["run"];
  };
  EXPECT_EQ(recipe("bf16")["precision"], "bf16");
  EXPECT_EQ(recipe("f32")["precision"], "f32");
}

// Without AVX512-BF16 the command line refuses bf16 in one line; with it,
// bf16 trains.
TEST_F(MixedPrecisionTraining, CommandLineRefusesBf16OnlyWithoutTheInstructions) {
  const auto r = test::run_cli("--threads 1 train --preset hybrid-official --scale tiny --data " + path("toy.txt") +
                               " --out " + path("cli") + " --steps 2 --batch 2 --seq-len 16 --quiet --precision bf16");
  if (cpu::bf16_gemm_isa_available(cpu::Bf16GemmIsa::kAvx512Bf16)) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
  } else {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("AVX512-BF16"), std::string::npos) << r.output;
    EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  }
  const auto bad = test::run_cli("--threads 1 train --preset hybrid-official --scale tiny --out " + path("bad") +
                                 " --steps 2 --precision fp16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--precision"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace hymba
