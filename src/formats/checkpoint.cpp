#include "formats/checkpoint.h"

#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/safetensors.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_tokenizer.h"
#include "formats/held_checkpoint.h"
#include "formats/hf_import.h"

namespace hymba {

namespace fs = std::filesystem;

void save_model(const std::string& dir, const Model& model, const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  HYMBA_CHECK(!ec, dir, ": cannot create checkpoint directory (", ec.message(), ")");
  write_text_atomic((fs::path(dir) / kConfigFile).string(), model.config().to_json().dump(2) + "\n");
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "hymba.cpp";
  const std::string weights = (fs::path(dir) / kWeightsFile).string();
  if (!model.held().empty())
    save_held_params(weights, model, meta);
  else  // laid out as the parameter block, so load_model maps it instead of reading
    save_params_mappable(weights, model.params(), meta);
}

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {};
  const bool gguf = std::fread(magic, 1, 4, f) == 4 && std::string(magic, 4) == "GGUF";
  std::fclose(f);
  return gguf;
}

namespace {

std::unique_ptr<Model> load_gguf_model(const std::string& path, bool training, bool keep_blocks,
                                       std::optional<BlockFormat> hold_floats_as) {
  const gguf::File file = gguf::File::open(path);
  const ModelConfig cfg = gguf::config_from_gguf(file);
  std::unique_ptr<Model> model;
  try {  // a model too large for this machine: name the file that asks for it
    model = std::make_unique<Model>(cfg, training);
  } catch (const Error& e) {
    throw Error(excerpt(path, 300) + ": " + e.what());
  }
  const std::string note = gguf::load_gguf_weights(file, *model, keep_blocks && !training, hold_floats_as);
  if (!note.empty()) std::fprintf(stderr, "hymba: note: %s\n", note.c_str());
  return model;
}

}  // namespace

ModelConfig load_config_file(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  // Published configs (HF Hymba / Mamba, state-spaces) are mapped (formats/hf_import.h).
  return config_from_published(j, detect_layout(j, path), path);
}

ModelConfig load_checkpoint_config(const std::string& path) {
  if (is_gguf_file(path)) return gguf::config_from_gguf(gguf::File::open(path));
  return load_config_file((fs::path(path) / kConfigFile).string());
}

namespace {

// A --ckpt that is no checkpoint says what it is and what is missing, before
// any part of one is looked for.
void require_checkpoint_directory(const std::string& path) {
  std::error_code ec;
  const std::string p = excerpt(path, 300);
  if (fs::is_regular_file(path, ec))
    fail(p, ": a file, not a checkpoint directory",
         fs::path(path).extension() == ".safetensors" ? " (a weights file alone has no config.json or tokenizer)" : "",
         "; give the directory that holds config.json, the weights and the tokenizer, or a .gguf file");
  HYMBA_CHECK(fs::exists(fs::path(path) / kConfigFile, ec), p,
              ": not a checkpoint: no config.json (a checkpoint directory holds config.json, model.safetensors and "
              "tokenizer.model or tokenizer.json; a run directory holds `latest`)");
}

}  // namespace

CheckpointTokenizer load_checkpoint_tokenizer_of(const std::string& path) {
  if (is_gguf_file(path)) return gguf::tokenizer_from_gguf(gguf::File::open(path));
  require_checkpoint_directory(path);
  return load_checkpoint_tokenizer(path);
}

std::unique_ptr<Tokenizer> load_tokenizer_anywhere(const std::string& path) {
  if (is_gguf_file(path)) return gguf::tokenizer_from_gguf(gguf::File::open(path)).tokenizer;
  return load_tokenizer_or_directory(path);
}

std::unique_ptr<Model> load_model(const std::string& dir, bool training, bool keep_blocks,
                                  std::optional<BlockFormat> hold_floats_as) {
  if (is_gguf_file(dir)) return load_gguf_model(dir, training, keep_blocks, hold_floats_as);
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
  if (layout == CheckpointLayout::kNative && fs::exists(weights, ec)) {
    const SafetensorsFile file = SafetensorsFile::open(weights.string());
    if (file.metadata().count(kBlocksMetadataKey) != 0) {
      const std::string note = load_held_params(file, *model, keep_blocks && !training);
      if (!note.empty()) std::fprintf(stderr, "hymba: note: %s\n", note.c_str());
    } else if (!map_params(file, model->params())) {  // a file of another writer, or of an older hymba
      load_params(file, model->params(), {});
    }
  } else  // published names, shards, a stored tied lm_head (formats/hf_import.h)
    load_checkpoint_weights(dir, layout, cfg, model->params());
  return model;
}

}  // namespace hymba
