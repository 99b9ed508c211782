#include "cli/model_options.h"

#include "cli/commands.h"
#include "core/error.h"
#include "formats/checkpoint.h"
#include "model/presets.h"

namespace hymba::cli {

void add_model_options(CLI::App* cmd, ModelChoice& choice) {
  auto* preset = cmd->add_option("--preset", choice.preset, "Built-in model preset (see 'hymba presets')");
  auto* config = cmd->add_option("--config", choice.config_path, "Model config.json file");
  preset->excludes(config);
  // The default stays `seed` so a preset means the model the seed notebooks and suites report
  // (docs/training.md); the help says what that costs, and train prints the size first.
  cmd->add_option("--scale", choice.scale,
                  "Preset scale: tiny (hybrid-official 1.4M parameters: minutes on a CPU), small (7.9M) or seed "
                  "(the default: the seed notebooks' size, hybrid-official 29.5M: hours on a CPU); "
                  "'hymba presets --scale S' lists every size")
      ->capture_default_str();
  cmd->add_option("--init-scheme", choice.init_scheme,
                  "Parameter init: normal (N(0, initializer_range), the default), torch (PyTorch module defaults) or "
                  "mamba_ssm (MambaLMHeadModel); overrides the config's init_scheme");
}

namespace {

ModelConfig chosen_config(const ModelChoice& choice, const std::string& fallback_preset) {
  const Scale scale = parse_scale(choice.scale);
  if (!choice.config_path.empty()) {
    HYMBA_USAGE_CHECK(choice.scale == "seed", "--scale applies to presets only, not to --config ", choice.config_path);
    return load_config_file(choice.config_path);
  }
  const std::string name = choice.preset.empty() ? fallback_preset : choice.preset;
  HYMBA_USAGE_CHECK(!name.empty(), "give a model with --preset NAME or --config FILE");
  return preset_config(name, scale);
}

}  // namespace

ModelConfig resolve_model(const ModelChoice& choice, const std::string& fallback_preset) {
  ModelConfig cfg = chosen_config(choice, fallback_preset);
  if (!choice.init_scheme.empty()) cfg.init_scheme = parse_init_scheme_flag(choice.init_scheme);
  return cfg;
}

InitScheme parse_init_scheme_flag(const std::string& value) {
  InitScheme s = InitScheme::kNormal;
  HYMBA_USAGE_CHECK(parse_init_scheme(value, s), "--init-scheme: unknown scheme '", value, "' (one of ", kInitSchemeNames,
              ")");
  return s;
}

std::string describe(const ModelChoice& choice, const std::string& fallback_preset) {
  if (!choice.config_path.empty()) return choice.config_path;
  const std::string name = choice.preset.empty() ? fallback_preset : choice.preset;
  return "preset " + name + " (" + choice.scale + " scale)";
}

void add_weights_option(CLI::App* cmd, infer::WeightFormat& format) {
  cmd->add_option_function<std::string>(
         "--weights",
         [&format](const std::string& name) {
           const auto parsed = infer::parse_weight_format(name);
           HYMBA_USAGE_CHECK(parsed.has_value(), "--weights: unknown format '", name, "' (f32, bf16, q8 or q4)");
           format = *parsed;
         },
         "Weight format of the linear layers in prefill and decoding: f32, bf16, q8 (8-bit blocks) or "
         "q4 (4-bit blocks), rounded once when first used; the output head too (q8 under q4); embeddings, norms "
         "and Mamba A/D/dt bias/conv stay f32. A checkpoint written by `hymba quantize` (or a Q8_0/Q4_0 GGUF file) "
         "runs in its own format (bf16, q8 or q4): leave --weights out")
      ->default_str("f32");
}

}  // namespace hymba::cli
