// hymba under mpirun (docs/training.md, "Several processes: MPI"): two ranks
// train tiny models data-parallel and split suites. Every test runs the CLI
// through `mpirun -np 2` and skips, saying why, where this build has no MPI
// or mpirun is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::read_jsonl;
using test::run_cli;

const std::string kFixtureConfig = std::string(HYMBA_FIXTURES_DIR) + "/tiny_hybrid/config.json";

// Why MPI tests cannot run here ("" when they can).
std::string why_no_mpi() {
  if (!dist::mpi_built()) return "this build has no MPI (install libopenmpi-dev and reconfigure)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) return "mpirun is not installed (openmpi-bin)";
  return "";
}

// Settings a container needs: no CPU binding (ranks share the cores ctest
// gives), shared memory between local ranks without CMA (ptrace is often off).
std::string mpirun(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader "
         "--mca btl_vader_single_copy_mechanism none -np " +
         std::to_string(ranks);
}

#define SKIP_WITHOUT_MPI()                                    \
  do {                                                        \
    if (const std::string why = why_no_mpi(); !why.empty()) { \
      GTEST_SKIP() << "skipped: " << why;                     \
    }                                                         \
  } while (0)

void write_toy_corpus(const fs::path& path, int sentences, uint64_t seed) {
  const char* subj[] = {"the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher"};
  const char* verb[] = {"sees", "likes", "finds", "wants", "helps", "watches"};
  const char* obj[] = {"the ball", "a red apple", "the green tree", "some water", "the little house", "a book"};
  Rng r(seed);
  std::ofstream out(path);
  for (int i = 0; i < sentences; ++i)
    out << subj[r.below(6)] << ' ' << verb[r.below(6)] << ' ' << obj[r.below(6)] << ".\n";
}

double relative(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(a), 1e-12); }

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_mpi_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_toy_corpus(dir_ / "toy.txt", 1500, 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // One thread per rank and per process: the 2-rank and 1-process runs are compared.
  // The global batch is 4 sequences: 2 on each of two ranks.
  std::string train_args(const std::string& out, int steps, int eval_interval = 4, const std::string& extra = "",
                         bool quiet = true, const std::string& lr = "3e-3") const {
    return "--threads 1 train --config " + kFixtureConfig + " --data " + path("toy.txt") + " --out " + path(out) +
           " --steps " + std::to_string(steps) + " --eval-interval " + std::to_string(eval_interval) +
           " --batch 4 --seq-len 32 --lr " + lr + " --warmup 5 --log-interval 1 --eval-windows 8 " +
           (quiet ? "--quiet " : "") + extra;
  }
  fs::path dir_;
};

TEST_F(Mpi, InfoNamesEveryRank) {
  SKIP_WITHOUT_MPI();
  const auto plain = run_cli("info");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("MPI      : built; one process"), std::string::npos) << plain.output;
  const auto two = run_cli("info --json", mpirun(2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("\"ranks\": 2"), std::string::npos) << two.output;
}

TEST_F(Mpi, TwoRanksMatchOneProcessAndRepeatBitIdentically) {
  SKIP_WITHOUT_MPI();
  // Rounding differences (each rank sums its own rows) grow as training goes
  // on: AdamW turns a near-zero gradient's rounding into a whole lr-sized
  // step. The curves agree to 1e-6 over the first steps, then drift (here
  // to ~1e-5 by step 8; docs/training.md).
  const int kSteps = 8;
  const auto one = run_cli(train_args("one", kSteps));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = run_cli(train_args("two", kSteps), mpirun(2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto again = run_cli(train_args("again", kSteps), mpirun(2));
  ASSERT_EQ(again.exit_code, 0) << again.output;

  const std::vector<json> a = read_jsonl(path("one/metrics.jsonl")), b = read_jsonl(path("two/metrics.jsonl")),
                          c = read_jsonl(path("again/metrics.jsonl"));
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps + 2));  // every step, and two evaluations
  ASSERT_EQ(b.size(), a.size());
  ASSERT_EQ(c.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]["step"], b[i]["step"]);
    for (const char* key : {"loss", "val_loss", "val_accuracy", "grad_norm"}) {
      if (!a[i].contains(key)) continue;
      // The same global batch: the ranks' shares sum to the single process's
      // batch. The gradient norm is compared where the weights are still equal.
      const bool norm = key == std::string("grad_norm");
      const double tolerance = norm ? 1e-5 : a[i]["step"].get<int>() <= 5 ? 1e-6 : 1e-4;
      if (!norm || a[i]["step"] == 1) {
        EXPECT_LE(relative(a[i][key].get<double>(), b[i][key].get<double>()), tolerance)
            << key << " at step " << a[i]["step"];
      }
      // The same two ranks again: sums in rank order, so every bit repeats.
      EXPECT_EQ(b[i][key].dump(), c[i][key].dump()) << key << " at step " << b[i]["step"];
    }
  }
  EXPECT_EQ(read_file(path("two/ckpt-8/model.safetensors")), read_file(path("again/ckpt-8/model.safetensors")));
  EXPECT_EQ(read_file(path("two/ckpt-8/optimizer.safetensors")), read_file(path("again/ckpt-8/optimizer.safetensors")));

  // Rank 0 alone reports and writes: one summary line, the files of a
  // one-process run, and a summary that says how many ranks trained.
  EXPECT_EQ(test::count_lines(two.output), test::count_lines(one.output)) << two.output;
  std::vector<std::string> files_one, files_two;
  for (const auto& e : fs::recursive_directory_iterator(path("one")))
    files_one.push_back(fs::relative(e.path(), path("one")).string());
  for (const auto& e : fs::recursive_directory_iterator(path("two")))
    files_two.push_back(fs::relative(e.path(), path("two")).string());
  std::sort(files_one.begin(), files_one.end());
  std::sort(files_two.begin(), files_two.end());
  EXPECT_EQ(files_one, files_two);
  const json summary = json::parse(read_file(path("two/summary.json")));
  EXPECT_EQ(summary["ranks"], 2);
  EXPECT_GE(summary["comm_share"].get<double>(), 0.0);
  EXPECT_LE(summary["comm_share"].get<double>(), 1.0);
  EXPECT_FALSE(json::parse(read_file(path("one/summary.json"))).contains("ranks"));
}

TEST_F(Mpi, GradShardsMakeTwoRanksBitIdenticalToOneProcessAtEveryStep) {
  SKIP_WITHOUT_MPI();
  // --grad-shards: the gradient of every batch is the same tree of shard
  // gradients whether one process or two ranks compute the shards.
  auto compare = [&](const std::string& one_dir, const std::string& two_dir, const std::string& extra, int steps) {
    const auto one = run_cli(train_args(one_dir, steps, 10, extra));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto two = run_cli(train_args(two_dir, steps, 10, extra), mpirun(2));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const std::vector<json> a = read_jsonl(path(one_dir + "/metrics.jsonl")),
                            b = read_jsonl(path(two_dir + "/metrics.jsonl"));
    ASSERT_EQ(a.size(), b.size());
    int losses = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i]["step"], b[i]["step"]);
      for (const char* key : {"loss", "loss_avg", "grad_norm", "val_loss", "val_accuracy"}) {
        if (!a[i].contains(key)) continue;
        EXPECT_EQ(a[i][key].dump(), b[i][key].dump()) << key << " at step " << a[i]["step"] << " (" << extra << ")";
        losses += key == std::string("loss");
      }
    }
    EXPECT_EQ(losses, steps);
    const std::string last = "/ckpt-" + std::to_string(steps);
    EXPECT_EQ(read_file(path(one_dir + last + "/model.safetensors")),
              read_file(path(two_dir + last + "/model.safetensors")));
    EXPECT_EQ(read_file(path(one_dir + last + "/optimizer.safetensors")),
              read_file(path(two_dir + last + "/optimizer.safetensors")));
  };
  compare("one", "two", "--grad-shards 2", 24);
  // Two shards per rank and two micro-batches: leaves in a deeper tree;
  // dropout masks keyed by the shard, not the rank.
  compare("one4", "two4", "--grad-shards 4 --grad-accum 2 --dropout 0.1", 6);
}

// The pid of `rank` among the processes mpirun started for the run in `out`.
pid_t find_rank(int rank, const std::string& out) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env_file(e.path() / "environ"), cmd_file(e.path() / "cmdline");
    const std::string env((std::istreambuf_iterator<char>(env_file)), std::istreambuf_iterator<char>());
    const std::string cmd((std::istreambuf_iterator<char>(cmd_file)), std::istreambuf_iterator<char>());
    const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + std::string(1, '\0');
    if (cmd.find(out) != std::string::npos && cmd.find("train") != std::string::npos &&
        env.find(wanted) != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

TEST_F(Mpi, KilledRankStopsTheRunAndItsCheckpointResumesInOneProcess) {
  SKIP_WITHOUT_MPI();
  const int kSteps = 400;
  const std::string extra = "--save-interval 10";
  test::CliResult killed;
  // A low lr: the rounding drift between 2 ranks and 1 process stays far below
  // the tolerance below for the steps before the checkpoint.
  const std::string lr = "3e-4";
  std::thread run([&] { killed = run_cli(train_args("run", kSteps, 1000, extra, true, lr), mpirun(2)); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t victim = -1;
  while (std::chrono::steady_clock::now() < deadline && (victim < 0 || !fs::exists(path("run/latest")))) {
    if (victim < 0) victim = find_rank(1, path("run"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGKILL);
  run.join();
  ASSERT_NE(killed.exit_code, 0) << "the run finished before rank 1 could be killed";
  ASSERT_FALSE(fs::exists(path("run/summary.json")));
  // Rank 0 names the rank that died and the checkpoint to resume, in one
  // line, before mpirun's own report.
  std::string latest = read_file(path("run/latest"));
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' ')) latest.pop_back();
  ASSERT_EQ(latest.rfind("ckpt-", 0), 0u) << latest;
  const std::string line = "hymba (rank 0 of 2): error: rank 1 (host ";
  const size_t at = killed.output.find(line);
  ASSERT_NE(at, std::string::npos) << killed.output;
  const std::string said = killed.output.substr(at, killed.output.find('\n', at) - at);
  EXPECT_NE(said.find(") stopped: its process (pid " + std::to_string(victim) + ") is gone; the last checkpoint " +
                      path("run/" + latest) + " is intact"),
            std::string::npos)
      << said;

  // The last checkpoint is whole: one process resumes it and finishes the run.
  const int64_t saved_step = std::stoll(latest.substr(5));
  const auto resumed = run_cli(train_args("run", kSteps, 1000, extra + " --resume", false, lr));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("trained on 2 MPI rank(s), now 1"), std::string::npos) << resumed.output;
  const auto reference = run_cli(train_args("reference", kSteps, 1000, extra, true, lr));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::vector<json> a = read_jsonl(path("reference/metrics.jsonl")), b = read_jsonl(path("run/metrics.jsonl"));
  ASSERT_EQ(a.size(), b.size());  // every step once: the records after the checkpoint were dropped and redone
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i]["step"], b[i]["step"]);
  // Not bit-identical (the sums split differently), but the same run: the
  // steps after the checkpoint (its weights, then its optimizer moments)
  // agree closely with an uninterrupted run's.
  for (int64_t step = saved_step + 1; step <= saved_step + 3; ++step) {
    const size_t i = static_cast<size_t>(step - 1);
    ASSERT_EQ(b[i]["step"], step);
    EXPECT_LE(relative(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()), 1e-4) << "step " << step;
  }
}

TEST_F(Mpi, HungRankIsNamedAfterTheRankTimeout) {
  SKIP_WITHOUT_MPI();
  test::CliResult hung;
  std::thread run([&] {
    hung = run_cli(train_args("run", 400, 1000, "--save-interval 5"),
                   "HYMBA_RANK_TIMEOUT=2 " + mpirun(2) + " -x HYMBA_RANK_TIMEOUT");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t victim = -1;
  while (std::chrono::steady_clock::now() < deadline && (victim < 0 || !fs::exists(path("run/latest")))) {
    if (victim < 0) victim = find_rank(1, path("run"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGSTOP);  // alive but silent, as a rank stuck on a dead file system
  run.join();
  ::kill(victim, SIGKILL);  // in case the job left it behind
  ASSERT_NE(hung.exit_code, 0) << "the run finished before rank 1 could be stopped";
  EXPECT_NE(hung.output.find("stopped answering: nothing from it for 2 s (HYMBA_RANK_TIMEOUT); the last checkpoint "),
            std::string::npos)
      << hung.output;
  EXPECT_NE(hung.output.find("error: rank 1 (host "), std::string::npos) << hung.output;
}

// A suite's results without the figures that time the run (they differ run to run).
json without_timings(json j) {
  if (j.is_object()) {
    for (const char* key : {"train_tokens_per_s", "train_seconds", "decode_tokens_per_s", "peak_rss_mb", "seconds"})
      j.erase(key);
    for (auto it = j.begin(); it != j.end(); ++it) it.value() = without_timings(it.value());
  } else if (j.is_array()) {
    for (json& v : j) v = without_timings(v);
  }
  return j;
}

TEST_F(Mpi, AblateSuiteSplitOverTwoRanksWritesTheResultsOfOneProcess) {
  SKIP_WITHOUT_MPI();
  const json common = {{"vocab_size", 259}, {"hidden_size", 32}, {"num_attention_heads", 2},
                       {"num_key_value_heads", 2}, {"intermediate_size", 48}};
  json attn = common, mamba = common;
  attn.update(json{{"num_hidden_layers", 1}, {"layer_types", "attention"}});
  mamba.update(json{{"num_hidden_layers", 1}, {"layer_types", "mamba"}, {"intermediate_size", 0},
                    {"num_attention_heads", 0}, {"num_key_value_heads", 0}});
  std::ofstream(path("attn.json")) << attn.dump();
  std::ofstream(path("mamba.json")) << mamba.dump();
  json rows = json::array();
  for (int i = 0; i < 4; ++i)  // rank 0 trains rows 0 and 2, rank 1 rows 1 and 3
    rows.push_back({{"id", "r" + std::to_string(i)},
                    {"name", "Row " + std::to_string(i)},
                    {"config", i % 2 == 0 ? "attn.json" : "mamba.json"},
                    {"overrides", {{"num_hidden_layers", 1 + i / 2}}}});
  const json suite = {{"name", "micro"},
                      {"title", "Micro suite"},
                      {"train", {{"steps", 6}, {"batch", 2}, {"seq_len", 32}, {"eval_interval", 3},
                                 {"eval_windows", 4}, {"warmup", 2}, {"lr", 3e-3}, {"tokenizer", "byte"}}},
                      {"prompts", {"the "}},
                      {"rows", rows}};
  std::ofstream(path("suite.json")) << suite.dump();
  auto command = [&](const std::string& out, const std::string& extra) {
    return "--threads 1 ablate --suite " + path("suite.json") + " --data " + path("toy.txt") + " --out " + path(out) +
           " --sample-tokens 8 --cache-context 64 --no-plots --quiet " + extra;
  };
  const auto one = run_cli(command("one", ""));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = run_cli(command("two", ""), mpirun(2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  // Each row trained alone on one rank, with the same thread count: the same bits.
  const json a = json::parse(read_file(path("one/results.json"))), b = json::parse(read_file(path("two/results.json")));
  ASSERT_EQ(b["rows"].size(), 4u);
  EXPECT_EQ(without_timings(a), without_timings(b));
  EXPECT_EQ(test::count_lines(read_file(path("two/results.csv"))), 5);
  EXPECT_NE(two.output.find("suite micro: 4 run(s) trained"), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("report: "), two.output.rfind("report: ")) << "only rank 0 reports\n" << two.output;

  // Both ranks on every row: data-parallel rows, equal to one process's to rounding.
  const auto shared = run_cli(command("shared", "--ranks-per-row 2"), mpirun(2));
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  const json c = json::parse(read_file(path("shared/results.json")));
  ASSERT_EQ(c["rows"].size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_LE(relative(a["rows"][i]["best_val_loss"].get<double>(), c["rows"][i]["best_val_loss"].get<double>()), 1e-6)
        << a["rows"][i]["id"];

  // With grad_shards in the recipe, data-parallel rows repeat one process's bits.
  json sharded = suite;
  sharded["train"]["grad_shards"] = 2;
  std::ofstream(path("sharded.json")) << sharded.dump();
  auto sharded_command = [&](const std::string& out, const std::string& extra) {
    return "--threads 1 ablate --suite " + path("sharded.json") + " --data " + path("toy.txt") + " --out " +
           path(out) + " --sample-tokens 8 --cache-context 64 --no-plots --quiet " + extra;
  };
  const auto alone = run_cli(sharded_command("sharded_one", ""));
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const auto pair = run_cli(sharded_command("sharded_two", "--ranks-per-row 2"), mpirun(2));
  ASSERT_EQ(pair.exit_code, 0) << pair.output;
  const json d = json::parse(read_file(path("sharded_one/results.json"))),
             e = json::parse(read_file(path("sharded_two/results.json")));
  ASSERT_EQ(e["rows"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d["rows"][i]["best_val_loss"].dump(), e["rows"][i]["best_val_loss"].dump()) << d["rows"][i]["id"];
    EXPECT_EQ(d["rows"][i]["curve"].dump(), e["rows"][i]["curve"].dump()) << d["rows"][i]["id"];
  }
}

TEST_F(Mpi, SynthSuiteSplitOverTwoRanksWritesTheResultsOfOneProcess) {
  SKIP_WITHOUT_MPI();
  const json suite = {
      {"title", "Tiny copy"},
      {"preset", "seed004-selective-copying"},
      {"task", {{"seq_len", 12}, {"num_tokens_to_copy", 3}, {"vocab_size", 8}}},
      {"train", {{"epochs", 2}, {"num_train", 64}, {"num_test", 16}, {"batch_size", 16}, {"lr", 3e-3}}},
      {"model", {{"hidden_size", 16}, {"num_heads", 2}}},
      {"rows",
       {{{"id", "mamba"}, {"model", {{"model", "mamba"}}}},
        {{"id", "hybrid"}, {"model", {{"model", "hybrid"}, {"link", "gated"}, {"trans_layers", 1}, {"mamba_layers", 1}}}},
        {{"id", "mamba-2"}, {"model", {{"model", "mamba"}, {"num_layers", 2}}}}}}};
  std::ofstream(path("synth.json")) << suite.dump();
  auto command = [&](const std::string& out) {
    return "--threads 1 synth --suite " + path("synth.json") + " --out " + path(out) + " --no-plots --quiet";
  };
  const auto one = run_cli(command("one"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = run_cli(command("two") + " --ranks-per-row 1", mpirun(2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const json a = json::parse(read_file(path("one/results.json"))), b = json::parse(read_file(path("two/results.json")));
  ASSERT_EQ(b["rows"].size(), 3u);
  EXPECT_EQ(without_timings(a), without_timings(b));
  EXPECT_EQ(two.output.find("report: "), two.output.rfind("report: ")) << two.output;

  // Both ranks on every row, data-parallel: equal to one process's to rounding.
  const auto shared = run_cli(command("shared") + " --ranks-per-row 2", mpirun(2));
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  const json c = json::parse(read_file(path("shared/results.json")));
  ASSERT_EQ(c["rows"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const json& x = a["rows"][i]["epochs"];
    const json& y = c["rows"][i]["epochs"];
    ASSERT_EQ(x.size(), y.size()) << a["rows"][i]["id"];
    for (size_t e = 0; e < x.size(); ++e)
      for (const char* key : {"train_loss", "eval_loss", "eval_acc"})
        EXPECT_LE(relative(x[e][key].get<double>(), y[e][key].get<double>()), 1e-5)
            << a["rows"][i]["id"] << " epoch " << e + 1 << " " << key;
  }
  const auto bad = run_cli(command("bad") + " --ranks-per-row 3", mpirun(2));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("error: --ranks-per-row 3 must be >= 1 and divide the 2 MPI rank(s)"), std::string::npos)
      << bad.output;
}

TEST_F(Mpi, RefusesABatchSmallerThanTheRanksAndBadRanksPerRow) {
  SKIP_WITHOUT_MPI();
  const auto small = run_cli("--threads 1 train --config " + kFixtureConfig + " --data " + path("toy.txt") + " --out " +
                                 path("small") + " --steps 2 --batch 1 --seq-len 32 --quiet",
                             mpirun(2));
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("error: --batch 1 is smaller than the 2 MPI ranks"), std::string::npos) << small.output;
  EXPECT_FALSE(fs::exists(path("small/metrics.jsonl")));
  const auto uneven = run_cli(train_args("uneven", 2, 4, "--grad-shards 3"));
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_NE(uneven.output.find("error: --grad-shards 3 must be >= 1 and divide --batch 4"), std::string::npos)
      << uneven.output;
  const auto too_few = run_cli(train_args("few", 2, 4, "--grad-shards 1"), mpirun(2));
  EXPECT_NE(too_few.exit_code, 0);
  EXPECT_NE(too_few.output.find("error: --grad-shards 1: the 2 MPI rank(s) must be a power of two that divides it"),
            std::string::npos)
      << too_few.output;
  const auto bad = run_cli("--threads 1 ablate --suite seed-001 --out " + path("suite") + " --ranks-per-row 3", mpirun(2));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("error: --ranks-per-row 3 must be >= 1 and divide the 2 MPI rank(s)"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace hymba
