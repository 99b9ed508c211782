// The library facade (api/hymba.h) on a tiny freshly initialised model: the
// same results as the `hymba` command for the same inputs, fine-tuning that
// learns, and one-line errors for bad directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "api/hymba.h"
#include "train/run_state.h"
#include "cli_util.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::run_cli;

const char* kText =
    "the cat sat on the mat. the dog sat on the log. the cat and the dog sat on the mat and the log. "
    "a cat is on a mat; a dog is on a log. the cat sat. the dog sat. the mat and the log.";

// Two equal dataset blocks of 256 byte tokens: whichever `hymba eval` holds
// out, `--split all` (train blocks, then validation blocks) is this text in
// order, as score() reads it.
std::string two_equal_blocks() {
  std::string block;
  while (block.size() < 256) block += kText;
  block.resize(256);
  return block + block;
}

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_threads(2);
    dir_ = fs::temp_directory_path() / ("hymba_api_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    LanguageModel lm = LanguageModel::create("hybrid-official", Scale::kTiny, 5);
    lm.save(path("ck"));
    std::ofstream(path("text.txt")) << two_equal_blocks();
    std::ofstream train(path("train.txt"));  // several dataset blocks: some to train on, one held out
    for (int i = 0; i < 6; ++i) train << kText << "\n";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static fs::path dir_;
};

fs::path Api::dir_;

TEST_F(Api, LoadsWhatItSavedWithItsTokenizer) {
  LanguageModel lm = LanguageModel::load(path("ck"));
  EXPECT_EQ(lm.source(), path("ck"));
  EXPECT_EQ(lm.config().vocab_size, 259);  // the byte tokenizer's
  EXPECT_GT(lm.num_params(), 0);
  EXPECT_EQ(lm.decode(lm.encode("héllo")), "héllo");
}

TEST_F(Api, GenerateIsDeterministicAndEqualsTheCli) {
  LanguageModel lm = LanguageModel::load(path("ck"));
  infer::GenerateOptions opt;
  opt.max_new_tokens = 16;
  opt.sampling.seed = 7;
  opt.stop_at_eos = false;  // a random model may draw eos at once
  std::string streamed;
  const infer::Generation a = lm.generate("the cat", opt, [&](int64_t, std::string_view text) { streamed += text; });
  const infer::Generation b = lm.generate("the cat", opt);
  EXPECT_EQ(a.tokens.size(), 16u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, streamed);
  // Sequence i of a batch samples from stream i: the first equals the single one.
  const auto batch = lm.generate_batch({"the cat", "a dog"}, opt);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].tokens, a.tokens);

  // The CLI stops at eos; the same seed gives the same text up to there.
  opt.stop_at_eos = true;
  const infer::Generation g = lm.generate("the cat", opt);
  const auto cli =
      run_cli("--threads 2 generate --ckpt " + path("ck") + " --prompt 'the cat' --max-new-tokens 16 --seed 7");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(cli.output.substr(0, cli.output.find('\n') + 1), "the cat" + g.text + "\n") << cli.output;
}

TEST_F(Api, ScoreEqualsTheCliEvalAndTheTokenLogprobs) {
  LanguageModel lm = LanguageModel::load(path("ck"));
  ScoreOptions so;
  so.seq_len = 32;
  const EvalResult r = lm.score(two_equal_blocks(), so);
  const auto cli = test::run_cli_stdout("--threads 2 eval --ckpt " + path("ck") + " --data " + path("text.txt") +
                                       " --split all --seq-len 32 --json");
  ASSERT_EQ(cli.exit_code, 0) << cli.errors;
  const nlohmann::json j = nlohmann::json::parse(cli.output);
  EXPECT_EQ(r.tokens, j["tokens"].get<int64_t>());
  EXPECT_NEAR(r.loss, j["loss"].get<double>(), 1e-9);
  CorpusScoreOptions co;
  co.data = path("text.txt");
  co.all_tokens = true;
  co.seq_len = 32;
  EXPECT_EQ(lm.score_corpus(co).result.loss, r.loss);

  // One window over 33 tokens: the mean negative log-prob of its targets.
  const std::vector<int32_t> ids = lm.encode(std::string(kText).substr(0, 33));
  const std::vector<double> lp = lm.token_logprobs(ids);
  ASSERT_EQ(lp.size(), 32u);
  const double mean_nll = -std::accumulate(lp.begin(), lp.end(), 0.0) / 32.0;
  EXPECT_NEAR(lm.score_ids(ids).loss, mean_nll, 1e-4);
  for (double x : lp) EXPECT_LT(x, 0.0);
}

// --weights q8 / q4 score through the cached decoder, window by window: the
// same windows and tokens, a loss close to float32's, and `eval --weights`
// prints what the library computes. The decoder path itself, run with
// float32 weights, gives evaluate()'s loss.
TEST_F(Api, QuantizedScoringGoesThroughTheDecoder) {
  LanguageModel lm = LanguageModel::load(path("ck"));
  CorpusScoreOptions co;
  co.data = path("text.txt");
  co.all_tokens = true;
  co.seq_len = 32;
  const EvalResult f32 = lm.score_corpus(co).result;
  {
    infer::Decoder dec(lm.model());
    infer::SequenceCache cache = dec.new_cache(32);
    const std::vector<int32_t> ids = lm.encode(two_equal_blocks());
    const EvalResult via_decoder = evaluate_logits(
        ids, 32, 0, lm.config().vocab_size,
        [&](std::span<const int32_t> w, std::vector<float>& logits) { dec.prefill(cache, w, &logits); });
    EXPECT_EQ(via_decoder.tokens, f32.tokens);
    EXPECT_NEAR(via_decoder.loss, f32.loss, 1e-4 * f32.loss);
    EXPECT_NEAR(via_decoder.accuracy, f32.accuracy, 0.02);
  }
  for (const char* name : {"q8", "q4"}) {
    SCOPED_TRACE(name);
    lm.set_weight_format(*infer::parse_weight_format(name));
    const EvalResult q = lm.score_corpus(co).result;
    EXPECT_EQ(q.tokens, f32.tokens);
    EXPECT_NE(q.loss, f32.loss);
    EXPECT_NEAR(q.loss, f32.loss, 0.1 * f32.loss);
    const auto cli = test::run_cli_stdout("--threads 2 eval --ckpt " + path("ck") + " --data " + path("text.txt") +
                                         " --split all --seq-len 32 --json --weights " + name);
    ASSERT_EQ(cli.exit_code, 0) << cli.errors;
    const nlohmann::json j = nlohmann::json::parse(cli.output);
    EXPECT_EQ(j["weights"], name);
    EXPECT_NEAR(j["loss"].get<double>(), q.loss, 1e-9);
  }
}

TEST_F(Api, FinetuneLowersTheLossAndWritesARun) {
  LanguageModel lm = LanguageModel::load(path("ck"));
  ScoreOptions so;
  so.seq_len = 32;
  const double before = lm.score(kText, so).loss;
  TrainOptions opt;
  opt.data = path("train.txt");
  opt.out_dir = path("run");
  opt.steps = 8;
  opt.batch = 4;
  opt.seq_len = 32;
  opt.lr = 3e-3;
  opt.warmup = 0;
  opt.val_fraction = 0.2;
  opt.eval_interval = 8;
  opt.quiet = true;
  const TrainSummary s = lm.finetune(opt);
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(fs::path(lm.source()).filename(), "ckpt-8");
  const double after = lm.score(kText, so).loss;
  EXPECT_LT(after, before - 0.1) << before << " -> " << after;
  // It starts from the checkpoint's weights: a step at a negligible rate leaves its loss.
  TrainOptions still = opt;
  still.out_dir = path("run-still");
  still.steps = 1;
  still.lr = 1e-9;
  still.eval_interval = 1;
  finetune(path("ck"), still);
  EXPECT_NEAR(LanguageModel::load(still.out_dir).score(kText, so).loss, before, 1e-4);
  // The run resumes like any other: two more steps, same init recorded.
  opt.steps = 10;
  opt.resume = true;
  EXPECT_EQ(finetune(path("ck"), opt).steps, 10);
  opt.steps = 12;  // the loaded model resumes its run whatever it was loaded from
  EXPECT_EQ(lm.finetune(opt).steps, 12);
  EXPECT_EQ(fs::path(lm.source()).filename(), "ckpt-12");
  // ... and refuses another starting point by name.
  opt.steps = 14;
  expect_error([&] { finetune(path("run/ckpt-12"), opt); }, {"--resume", "--init"});
}

// The library hooks the Python package uses: on_step sees every step (and
// each evaluation); returning false stops the run as SIGINT does.
TEST_F(Api, OnStepSeesEveryStepAndCanStopTheRunWithACheckpoint) {
  TrainOptions opt;
  opt.data = path("train.txt");
  opt.out_dir = path("hooked");
  opt.steps = 6;
  opt.batch = 2;
  opt.seq_len = 16;
  opt.val_fraction = 0.2;
  opt.eval_interval = 2;
  opt.quiet = true;
  opt.catch_signals = false;
  std::vector<int64_t> steps, evals;
  opt.on_step = [&](const nlohmann::json& r) {
    steps.push_back(r["step"].get<int64_t>());
    EXPECT_EQ(r["steps"].get<int64_t>(), 6);
    if (r.contains("val_loss")) evals.push_back(r["step"].get<int64_t>());
    return r["step"].get<int64_t>() < 3;
  };
  expect_error([&] { finetune(path("ck"), opt); }, {"interrupted: stopped after step 3 of 6", "ckpt-3", "--resume"});
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(evals, (std::vector<int64_t>{2}));
  EXPECT_TRUE(fs::exists(path("hooked/ckpt-3")));
  opt.on_step = {};
  opt.resume = true;
  EXPECT_EQ(finetune(path("ck"), opt).steps, 6);
}

TEST_F(Api, TrainInitIsTheSameFineTuneOnTheCommandLine) {
  const std::string base = "--threads 2 train --data " + path("train.txt") +
                           " --steps 3 --batch 2 --seq-len 16 --val-fraction 0.2 --quiet --init " + path("ck");
  const auto ok = run_cli(base + " --out " + path("cli-run"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const nlohmann::json state = nlohmann::json::parse(std::ifstream(path("cli-run/ckpt-3/train_state.json")));
  EXPECT_EQ(state["run"]["init"], path("ck"));
  EXPECT_EQ(LanguageModel::load(path("cli-run")).config().to_json(),
            LanguageModel::load(path("ck")).config().to_json());
  // The model, its weights and the tokenizer come from the checkpoint.
  for (const char* flag : {" --preset hymba", " --tokenizer x.model", " --init-scheme torch"}) {
    const auto bad = run_cli(base + flag + " --out " + path("cli-bad"));
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_EQ(test::count_lines(bad.output), 1) << bad.output;
    EXPECT_NE(bad.output.find("--init"), std::string::npos) << bad.output;
  }
}

// A run's best/ holds no run record of its own: eval finds the run's, so
// best/ is scored on the run's data, windows and validation split, as the
// run's latest checkpoint is.
TEST_F(Api, ACheckpointInsideARunFindsTheRunsRecord) {
  const auto t = run_cli("--threads 1 train --preset hybrid-official --scale tiny --data " + path("train.txt") +
                         " --tokenizer-type byte --steps 2 --batch 2 --seq-len 24 --eval-interval 2 --eval-windows 2"
                         " --out " + path("rec") + " --quiet");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  for (const std::string& ckpt : {path("rec/best"), path("rec/best/"), path("rec")}) {
    const auto r = test::run_cli_stdout("--threads 1 eval --ckpt " + ckpt + " --json");
    ASSERT_EQ(r.exit_code, 0) << ckpt << ": " << r.errors;
    const nlohmann::json j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["seq_len"], 24) << ckpt;
    EXPECT_EQ(j["data"], path("train.txt")) << ckpt;
  }
  EXPECT_EQ(run_state_for_checkpoint(path("ck")), "");  // a saved model alone has no run
}

TEST_F(Api, BadDirectoriesAndInputsAreOneLineErrors) {
  expect_error([&] { LanguageModel::load(path("missing")); }, {"missing", "no such checkpoint"});
  fs::create_directories(path("empty"));
  expect_error([&] { LanguageModel::load(path("empty")); }, {"empty", "not a checkpoint", "no config.json"});
  // A weights file alone, a config without a tokenizer, a hub name: each says what it is or lacks.
  expect_error([&] { LanguageModel::load(path("ck/model.safetensors")); },
               {"model.safetensors", "a file, not a checkpoint directory", "config.json"});
  fs::create_directories(path("configonly"));
  fs::copy_file(path("ck/config.json"), path("configonly/config.json"));
  expect_error([&] { LanguageModel::load(path("configonly")); }, {"configonly", "no tokenizer"});
  expect_error([&] { LanguageModel::load("nvidia/Hymba-1.5B-Base"); }, {"hub name", "hymba import"});
  fs::create_directories(path("notokmodel"));
  make_byte_tokenizer()->save(path("notokmodel/tokenizer.model"));
  expect_error([&] { LanguageModel::load(path("notokmodel")); }, {"config.json"});
  LanguageModel lm = LanguageModel::load(path("ck"));
  expect_error([&] { lm.score("x"); }, {"at least two"});
  infer::GenerateOptions bad;
  bad.max_new_tokens = 0;
  expect_error([&] { lm.generate("the", bad); }, {"--max-new-tokens"});
  expect_error([&] { LanguageModel::create("no-such-preset"); }, {"no-such-preset"});
  TrainOptions opt;
  opt.out_dir = path("run2");
  expect_error([&] { finetune(path("missing"), opt); }, {"missing"});
}

}  // namespace
}  // namespace hymba
