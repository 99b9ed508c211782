// Each subcommand registers its flags and its run callback on the root app.
#pragma once

#include <CLI/CLI.hpp>

namespace hymba::cli {

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
void register_bench_infer(CLI::App& app, const GlobalOptions& global);
void register_ablate(CLI::App& app, const GlobalOptions& global);
void register_synth(CLI::App& app, const GlobalOptions& global);

// Applies the global options (thread count) before a subcommand runs.
void apply_global_options(const GlobalOptions& global);

}  // namespace hymba::cli
