// Training end to end: learning, checkpoints that survive SIGKILL with
// bit-identical resumption, and clear errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "formats/checkpoint.h"
#include "cli_util.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::read_jsonl;
using test::run_cli;

const std::string kFixtureConfig = std::string(HYMBA_FIXTURES_DIR) + "/tiny_hybrid/config.json";

// A small text with structure a model can learn: sentences from a tiny grammar.
void write_toy_corpus(const std::string& path, int sentences, uint64_t seed) {
  const char* subj[] = {"the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher"};
  const char* verb[] = {"sees", "likes", "finds", "wants", "helps", "watches"};
  const char* obj[] = {"the ball", "a red apple", "the green tree", "some water", "the little house", "a book"};
  Rng r(seed);
  std::ofstream out(path);
  for (int i = 0; i < sentences; ++i)
    out << subj[r.below(6)] << ' ' << verb[r.below(6)] << ' ' << obj[r.below(6)] << ".\n";
}

class Train : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_train_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_toy_corpus(path("toy.txt"), 1500, 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string train_args(const std::string& out, int steps, const std::string& data = "") const {
    // One thread: these runs are tiny, and ctest runs suites side by side.
    return "--threads 1 train --config " + kFixtureConfig + " --data " + (data.empty() ? path("toy.txt") : data) + " --out " + out +
           " --steps " +
           std::to_string(steps) + " --batch 4 --seq-len 32 --lr 3e-3 --warmup 5 --log-interval 1 --eval-interval 50" +
           " --eval-windows 8 --save-interval 10 --dropout 0.1 --quiet";
  }
  fs::path dir_;
};

TEST_F(Train, ValidationLossFallsWellBelowUnigramEntropy) {
  TrainOptions o;
  o.data = path("toy.txt");
  o.out_dir = path("run");
  o.steps = 150;
  o.batch = 8;
  o.seq_len = 64;
  o.lr = 3e-3;
  o.warmup = 10;
  o.eval_interval = 50;
  o.quiet = true;
  o.threads = 1;
  const TrainSummary s = train(load_config_file(kFixtureConfig), o);

  // Unigram entropy of the validation bytes: the loss of the best model that
  // ignores context.
  auto tok = make_byte_tokenizer();
  DatasetOptions d;
  d.split_seed = o.seed;
  const TokenDataset ds = TokenDataset::build(o.data, *tok, d);
  std::map<int32_t, double> counts;
  for (int32_t t : ds.val()) counts[t] += 1;
  double h = 0;
  for (auto& [t, c] : counts) h -= c / ds.val().size() * std::log(c / ds.val().size());
  EXPECT_GT(h, 2.0);
  EXPECT_LT(s.best_val_loss, 0.5 * h) << "unigram entropy " << h;
  EXPECT_GT(s.final_val_acc, 0.6);

  for (const char* f : {"summary.json", "metrics.jsonl", "latest", "best/model.safetensors", "best/tokenizer.model"})
    EXPECT_TRUE(fs::exists(path("run/") + f)) << f;
  const json summary = json::parse(std::ifstream(path("run/summary.json")));
  for (const char* k : {"params", "best_val_loss", "best_val_ppl", "final_val_loss", "final_val_ppl",
                        "final_val_accuracy", "train_tokens_per_s", "wall_s"})
    EXPECT_TRUE(summary.contains(k)) << k;
  int evals = 0, logs = 0;
  for (const json& r : read_jsonl(path("run/metrics.jsonl"))) {
    evals += r.contains("val_loss");
    logs += r.contains("loss");
  }
  EXPECT_EQ(evals, 3);
  EXPECT_EQ(logs, 15);

  // `hymba eval` on the run reproduces the validation figures.
  auto ev = test::run_cli_stdout("--threads 1 eval --ckpt " + path("run") + " --max-windows 64 --json");
  ASSERT_EQ(ev.exit_code, 0) << ev.errors;
  EXPECT_NEAR(json::parse(ev.output)["loss"].get<double>(), s.final_val_loss, 1e-6);
}

TEST_F(Train, ResumeAfterSigkillGivesBitIdenticalLosses) {
  const int kSteps = 300;
  auto whole = run_cli(train_args(path("a"), kSteps));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  // Same run, killed with SIGKILL once its first checkpoint exists.
  const std::string cmd = std::string(HYMBA_CLI_PATH) + " " + train_args(path("b"), kSteps);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(path("b/latest")) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  ASSERT_FALSE(fs::exists(path("b/summary.json")));

  auto resumed = run_cli(train_args(path("b"), kSteps) + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  std::vector<json> a = read_jsonl(path("a/metrics.jsonl")), b = read_jsonl(path("b/metrics.jsonl"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]["step"], b[i]["step"]);
    if (a[i].contains("loss")) {
      ASSERT_EQ(a[i]["loss"].dump(), b[i]["loss"].dump()) << "step " << a[i]["step"];
    }
    if (a[i].contains("val_loss")) {
      ASSERT_EQ(a[i]["val_loss"].dump(), b[i]["val_loss"].dump()) << "step " << a[i]["step"];
    }
  }
}

// --recompute changes memory and time, not the run: the same losses bit for
// bit (dropout on), and a resume may switch it either way.
TEST_F(Train, RecomputedActivationsTrainTheSameRun) {
  ASSERT_EQ(run_cli(train_args(path("kept"), 12)).exit_code, 0);
  ASSERT_EQ(run_cli(train_args(path("recomputed"), 6) + " --recompute").exit_code, 0);
  const auto resumed = run_cli(train_args(path("recomputed"), 12) + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto losses = [&](const std::string& run) {
    std::vector<double> out;
    for (const json& r : read_jsonl(path(run + "/metrics.jsonl")))
      if (r.contains("loss")) out.push_back(r["loss"].get<double>());
    return out;
  };
  EXPECT_EQ(losses("recomputed"), losses("kept"));
  EXPECT_EQ(losses("kept").size(), 12u);
  const json kept = json::parse(std::ifstream(path("kept/summary.json")));
  const json recomputed = json::parse(std::ifstream(path("recomputed/summary.json")));
  EXPECT_EQ(recomputed["final_val_loss"], kept["final_val_loss"]);
  // The sharded gradient (--grad-shards) recomputes the same way.
  ASSERT_EQ(run_cli(train_args(path("shards"), 4) + " --grad-shards 2").exit_code, 0);
  ASSERT_EQ(run_cli(train_args(path("shards_recomputed"), 4) + " --grad-shards 2 --recompute").exit_code, 0);
  EXPECT_EQ(losses("shards_recomputed"), losses("shards"));
}

TEST_F(Train, ProfileReportsTheStepsAndTheirProducts) {
  const auto plain = run_cli(train_args(path("plain"), 5));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto run = run_cli(train_args(path("profiled"), 5) + " --profile");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json plain_summary = json::parse(std::ifstream(path("plain/summary.json")));
  EXPECT_FALSE(plain_summary.contains("profile"));
  const json p = json::parse(std::ifstream(path("profiled/summary.json")))["profile"];
  EXPECT_EQ(p["steps"], 3);  // the first two steps are left out
  EXPECT_EQ(p["precision"], "f32");
  const double step = p["step_s"], products = p["products_s"];
  EXPECT_GT(products, 0.0);
  EXPECT_LT(products, step);
  EXPECT_NEAR(p["gradients_s"].get<double>() + p["optimizer_s"].get<double>(), step, 1e-3 * step + 1e-4);
  EXPECT_NEAR(p["forward_s"].get<double>() + p["backward_s"].get<double>(), p["gradients_s"].get<double>(), 1e-9);
  EXPECT_NEAR(p["products_share"].get<double>(), products / step, 1e-9);
  EXPECT_GT(p["peak_gflops"].get<double>(), 0.0);
  double shape_seconds = 0.0;
  for (const json& s : p["shapes"]) shape_seconds += s["seconds_per_step"].get<double>();
  EXPECT_NEAR(shape_seconds, products, 1e-9);
  // Profiling only watches: the run is the same.
  auto losses = [&](const std::string& name) {
    std::vector<double> out;
    for (const json& r : read_jsonl(path(name + "/metrics.jsonl")))
      if (r.contains("loss")) out.push_back(r["loss"].get<double>());
    return out;
  };
  EXPECT_EQ(losses("profiled"), losses("plain"));
}

TEST_F(Train, BadInputGivesOneLineErrors) {
  std::ofstream(path("empty.txt")) << "";
  auto empty = run_cli(train_args(path("r1"), 5, path("empty.txt")));
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("empty.txt"), std::string::npos) << empty.output;
  EXPECT_EQ(test::count_lines(empty.output), 1) << empty.output;

  auto missing = run_cli(train_args(path("r2"), 5, path("nothere.txt")));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("nothere.txt"), std::string::npos) << missing.output;

  auto no_run = run_cli(train_args(path("r3"), 5) + " --resume");
  EXPECT_NE(no_run.exit_code, 0);
  EXPECT_NE(no_run.output.find("--resume"), std::string::npos) << no_run.output;

  ASSERT_EQ(run_cli(train_args(path("r4"), 10)).exit_code, 0);
  auto again = run_cli(train_args(path("r4"), 20));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  auto changed = run_cli(train_args(path("r4"), 20) + " --resume --batch 2");
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_NE(changed.output.find("batch"), std::string::npos) << changed.output;
  // Many changes at once: the first three and a count, on one short line.
  auto many = run_cli(train_args(path("r4"), 20) + " --resume --beta1 0.8 --beta2 0.9 --grad-clip 0.5 --weight-decay 0.2 --grad-accum 2");
  EXPECT_NE(many.exit_code, 0);
  EXPECT_NE(many.output.find("and 2 more"), std::string::npos) << many.output;
  EXPECT_EQ(test::count_lines(many.output), 1) << many.output;
  EXPECT_LT(many.output.size(), 400u) << many.output;

  auto bad_flag = run_cli(train_args(path("r5"), 5) + " --lr -1");
  EXPECT_NE(bad_flag.exit_code, 0);
  EXPECT_NE(bad_flag.output.find("--lr"), std::string::npos) << bad_flag.output;
}

// Seed 001's tokenizer (HF ByteLevel BPE) as a run's own: trained by the run,
// kept in every checkpoint as tokenizer.json + tokenizer_config.json, and
// reloaded with the same ids by resume, generate and eval.
TEST_F(Train, ByteLevelBpeTokenizerTravelsWithTheRun) {
  const std::string flags = " --tokenizer-type byte-level-bpe --tokenizer-vocab 300 --tokenizer-corpus-alphabet";
  const auto first = run_cli(train_args(path("run"), 10) + flags);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const std::string& d : {resolve_checkpoint(path("run")), path("run/best")}) {
    EXPECT_TRUE(fs::exists(d + "/tokenizer.json")) << d;
    EXPECT_TRUE(fs::exists(d + "/tokenizer_config.json")) << d;
    EXPECT_FALSE(fs::exists(d + "/tokenizer.model")) << d;
  }

  // The same tokenizer trained directly: identical ids after the reload.
  TokenizerTrainOptions t;
  t.kind = TokenizerKind::kByteLevelBpe;
  t.vocab_size = 300;
  t.corpus_alphabet = true;
  const auto fresh = train_tokenizer(read_documents(path("toy.txt")), t);
  const CheckpointTokenizer saved = load_checkpoint_tokenizer(resolve_checkpoint(path("run")));
  EXPECT_EQ(fs::path(saved.path).filename(), "tokenizer.json");
  const std::string text = "the cat sees a book.\nmy friend helps the teacher. Zo\xC3\xAB!";
  EXPECT_EQ(saved.tokenizer->encode(text), fresh->encode(text));
  EXPECT_EQ(saved.tokenizer->vocab_size(), fresh->vocab_size());
  EXPECT_EQ(saved.tokenizer->fingerprint(), fresh->fingerprint());
  EXPECT_LE(fresh->vocab_size(), 300);
  // Merges happened (fewer ids than bytes), and the seed's special tokens
  // came back from tokenizer_config.json.
  EXPECT_LT(fresh->encode("the cat sees the ball.").size(), 12u);
  EXPECT_EQ(saved.tokenizer->unk_id(), 0);
  EXPECT_EQ(saved.tokenizer->pad_id(), 1);
  EXPECT_EQ(saved.tokenizer->bos_id(), 2);
  EXPECT_EQ(saved.tokenizer->eos_id(), 3);
  // The corpus alphabet: bytes the corpus never has encode to <unk>, as HF's.
  const std::vector<int32_t> zoe = saved.tokenizer->encode("Z");
  EXPECT_EQ(zoe, std::vector<int32_t>{0});
  EXPECT_EQ(load_config_file(resolve_checkpoint(path("run")) + "/config.json").vocab_size, fresh->vocab_size());

  // Resume reloads it from the checkpoint; a changed tokenizer setting is refused by name.
  const auto changed = run_cli(train_args(path("run"), 20) +
                               " --tokenizer-type byte-level-bpe --tokenizer-vocab 300 --resume");
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_NE(changed.output.find("--tokenizer-corpus-alphabet"), std::string::npos) << changed.output;
  EXPECT_EQ(test::count_lines(changed.output), 1) << changed.output;
  const auto resumed = run_cli(train_args(path("run"), 20) + flags + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(fs::path(resolve_checkpoint(path("run"))).filename(), "ckpt-20");
  EXPECT_EQ(load_checkpoint_tokenizer(resolve_checkpoint(path("run"))).tokenizer->encode(text), fresh->encode(text));

  const auto gen = run_cli("--threads 1 generate --ckpt " + path("run") + " --prompt 'the cat' --max-new-tokens 6 --seed 1");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_NE(gen.output.find("the cat"), std::string::npos) << gen.output;
  const auto ev = run_cli("--threads 1 eval --ckpt " + path("run") + " --data " + path("toy.txt"));
  ASSERT_EQ(ev.exit_code, 0) << ev.output;

  const auto bad = run_cli(train_args(path("bad"), 5) + " --tokenizer-type byte-level");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(test::count_lines(bad.output), 1) << bad.output;
  EXPECT_NE(bad.output.find("--tokenizer-type"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("byte-level-bpe"), std::string::npos) << bad.output;
}

TEST_F(Train, CorruptCheckpointIsReportedByName) {
  ASSERT_EQ(run_cli(train_args(path("r"), 10)).exit_code, 0);
  const std::string weights = resolve_checkpoint(path("r")) + "/model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  auto r = run_cli(train_args(path("r"), 20) + " --resume");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
  auto ev = run_cli("--threads 1 eval --ckpt " + path("r"));
  EXPECT_NE(ev.exit_code, 0);
  EXPECT_NE(ev.output.find("model.safetensors"), std::string::npos) << ev.output;
}

}  // namespace
}  // namespace hymba
