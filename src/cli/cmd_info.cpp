// `hymba info`: what this build is and what it runs on.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "core/build_info.h"

namespace hymba::cli {

namespace {
struct InfoOptions {
  bool json = false;
};

void print_build(const BuildInfo& b) {
  std::printf("hymba %s (%s build)\n", b.version.c_str(), b.build_type.c_str());
  std::printf("  compiler : %s\n", b.compiler.c_str());
  std::printf("  BLAS     : %s\n", b.blas.c_str());
  std::printf("  threads  : %d of %d hardware threads\n", b.threads, b.hardware_threads);
  std::printf("  CUDA     : %s\n", b.cuda_devices.c_str());
}
}  // namespace

void register_info(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Show the build, the machine and (with a model) its size and caches");
  cmd->add_flag("--json", opts->json, "Print machine-readable JSON");
  cmd->callback([opts, &global] {
    apply_global_options(global);
    BuildInfo b = build_info();
    if (opts->json) {
      std::cout << nlohmann::json{{"build", to_json(b)}}.dump(2) << "\n";
    } else {
      print_build(b);
    }
  });
}

}  // namespace hymba::cli
