// The model subcommands end to end: presets, info, init, forward.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/safetensors.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class CliModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_cli_model_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CliModel, PresetsListsEveryFamily) {
  auto r = run_cli("presets --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.size(), 37u);
  auto text = run_cli("presets --scale tiny");
  EXPECT_NE(text.output.find("roadmap-13"), std::string::npos);
  EXPECT_NE(text.output.find("hymba-1.5b"), std::string::npos);
  EXPECT_NE(text.output.find("seed000-hybrid-5050"), std::string::npos);
  EXPECT_NE(text.output.find("hymba-v2"), std::string::npos);
  EXPECT_NE(text.output.find("gpt-neo-125m"), std::string::npos);
  EXPECT_NE(text.output.find("mamba-130m"), std::string::npos);
  // The counts depend on the vocabulary, which a run takes from its tokenizer: the listing says so.
  EXPECT_NE(text.output.find("a run gets vocab_size from its tokenizer"), std::string::npos);
}

TEST_F(CliModel, InfoReportsParamsAndCache) {
  auto r = run_cli("info --preset hymba-1.5b --seq-len 8192 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_NEAR(j["model"]["total_params"].get<double>() / 1e9, 1.52, 0.005);
  const double fp16 = j["model"]["kv_cache_bytes"]["fp16"].get<double>() + j["model"]["mamba_state_bytes"]["fp16"].get<double>();
  EXPECT_NEAR(fp16 / 1048576.0, 79.0, 0.5);
  EXPECT_EQ(j["model"]["layers"][2]["kv"], "consumer of 1");
  auto text = run_cli("info --preset hybrid-official --scale tiny");
  EXPECT_NE(text.output.find("attention:Mamba"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("local(32)"), std::string::npos) << text.output;
}

TEST_F(CliModel, InfoErrorsAreOneLine) {
  auto bad = run_cli("info --preset nosuch");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(test::count_lines(bad.output), 1) << bad.output;
  EXPECT_NE(bad.output.find("nosuch"), std::string::npos);
  std::ofstream(path("c.json")) << R"({"hidden_size": 16, "num_attention_heads": 3})";
  auto cfg = run_cli("info --config " + path("c.json"));
  EXPECT_NE(cfg.exit_code, 0);
  EXPECT_EQ(test::count_lines(cfg.output), 1) << cfg.output;
  EXPECT_NE(cfg.output.find("num_attention_heads"), std::string::npos) << cfg.output;
  auto scale = run_cli("info --preset mamba-only --scale huge");
  EXPECT_NE(scale.exit_code, 0);
  EXPECT_NE(scale.output.find("--scale"), std::string::npos);
}

TEST_F(CliModel, InitThenForwardWritesLogitsLossAndGrads) {
  auto init = run_cli("init --preset hybrid-official --scale tiny --vocab-size 40 --seed 3 --out " + path("ck"));
  ASSERT_EQ(init.exit_code, 0) << init.output;
  EXPECT_TRUE(fs::exists(path("ck/config.json")));
  auto fwd = run_cli("forward --ckpt " + path("ck") + " --ids \"1,2,3,4;5,6,7,8\" --targets \"2,3,4,-100;6,7,8,9\" --grads --out " +
                     path("out.safetensors"));
  ASSERT_EQ(fwd.exit_code, 0) << fwd.output;
  SafetensorsFile f = SafetensorsFile::open(path("out.safetensors"));
  ASSERT_NE(f.find("logits"), nullptr);
  EXPECT_EQ(f.find("logits")->shape, (std::vector<int64_t>{2, 4, 40}));
  ASSERT_NE(f.find("loss"), nullptr);
  const float loss = f.read_f32("loss")[0];
  EXPECT_GT(loss, 2.0f);  // about log(40) = 3.7 at init
  EXPECT_LT(loss, 6.0f);
  EXPECT_NE(f.find("grad.model.memory_tokens"), nullptr);
  EXPECT_NE(f.find("grad.model.layers.1.mamba.in_proj.weight"), nullptr);
}

TEST_F(CliModel, ForwardRejectsBadInput) {
  ASSERT_EQ(run_cli("init --preset mamba-only --scale tiny --vocab-size 20 --out " + path("ck")).exit_code, 0);
  for (const std::string& args : {std::string("--ids \"1,2;3\""), std::string("--ids \"1,x\""), std::string("--ids \"1,25\""),
                                  std::string("--ids \"1,2\" --grads"), std::string("--ids \"1,2\" --targets \"1\"")}) {
    auto r = run_cli("forward --ckpt " + path("ck") + " " + args + " --out " + path("o.safetensors"));
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(test::count_lines(r.output), 1) << args << ": " << r.output;
  }
  auto missing = run_cli("forward --ckpt " + path("nothere") + " --ids 1 --out " + path("o.safetensors"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("nothere"), std::string::npos);
}

TEST_F(CliModel, PureMambaUsesHfNamesAndMismatchesAreNamed) {
  ASSERT_EQ(run_cli("init --preset mamba-only --scale tiny --vocab-size 20 --out " + path("ck")).exit_code, 0);
  SafetensorsFile w = SafetensorsFile::open(path("ck/model.safetensors"));
  EXPECT_NE(w.find("backbone.embeddings.weight"), nullptr);
  EXPECT_NE(w.find("backbone.layers.0.mixer.A_log"), nullptr);
  EXPECT_NE(w.find("backbone.norm_f.weight"), nullptr);
  // A config that disagrees with the weights: the first bad tensor is named.
  auto cfg = nlohmann::json::parse(std::ifstream(path("ck/config.json")));
  cfg["mamba_d_state"] = 8;
  std::ofstream(path("ck/config.json")) << cfg.dump();
  auto r = run_cli("forward --ckpt " + path("ck") + " --ids 1,2 --out " + path("o.safetensors"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("backbone.layers.0.mixer.x_proj.weight"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hymba
