#include "model/checkpoint.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/safetensors.h"
#include "model/hf_import.h"

namespace hymba {

namespace fs = std::filesystem;

void save_model(const std::string& dir, const Model& model, const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  HYMBA_CHECK(!ec, dir, ": cannot create checkpoint directory (", ec.message(), ")");
  write_text_atomic((fs::path(dir) / kConfigFile).string(), model.config().to_json().dump(2) + "\n");
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "hymba.cpp";
  save_params((fs::path(dir) / kWeightsFile).string(), model.params(), meta);
}

std::unique_ptr<Model> load_model(const std::string& dir, bool training) {
  std::error_code ec;
  HYMBA_CHECK(fs::is_directory(dir, ec), excerpt(dir, 300), ": not a checkpoint directory",
              ec ? " (" + ec.message() + ")" : std::string());
  const std::string config_path = (fs::path(dir) / kConfigFile).string();
  const nlohmann::json j = read_json_file(config_path);
  const CheckpointLayout layout = detect_layout(j, config_path);
  const ModelConfig cfg = config_from_published(j, layout, config_path);
  std::unique_ptr<Model> model;
  try {  // a model too large for this machine: name the config that asks for it
    model = std::make_unique<Model>(cfg, training);
  } catch (const Error& e) {
    throw Error(excerpt(config_path, 300) + ": " + e.what());
  }
  const fs::path weights = fs::path(dir) / kWeightsFile;
  if (layout == CheckpointLayout::kNative && fs::exists(weights, ec))
    load_params(weights.string(), model->params());
  else  // published names, shards, a stored tied lm_head (model/hf_import.h)
    load_checkpoint_weights(dir, layout, cfg, model->params());
  return model;
}

}  // namespace hymba
