// `hymba presets`: the built-in model presets.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "model/presets.h"
#include "model/summary.h"

namespace hymba::cli {

void register_presets(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    bool json = false;
    std::string scale = "seed";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("presets", "List the built-in model presets");
  cmd->add_flag("--json", opts->json, "Print each preset's config as JSON");
  cmd->add_option("--scale", opts->scale, "Show sizes at this scale: tiny, small or seed")->capture_default_str();
  cmd->callback([opts, &global] {
    apply_global_options(global);
    const Scale scale = parse_scale(opts->scale);
    nlohmann::json out = nlohmann::json::array();
    std::string family;
    for (const Preset& p : all_presets()) {
      const ModelConfig cfg = preset_config(p.name, scale);
      const ModelSummary s = summarize(cfg, 1);
      if (opts->json) {
        out.push_back({{"name", p.name}, {"title", p.title}, {"family", p.family}, {"description", p.description},
                       {"params", s.total_params}, {"config", cfg.to_json()}});
        continue;
      }
      if (p.family != family) {
        family = p.family;
        std::printf("%s%s\n", out.empty() && family == all_presets().front().family ? "" : "\n", family.c_str());
      }
      std::printf("  %-20s %9.2fM  %s — %s\n", p.name.c_str(), s.total_params / 1e6, p.title.c_str(),
                  p.description.c_str());
    }
    if (opts->json) {
      std::cout << out.dump(2) << "\n";
      return;
    }
    // The count includes the embeddings, which follow the vocabulary: a suite
    // or a run that trains its own tokenizer sets vocab_size from it.
    std::printf("\nParameters at scale %s with each preset's own vocab_size (embeddings and tied head included); "
                "a run gets vocab_size from its tokenizer, so a byte tokenizer (259) or a BPE of 4,096 changes the "
                "count (hymba info --preset P --scale S shows a config's parts).\n",
                opts->scale.c_str());
  });
}

}  // namespace hymba::cli
