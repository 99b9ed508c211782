// The hymba binary used as a hostile user would: two trainings on one run
// directory, SIGINT/SIGTERM, resumes that change the recipe, corrupt state
// files, absurd sizes and flags, weights that are not finite. Every case
// must end in a one-line error (or a clean stop), never a crash, a hang or
// silent garbage.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::read_jsonl;
using test::run_cli;
using test::expect_one_line;

const std::string kFixtureConfig = std::string(HYMBA_FIXTURES_DIR) + "/tiny_hybrid/config.json";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A child `hymba ...` with its output in a file; never outlives the test.
class Child {
 public:
  Child(const std::string& args, const std::string& log) {
    const std::string cmd = "exec " + std::string(HYMBA_CLI_PATH) + " " + args + " >" + log + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Waits at most `seconds`; the exit status, 128 + signal if killed, or -1
  // on timeout (the child is then killed).
  int wait(int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

bool wait_for(const std::function<bool()>& cond, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class CliHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream out(path("toy.txt"));
    const char* words[] = {"the cat sees a dog. ", "my friend likes the ball. ", "a bird finds some water. "};
    for (int i = 0; i < 1500; ++i) out << words[(i * 7 + i / 3) % 3] << (i % 5 == 0 ? "\n" : "");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string train_args(const std::string& out, int steps) const {
    return "--threads 1 train --config " + kFixtureConfig + " --data " + path("toy.txt") + " --out " + out +
           " --steps " + std::to_string(steps) +
           " --batch 4 --seq-len 32 --lr 3e-3 --warmup 5 --log-interval 1 --eval-interval 50 --eval-windows 4"
           " --save-interval 1000 --quiet";
  }
  fs::path dir_;
};

TEST_F(CliHostile, SecondTrainingOnOneRunDirectoryIsRefusedNamingTheHolder) {
  Child first(train_args(path("run"), 100000), path("first.log"));
  // The holder writes its pid into the lock file once it holds the lock.
  ASSERT_TRUE(wait_for([&] { return slurp(path("run/train.lock")).find("pid") != std::string::npos; }, 60));
  for (const std::string& extra : {std::string(), std::string(" --resume")}) {
    const auto second = run_cli(train_args(path("run"), 100000) + extra);
    expect_one_line(second, {"another 'hymba train' holds", "pid " + std::to_string(first.pid()), "host", "--out"});
  }
  // The first run is untouched by the attempts: it stops cleanly on SIGINT.
  ASSERT_TRUE(wait_for([&] { return fs::exists(path("run/metrics.jsonl")) && fs::file_size(path("run/metrics.jsonl")) > 0; }, 60));
  ::kill(first.pid(), SIGINT);
  EXPECT_EQ(first.wait(60), 130) << slurp(path("first.log"));
  // Lock released with the process: the run can be resumed now.
  const std::string latest = slurp(path("run/latest"));
  ASSERT_EQ(latest.rfind("ckpt-", 0), 0u) << latest;
  const auto resumed = run_cli(train_args(path("run"), std::stoi(latest.substr(5)) + 2) + " --resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// SIGTERM stops at a step boundary, saves a checkpoint there (between save
// intervals) and exits 143; the resumed run matches an uninterrupted one bit
// for bit. SIGINT likewise with 130.
TEST_F(CliHostile, SignalsSaveACheckpointAndResumeIsBitIdentical) {
  const int kSteps = 400;
  ASSERT_EQ(run_cli(train_args(path("whole"), kSteps)).exit_code, 0);
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string run = path(sig == SIGTERM ? "term" : "int");
    Child child(train_args(run, kSteps), run + ".log");
    ASSERT_TRUE(wait_for([&] { return fs::exists(run + "/metrics.jsonl") && read_jsonl(run + "/metrics.jsonl").size() >= 3; }, 60));
    ::kill(child.pid(), sig);
    const int status = child.wait(60);
    const std::string log = slurp(run + ".log");
    ASSERT_EQ(status, 128 + sig) << log;
    EXPECT_NE(log.find(sig == SIGTERM ? "interrupted by SIGTERM" : "interrupted by SIGINT"), std::string::npos) << log;
    EXPECT_NE(log.find("--resume"), std::string::npos) << log;
    const std::string latest = slurp(run + "/latest");
    ASSERT_EQ(latest.rfind("ckpt-", 0), 0u) << latest;
    const int stopped_at = std::stoi(latest.substr(5));
    EXPECT_GT(stopped_at, 0);
    EXPECT_LT(stopped_at, kSteps);
    EXPECT_NE(log.find("after step " + std::to_string(stopped_at)), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(run + "/summary.json"));

    const auto resumed = run_cli(train_args(run, kSteps) + " --resume");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const auto a = read_jsonl(path("whole/metrics.jsonl")), b = read_jsonl(run + "/metrics.jsonl");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i]["step"], b[i]["step"]);
      for (const char* key : {"loss", "grad_norm", "val_loss"}) {
        if (a[i].contains(key)) {
          ASSERT_EQ(a[i][key].dump(), b[i][key].dump()) << key << " at step " << a[i]["step"];
        }
      }
    }
  }
}

TEST_F(CliHostile, StaleTemporaryFilesAreCleanedAtStart) {
  ASSERT_EQ(run_cli(train_args(path("run"), 5)).exit_code, 0);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = path("run/metrics.jsonl.tmp." + std::to_string(dead));
  std::ofstream(stale) << "half a write";
  const auto r = run_cli(train_args(path("run"), 8) + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(stale));
}

TEST_F(CliHostile, ResumeRefusesAChangedRecipeByName) {
  ASSERT_EQ(run_cli(train_args(path("run"), 10)).exit_code, 0);
  struct Case {
    std::string flags;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"--weight-decay 0.2", {"--weight-decay 0.1 -> 0.2"}},
      {"--weight-decay-scope all", {"--weight-decay-scope \"matrices\" -> \"all\""}},
      {"--data-split chunks-shuffled --batching epochs",
       {"--data-split \"blocks\" -> \"chunks-shuffled\"", "--batching \"random-windows\" -> \"epochs\""}},
      {"--grad-clip 0.5", {"--grad-clip 1.0 -> 0.5"}},
      {"--precision bf16", {"--precision"}},
      {"--beta1 0.8 --beta2 0.9", {"--beta1 0.9 -> 0.8", "--beta2 0.95 -> 0.9"}},
      {"--label-smoothing 0.1", {"--label-smoothing"}},
      {"--dropout 0.2", {"--dropout 0.0 -> 0.2"}},
      {"--min-lr-ratio 0.5", {"--min-lr-ratio"}},
      {"--seed 7", {"--seed 1234 -> 7"}},
      {"--val-fraction 0.2", {"--val-fraction 0.1 -> 0.2"}},
      {"--grad-accum 2", {"--grad-accum 1 -> 2"}},
      {"--tokenizer-type bpe", {"--tokenizer-type \"byte\" -> \"bpe\""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    expect_one_line(run_cli(train_args(path("run"), 20) + " --resume " + c.flags), c.parts);
  }
  // Another model than the run's.
  const auto model = run_cli("--threads 1 train --preset mamba-only --scale tiny --data " + path("toy.txt") + " --out " +
                             path("run") + " --steps 20 --batch 4 --seq-len 32 --lr 3e-3 --warmup 5 --quiet --resume");
  // The first three differences by name, then a count: one short line.
  expect_one_line(model, {"model hidden_size 16 -> ", "more (resume with"});
  // A different thread count is allowed, with a note that results are not
  // bit-identical to an uninterrupted run.
  std::string args = train_args(path("run"), 20);
  args.replace(args.find("--threads 1"), 11, "--threads 2");
  args.replace(args.find(" --quiet"), 8, " --plain-progress");
  const auto threads = run_cli(args + " --resume");
  EXPECT_EQ(threads.exit_code, 0) << threads.output;
  EXPECT_NE(threads.output.find("not bit-identical"), std::string::npos) << threads.output;
  // A --tokenizer file is compared by content: the run's own passes, another is refused.
  const std::string own = path("run/ckpt-20/tokenizer.model");
  const auto same = run_cli(train_args(path("run"), 22) + " --resume --tokenizer " + own);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  ASSERT_EQ(run_cli("tokenizer train --type bpe --vocab-size 300 --data " + path("toy.txt") + " --out " +
                    path("other.model")).exit_code, 0);
  expect_one_line(run_cli(train_args(path("run"), 24) + " --resume --tokenizer " + path("other.model")),
                  {"--tokenizer " + path("other.model") + " is not the run's tokenizer"});
  // A checkpoint whose tokenizer outgrew its model (a hand-copied file) is
  // refused before any step, naming both files.
  const std::string latest_tokenizer = path("run/ckpt-22/tokenizer.model");  // the resumed run's own
  fs::copy_file(path("other.model"), latest_tokenizer, fs::copy_options::overwrite_existing);
  // (The --tokenizer resume above kept the run's recorded tokenizer recipe:
  // this plain --resume gets past the recipe check to the tokenizer.)
  expect_one_line(run_cli(train_args(path("run"), 24) + " --resume"),
                  {latest_tokenizer + ": the tokenizer has 300 tokens but the model has only", "config.json"});
}

TEST_F(CliHostile, CorruptTrainStateIsOneLineNamingFileAndField) {
  ASSERT_EQ(run_cli(train_args(path("run"), 10)).exit_code, 0);
  const std::string state_path = path("run/ckpt-10/train_state.json");
  const json good = json::parse(slurp(state_path));
  struct Case {
    std::function<void(json&)> corrupt;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("step"); }, {"train_state.json", "field 'step' is missing"}},
      {[](json& j) { j["step"] = "ten"; }, {"field 'step' must be an integer"}},
      {[](json& j) { j["tokens"] = json::array(); }, {"field 'tokens'"}},
      {[](json& j) { j.erase("run"); }, {"field 'run' is missing"}},
      {[](json& j) { j["run"]["batch"] = "four"; }, {"--batch \"four\" -> 4"}},
      {[](json& j) { j["best_val_loss"] = "low"; }, {"field 'best_val_loss' must be a number or null"}},
  };
  for (const Case& c : cases) {
    json j = good;
    c.corrupt(j);
    std::ofstream(state_path) << j.dump();
    SCOPED_TRACE(j.dump());
    expect_one_line(run_cli(train_args(path("run"), 20) + " --resume"), c.parts);
  }
  std::ofstream(state_path) << R"({"step": 10, "step": 11})";
  expect_one_line(run_cli(train_args(path("run"), 20) + " --resume"), {"train_state.json", "key 'step' twice"});
  std::ofstream(state_path) << R"({"step": 1e400})";
  expect_one_line(run_cli(train_args(path("run"), 20) + " --resume"), {"train_state.json", "field 'step'", "1e400"});
  // eval reads the same file.
  std::ofstream(state_path) << R"({"run": {"data": 5}})";
  expect_one_line(run_cli("--threads 1 eval --ckpt " + path("run")), {"train_state.json", "field 'run.data'"});
}

TEST_F(CliHostile, ValidationSplitShorterThanSeqLenFailsBeforeTraining) {
  // toy.txt: about 37 KB, so a tenth held out is shorter than 8000 tokens.
  const auto r = run_cli("--threads 1 train --config " + kFixtureConfig + " --data " + path("toy.txt") + " --out " +
                         path("run") + " --steps 5 --batch 1 --seq-len 8000 --quiet");
  expect_one_line(r, {"--seq-len 8000", "validation split", "--val-fraction"});
  EXPECT_FALSE(fs::exists(path("run/latest")));
  EXPECT_FALSE(fs::exists(path("run/metrics.jsonl")));
}

TEST_F(CliHostile, IntegerFlagsAndNamesAreReportedForWhatTheyAre) {
  const std::string base = train_args(path("run"), 5);
  for (const std::string flag : {"--steps 1e12", "--batch 2.5", "--seq-len 12x"}) {
    const auto r = run_cli(base + " " + flag);
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.output.find("is not an integer"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("not in range"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(flag.substr(0, flag.find(' '))), std::string::npos) << r.output;
  }
  const auto range = run_cli(base + " --batch 0");
  EXPECT_NE(range.output.find("not in range"), std::string::npos) << range.output;  // a real range error stays one
  // Bounds as a person writes them, not "0.000000 to 1000000.000000".
  const auto temperature = run_cli("generate --ckpt x --temperature -1");
  EXPECT_NE(temperature.output.find("--temperature: Value -1 not in range 0 to 1000000"), std::string::npos)
      << temperature.output;
  const auto classify = run_cli("classify suite --data x --out y --val-fraction 0.95");
  EXPECT_NE(classify.output.find("not in range 0.001 to 0.9"), std::string::npos) << classify.output;
  expect_one_line(run_cli(base + " --tokenizer-type foo"), {"--tokenizer-type 'foo'"});
  EXPECT_NE(run_cli("--threads 1.5 info").output.find("not an integer"), std::string::npos);
}

TEST_F(CliHostile, OversizedModelsAndRunsAreRefusedBeforeAllocating) {
  // Products that overflow 64 bits: refused naming the fields (was a segfault).
  std::ofstream(path("huge_vocab.json"))
      << R"({"vocab_size": 9223372036854775807, "hidden_size": 64, "num_hidden_layers": 1, "layer_types": "attention",
             "num_attention_heads": 4, "num_key_value_heads": 4})";
  expect_one_line(run_cli("init --config " + path("huge_vocab.json") + " --out " + path("ck")),
                  {"huge_vocab.json", "'vocab_size'", "<= 16777216"});
  std::ofstream(path("wrap.json"))
      << R"({"vocab_size": 4611686018427387904, "hidden_size": 4, "num_hidden_layers": 1, "layer_types": "attention",
             "num_attention_heads": 2, "num_key_value_heads": 2})";
  expect_one_line(run_cli("info --config " + path("wrap.json")), {"wrap.json", "'vocab_size'"});
  EXPECT_FALSE(fs::exists(path("ck")));
  std::ofstream(path("wide_kv.json"))
      << R"({"hidden_size": 64, "num_hidden_layers": 2, "layer_types": "attention", "num_attention_heads": 2,
             "num_key_value_heads": 2, "qk_head_dim": 1048576, "v_head_dim": 1048576})";
  expect_one_line(run_cli("info --config " + path("wide_kv.json") + " --seq-len 1099511627776"),
                  {"the cache at 1099511627776 tokens (--seq-len)", "overflows"});
  // Sizes that fit 64 bits but not this machine: refused with the figure.
  std::ofstream(path("wide.json"))
      << R"({"hidden_size": 1000000, "num_hidden_layers": 1, "layer_types": "mamba", "num_attention_heads": 0})";
  expect_one_line(run_cli("init --config " + path("wide.json") + " --out " + path("ck")),
                  {"the model needs about", "TiB", "available", "hidden_size"});
  expect_one_line(run_cli("--threads 1 train --config " + kFixtureConfig + " --data " + path("toy.txt") + " --out " +
                          path("run") + " --batch 1048576 --seq-len 16777216"),
                  {"training without --recompute needs about", "activations for --batch 1048576 x --seq-len 16777216", "lower --batch or --seq-len"});
  // $HYMBA_MAX_MEMORY caps what counts as available.
  expect_one_line(run_cli(train_args(path("run"), 5), "env HYMBA_MAX_MEMORY=256K"),
                  {"training without --recompute needs about", "256.00 KiB is available"});
  // Generation: caches for --batch x (prompt + --max-new-tokens).
  ASSERT_EQ(run_cli(train_args(path("gen"), 3)).exit_code, 0);
  expect_one_line(run_cli("--threads 1 generate --ckpt " + path("gen") + " --prompt hi --batch 4096 --max-new-tokens 16777216"),
                  {"generate needs about", "--max-new-tokens 16777216", "lower --max-new-tokens or --batch"});
  expect_one_line(run_cli("--threads 1 bench infer --ckpt " + path("gen") + " --batch 4096 --prompt-len 16777216"),
                  {"bench infer needs about", "lower"});
  expect_one_line(run_cli("--threads 1 eval --ckpt " + path("gen") + " --batch 1048576 --seq-len 16777216"),
                  {"eval needs about", "--batch"});
}

// Rewrites every float of a checkpoint's weights.
void fill_weights(const std::string& path, float value) {
  std::string bytes = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  for (size_t at = 8 + n; at + 4 <= bytes.size(); at += 4) std::memcpy(&bytes[at], &value, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Rewrites the floats of the tensors whose name contains `part`; how many it rewrote.
int fill_tensors(const std::string& path, const std::string& part, float value) {
  std::string bytes = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  const json header = json::parse(bytes.substr(8, n));
  int filled = 0;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__" || it.key().find(part) == std::string::npos) continue;
    const size_t begin = 8 + n + it.value()["data_offsets"][0].get<size_t>();
    const size_t end = 8 + n + it.value()["data_offsets"][1].get<size_t>();
    for (size_t at = begin; at + 4 <= end; at += 4) std::memcpy(&bytes[at], &value, 4);
    ++filled;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return filled;
}

// Finite weights whose logits are ~1e30: the loss is finite (max minus target)
// but its exp is not; "ppl inf" with exit 0 was silent garbage.
TEST_F(CliHostile, EvalRefusesAnOverflowingPerplexityNamingTheCheckpoint) {
  ASSERT_EQ(run_cli(train_args(path("run"), 3)).exit_code, 0);
  fs::copy(path("run/best"), path("huge"), fs::copy_options::recursive);
  ASSERT_EQ(fill_tensors(path("huge/model.safetensors"), "final_layernorm", 1e30f), 1);
  const auto r = run_cli("--threads 1 eval --ckpt " + path("huge") + " --data " + path("toy.txt"));
  expect_one_line(r, {path("huge"), "perplexity overflows", "check the checkpoint"});
  EXPECT_EQ(r.output.find("inf"), std::string::npos) << r.output;
}

TEST_F(CliHostile, WeightsThatAreNotFiniteOrOverflowAreNeverUsedSilently) {
  ASSERT_EQ(run_cli(train_args(path("run"), 3)).exit_code, 0);
  fs::copy(path("run/best"), path("nan"), fs::copy_options::recursive);
  fill_weights(path("nan/model.safetensors"), std::nanf(""));
  const std::string gen = " --prompt hello --max-new-tokens 4";
  expect_one_line(run_cli("--threads 1 generate --ckpt " + path("nan") + gen), {"model.safetensors", "tensor '", "nan", "index 0"});
  expect_one_line(run_cli("--threads 1 eval --ckpt " + path("nan") + " --data " + path("toy.txt")), {"model.safetensors", "nan"});
  // Finite but huge: the arithmetic overflows, which must not come out as
  // NUL bytes or "loss nan" with exit 0.
  fs::copy(path("run/best"), path("big"), fs::copy_options::recursive);
  fill_weights(path("big/model.safetensors"), 1e30f);
  const auto g = run_cli("--threads 1 generate --ckpt " + path("big") + gen);
  expect_one_line(g, {path("big"), "logits", "not finite"});  // names the checkpoint
  EXPECT_EQ(g.output.find('\0'), std::string::npos);
  expect_one_line(run_cli("--threads 1 eval --ckpt " + path("big") + " --data " + path("toy.txt")),
                  {path("big"), "loss is nan"});
  // A checkpoint whose config asks for more memory than there is: the
  // refusal names the checkpoint (the campaign found it did not).
  expect_one_line(run_cli("--threads 1 generate --ckpt " + path("run/best") + gen, "env HYMBA_MAX_MEMORY=16K"),
                  {path("run/best"), "needs about"});
  expect_one_line(run_cli("import --in " + std::string(HYMBA_FIXTURES_DIR) + "/import/hf_gpt_neo --out " + path("imp"),
                          "env HYMBA_MAX_MEMORY=16K"),
                  {"hf_gpt_neo/config.json", "needs about"});
  // Config files with duplicate keys.
  std::ofstream(path("dup.json")) << R"({"hidden_size": 16, "num_hidden_layers": 1, "hidden_size": 32})";
  expect_one_line(run_cli("info --config " + path("dup.json")), {"dup.json", "key 'hidden_size' twice"});
}

// A tokenizer with more ids than the model's rows is refused at load by every
// command that loads a checkpoint, naming both sizes.
TEST_F(CliHostile, ATokenizerLargerThanTheModelIsRefusedByEveryCommand) {
  fs::copy(std::string(HYMBA_FIXTURES_DIR) + "/import/hf_mamba", path("ck"), fs::copy_options::recursive);
  json cfg = json::parse(slurp(path("ck/config.json")));
  cfg["vocab_size"] = 200;
  std::ofstream(path("ck/config.json"), std::ios::trunc) << cfg.dump();
  const std::vector<std::string> parts = {"tokenizer.json", "272 tokens", "200"};
  expect_one_line(run_cli("--threads 1 generate --ckpt " + path("ck") + " --prompt hi --max-new-tokens 2"), parts);
  expect_one_line(run_cli("--threads 1 eval --ckpt " + path("ck") + " --data " + path("toy.txt")), parts);
  expect_one_line(run_cli("--threads 1 train --init " + path("ck") + " --data " + path("toy.txt") + " --out " +
                          path("ft") + " --steps 1 --batch 2 --seq-len 8 --quiet"),
                  parts);
}

// Killed after the last step but before summary.json: --resume writes it.
TEST_F(CliHostile, ResumeOfARunKilledBeforeItsSummaryWritesTheSummary) {
  ASSERT_EQ(run_cli(train_args(path("run"), 3)).exit_code, 0);
  const json written = json::parse(slurp(path("run/summary.json")));
  fs::remove(path("run/summary.json"));
  const auto r = run_cli(train_args(path("run"), 3) + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(path("run/summary.json")));
  const json again = json::parse(slurp(path("run/summary.json")));
  EXPECT_EQ(again["steps"], 3);
  EXPECT_EQ(again["best_val_loss"], written["best_val_loss"]);
  // With the summary in place the run is simply finished.
  expect_one_line(run_cli(train_args(path("run"), 3) + " --resume"), {"--resume", "already finished"});
}

// --ckpt at a suite directory (hymba ablate --out): name its rows.
TEST_F(CliHostile, ASuiteDirectoryAsCheckpointListsItsRows) {
  fs::create_directories(path("suite/runs/hymba"));
  fs::create_directories(path("suite/runs/hymba-nometa"));
  for (const std::string cmd : {"generate --prompt x --ckpt ", "eval --ckpt "})
    expect_one_line(run_cli(cmd + path("suite")), {"a suite directory", "runs/ROW", "hymba, hymba-nometa"});
}

}  // namespace
}  // namespace hymba
