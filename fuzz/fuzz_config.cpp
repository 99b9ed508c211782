// config.json in every layout the engine reads: native, HF HymbaForCausalLM,
// HF MambaForCausalLM and state-spaces Mamba (detected from the keys), then
// what a loader does next with an accepted config: the parameter estimate
// and, when it is small, the declared parameter table.
#include "core/json_io.h"
#include "core/params.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "formats/hf_import.h"
#include "model/layout.h"
#include "model/memory_estimate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hymba::fuzz::expect_clean([&] {
    const std::string source = "config.json";
    const nlohmann::json j = hymba::parse_json(hymba::fuzz::as_text(data, size), source);
    const hymba::CheckpointLayout layout = hymba::detect_layout(j, source);
    const hymba::ModelConfig cfg = hymba::config_from_published(j, layout, source);
    const double floats = hymba::parameter_floats(cfg);
    // A resolved config round-trips through its own JSON.
    (void)hymba::ModelConfig::from_json(cfg.to_json(), "round trip");
    if (floats <= 1e7) {
      hymba::ParamTable table;
      hymba::declare_parameters(cfg, table);
      if (static_cast<double>(table.num_params()) != floats) {
        std::fprintf(stderr, "fuzz: parameter_floats %.0f != declared %lld\n", floats,
                     static_cast<long long>(table.num_params()));
        std::abort();
      }
      (void)hymba::tensor_names(cfg);
    }
  });
  return 0;
}
