// The flags that choose a model, shared by every subcommand that builds one:
// --preset NAME [--scale tiny|small|seed] or --config FILE, and
// --init-scheme to draw its fresh parameters another way.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "infer/weight_format.h"
#include "model/config.h"

namespace hymba::cli {

struct ModelChoice {
  std::string preset;
  std::string config_path;
  std::string scale = "seed";
  std::string init_scheme;  // empty: the config's (normal unless it says otherwise)
};

void add_model_options(CLI::App* cmd, ModelChoice& choice);

// The chosen config; `fallback_preset` is used when neither flag is given
// (empty: one of them is required).
ModelConfig resolve_model(const ModelChoice& choice, const std::string& fallback_preset = "");

// The scheme named by an --init-scheme value; a one-line error naming the flag otherwise.
InitScheme parse_init_scheme_flag(const std::string& value);

// A short label for messages: "preset hybrid-official (tiny)" or the file.
std::string describe(const ModelChoice& choice, const std::string& fallback_preset = "");

// --weights f32|bf16|q8|q4: the linear layers' weight format (infer/weight_format.h).
void add_weights_option(CLI::App* cmd, infer::WeightFormat& format);

}  // namespace hymba::cli
