// optimizer.safetensors of a run directory being resumed: the AdamW moments
// of a small model, matched by name and shape and checked finite before use.
#include <filesystem>
#include <memory>

#include "fuzz_util.h"
#include "model/model.h"
#include "train/run_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static hymba::Model* model = [] {
    nlohmann::json j = {{"vocab_size", 259}, {"hidden_size", 8}, {"num_hidden_layers", 1},
                        {"layer_types", "hybrid"}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
                        {"mamba_d_state", 2}, {"mamba_expand", 1}, {"intermediate_size", 8}};
    return new hymba::Model(hymba::ModelConfig::from_json(j, "fuzz model"), /*training=*/true);
  }();
  hymba::fuzz::write_input("ckpt/optimizer.safetensors", hymba::fuzz::as_text(data, size));
  hymba::fuzz::expect_clean([&] { hymba::load_optimizer_state((hymba::fuzz::work_dir() / "ckpt").string(), *model); });
  return 0;
}
