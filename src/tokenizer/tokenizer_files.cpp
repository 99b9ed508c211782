#include "tokenizer/tokenizer_files.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace hymba {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// tokenizer_config.json's boolean `key` beside `path`, or `def`.
bool config_flag(const json& cfg, const char* key, const std::string& cfg_path, bool def) {
  if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return def;
  HYMBA_CHECK(cfg[key].is_boolean(), cfg_path, ": field '", key, "' must be true or false");
  return cfg[key].get<bool>();
}

json config_beside(const std::string& path, std::string& cfg_path) {
  cfg_path = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  if (!fs::exists(cfg_path)) return json::object();
  json cfg = read_json_file(cfg_path);
  HYMBA_CHECK(cfg.is_object(), cfg_path, ": expected a JSON object");
  return cfg;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  std::string contents = read_file(path);
  HYMBA_CHECK(!contents.empty(), path, ": empty file, not a tokenizer");
  if (is_byte_tokenizer_file(contents)) return load_byte_tokenizer(path, contents);
  // An HF tokenizer.json; sentencepiece models are binary.
  const size_t first = contents.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && contents[first] == '{') return load_hf_tokenizer_json(path, contents);
  auto tok = load_sentencepiece_tokenizer(std::move(contents), path);
  std::string cfg_path;
  const json cfg = config_beside(path, cfg_path);
  tok->set_added_specials(config_flag(cfg, "add_bos_token", cfg_path, false),
                          config_flag(cfg, "add_eos_token", cfg_path, false));
  return tok;
}

std::string checkpoint_tokenizer_path(const std::string& dir) {
  for (const char* name : {kTokenizerFile, "tokenizer.json"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

CheckpointTokenizer load_checkpoint_tokenizer(const std::string& dir) {
  CheckpointTokenizer t;
  t.path = checkpoint_tokenizer_path(dir);
  HYMBA_CHECK(!t.path.empty(), dir, ": no tokenizer next to the checkpoint (tokenizer.model or tokenizer.json)");
  t.tokenizer = load_tokenizer(t.path);
  std::string cfg_path;
  const json cfg = config_beside(t.path, cfg_path);
  t.add_bos = config_flag(cfg, "add_bos_token", cfg_path, false);
  return t;
}

std::string save_tokenizer_files(const Tokenizer& tok, const std::string& dir) {
  const std::string path = (fs::path(dir) / tok.file_name()).string();
  tok.save(path);
  // A tokenizer.model left from an earlier save would be read first.
  if (fs::path(path).filename() != kTokenizerFile) fs::remove(fs::path(dir) / kTokenizerFile);
  const std::string config = tok.config_json();
  if (!config.empty()) write_text_atomic((fs::path(dir) / "tokenizer_config.json").string(), config);
  return path;
}

std::unique_ptr<Tokenizer> load_tokenizer_or_directory(const std::string& path) {
  if (fs::is_directory(path)) return load_checkpoint_tokenizer(path).tokenizer;
  return load_tokenizer(path);
}

}  // namespace hymba
