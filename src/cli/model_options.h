// The flags that choose a model, shared by every subcommand that builds one:
// --preset NAME [--scale tiny|small|seed] or --config FILE.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/config.h"

namespace hymba::cli {

struct ModelChoice {
  std::string preset;
  std::string config_path;
  std::string scale = "seed";
};

void add_model_options(CLI::App* cmd, ModelChoice& choice);

// The chosen config; `fallback_preset` is used when neither flag is given
// (empty: one of them is required).
ModelConfig resolve_model(const ModelChoice& choice, const std::string& fallback_preset = "");

// A short label for messages: "preset hybrid-official (tiny)" or the file.
std::string describe(const ModelChoice& choice, const std::string& fallback_preset = "");

}  // namespace hymba::cli
