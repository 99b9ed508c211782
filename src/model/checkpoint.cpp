#include "model/checkpoint.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"

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
  HYMBA_CHECK(fs::is_directory(dir), dir, ": not a checkpoint directory");
  const ModelConfig cfg = load_config_file((fs::path(dir) / kConfigFile).string());
  auto model = std::make_unique<Model>(cfg, training);
  load_params((fs::path(dir) / kWeightsFile).string(), model->params());
  return model;
}

}  // namespace hymba
