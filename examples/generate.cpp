// Loads a model directory and continues a prompt, streaming the text as it
// is generated: the library counterpart of `hymba generate`.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "api/hymba.h"
#include "example_args.h"

namespace {

const char* kUsage =
    "usage: hymba_example_generate DIR PROMPT [--max-new-tokens N] [--temperature T] [--top-p P]\n"
    "                              [--seed S] [--threads N]\n"
    "  DIR: a training run, a hymba.cpp checkpoint, or a published HF Hymba / Mamba directory\n"
    "  (what `hymba generate --ckpt` takes). Prints PROMPT and its continuation.\n";

}  // namespace

int main(int argc, char** argv) {
  const example::Args args(argc, argv, kUsage, 2,
                           {"--max-new-tokens", "--temperature", "--top-p", "--seed", "--threads"});
  try {
    hymba::set_threads(static_cast<int>(args.number("--threads", 0)));
    hymba::LanguageModel lm = hymba::LanguageModel::load(args.positional[0]);
    hymba::infer::GenerateOptions opt;
    opt.max_new_tokens = static_cast<int64_t>(args.number("--max-new-tokens", 64));
    opt.sampling.temperature = args.number("--temperature", opt.sampling.temperature);
    opt.sampling.top_p = args.number("--top-p", opt.sampling.top_p);
    opt.sampling.seed = static_cast<uint64_t>(args.number("--seed", 0));
    const std::string& prompt = args.positional[1];
    std::fputs(prompt.c_str(), stdout);
    const hymba::infer::Generation g = lm.generate(prompt, opt, [](int64_t, std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n");
    std::fprintf(stderr, "%zu tokens, finished: %s\n", g.tokens.size(), hymba::infer::to_string(g.finish));
  } catch (const std::exception& e) {  // hymba::Error: one line naming the file, field or option
    std::fprintf(stderr, "%s: error: %s\n", args.program.c_str(), e.what());
    return 1;
  }
  return 0;
}
