// Continues training a checkpoint on a text file for a few steps, then
// scores the text again: fine-tuning through the library, the same code
// `hymba train --init CKPT` runs.
#include <cstdio>
#include <exception>
#include <string>

#include "api/hymba.h"
#include "example_args.h"

namespace {

const char* kUsage =
    "usage: hymba_example_finetune CKPT TEXT_FILE OUT_DIR [--steps N] [--batch B] [--seq-len T] [--lr LR]\n"
    "                              [--threads N]\n"
    "  CKPT: the model to start from (run, checkpoint or published directory); TEXT_FILE: the text\n"
    "  (.txt, a directory of .txt or .jsonl); OUT_DIR: the new training run (checkpoints, metrics).\n"
    "  Prints the loss on TEXT_FILE before and after.\n";

double corpus_loss(hymba::LanguageModel& lm, const std::string& data, int64_t seq_len) {
  hymba::CorpusScoreOptions so;  // as `hymba eval --data FILE --split all --seq-len T`
  so.data = data;
  so.all_tokens = true;
  so.seq_len = seq_len;
  return lm.score_corpus(so).result.loss;
}

}  // namespace

int main(int argc, char** argv) {
  const example::Args args(argc, argv, kUsage, 3, {"--steps", "--batch", "--seq-len", "--lr", "--threads"});
  try {
    hymba::set_threads(static_cast<int>(args.number("--threads", 0)));
    hymba::TrainOptions opt;
    opt.data = args.positional[1];
    opt.out_dir = args.positional[2];
    opt.steps = static_cast<int64_t>(args.number("--steps", 20));
    opt.batch = static_cast<int64_t>(args.number("--batch", 4));
    opt.seq_len = static_cast<int64_t>(args.number("--seq-len", 64));
    opt.lr = args.number("--lr", 1e-3);
    opt.warmup = 0;
    opt.eval_interval = opt.steps;  // one validation, at the end
    opt.quiet = true;

    hymba::LanguageModel lm = hymba::LanguageModel::load(args.positional[0]);
    const double before = corpus_loss(lm, opt.data, opt.seq_len);
    const hymba::TrainSummary s = lm.finetune(opt);  // lm now holds the fine-tuned weights
    const double after = corpus_loss(lm, opt.data, opt.seq_len);
    std::printf("%lld steps in %.1f s (%.0f tok/s); loss on %s: %.4f -> %.4f; checkpoint %s\n",
                static_cast<long long>(s.steps), s.wall_s, s.train_tokens_per_s, opt.data.c_str(), before, after,
                lm.source().c_str());
  } catch (const std::exception& e) {  // hymba::Error: one line naming the file, field or option
    std::fprintf(stderr, "%s: error: %s\n", args.program.c_str(), e.what());
    return 1;
  }
  return 0;
}
