// Each subcommand registers its flags and its run callback on the root app.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace hymba::infer {
struct SamplingOptions;
}  // namespace hymba::infer

namespace hymba::cli {

// A usage error a command finds after parsing: a flag's value or a
// combination of flags (`--system` without `--chat`). main exits 2 for it,
// as for the parser's own errors; every other error exits 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

template <typename... Parts>
[[noreturn]] void usage_fail(Parts&&... parts) {
  throw UsageError(detail::concat(std::forward<Parts>(parts)...));
}

// Options every subcommand shares.
struct GlobalOptions {
  int threads = 0;  // 0: all hardware threads
};

void register_info(CLI::App& app, const GlobalOptions& global);
void register_presets(CLI::App& app, const GlobalOptions& global);
void register_model_commands(CLI::App& app, const GlobalOptions& global);
void register_train(CLI::App& app, const GlobalOptions& global);
void register_eval(CLI::App& app, const GlobalOptions& global);
void register_tokenizer(CLI::App& app, const GlobalOptions& global);
void register_generate(CLI::App& app, const GlobalOptions& global);
void register_chat(CLI::App& app, const GlobalOptions& global);
void register_bench_infer(CLI::App& app, const GlobalOptions& global);
void register_serve(CLI::App& app, const GlobalOptions& global);
void register_ablate(CLI::App& app, const GlobalOptions& global);
void register_synth(CLI::App& app, const GlobalOptions& global);
void register_classify(CLI::App& app, const GlobalOptions& global);
void register_import_export(CLI::App& app, const GlobalOptions& global);

// Makes every integer flag refuse text that is not an integer ("2.5", "1e12")
// with "not an integer" before any range check runs (cli/flag_checks.cpp).
void require_integer_text(CLI::App& app);

// A bound as a person writes it: 1000000, 0.5, 1e-06 (cli/flag_checks.cpp).
std::string bound_text(double v);

// CLI::Range with its bounds written as bound_text does ("not in range 0 to
// 1000000", where CLI11 prints "0.000000 to 1000000.000000").
template <typename T>
CLI::Validator range(T lo, T hi) {
  const std::string bounds = bound_text(static_cast<double>(lo)) + " to " + bound_text(static_cast<double>(hi));
  return CLI::Validator(
      [lo, hi, bounds](std::string& input) -> std::string {
        T value{};
        if (!CLI::detail::lexical_cast(input, value)) return "Value " + input + " could not be converted";
        if (value < lo || value > hi) return "Value " + input + " not in range " + bounds;
        return {};
      },
      "[" + bound_text(static_cast<double>(lo)) + " - " + bound_text(static_cast<double>(hi)) + "]");
}

// The name in `names` closest to `typed` (a prefix of it, or a few typos
// away), or "" when none is close (cli/suggest.cpp).
std::string closest_name(const std::string& typed, const std::vector<std::string>& names);
// After CLI11's ExtrasError: "unknown subcommand 'gen'; did you mean 'generate'?"
// or "unknown flag '--top_pp' for 'generate'; did you mean --top-p?" ("" if none left over).
std::string explain_unexpected_arguments(const CLI::App& app);

// --min-p, --presence-penalty, --frequency-penalty, --repetition-penalty and
// --logit-bias ID=BIAS (repeatable) into s (cli/sampling_flags.cpp); and the
// check, once the model is known, that the biased ids are in its vocabulary.
void add_sampling_extras(CLI::App* cmd, infer::SamplingOptions& s);
void check_logit_bias(const infer::SamplingOptions& s, int64_t vocab_size);

// Applies the global options (thread count) before a subcommand runs.
void apply_global_options(const GlobalOptions& global);
// The thread count a command passes on (0: OpenMP's default); under mpirun
// without --threads or OMP_NUM_THREADS, cores / ranks on this machine.
int command_threads(const GlobalOptions& global);

}  // namespace hymba::cli

// Checks a condition on the command line's flags (a UsageError: exit 2).
#define HYMBA_USAGE_CHECK(cond, ...)                     \
  do {                                                   \
    if (!(cond)) ::hymba::cli::usage_fail(__VA_ARGS__);  \
  } while (0)
