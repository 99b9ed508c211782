#include "train/run_state.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/safetensors.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "model/config.h"

namespace hymba {

namespace fs = std::filesystem;

std::string run_state_for_checkpoint(const std::string& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  fs::path own = fs::path(dir).lexically_normal();
  if (!own.has_filename()) own = own.parent_path();  // "run/best/"
  if (fs::exists(own / kTrainStateFile, ec)) return (own / kTrainStateFile).string();
  const fs::path run = own.parent_path();
  if (run.empty() || !fs::exists(run / kLatestFile, ec)) return "";
  try {
    const fs::path state = fs::path(resolve_checkpoint(run.string())) / kTrainStateFile;
    return fs::exists(state, ec) ? state.string() : "";
  } catch (const Error&) {
    return "";  // a broken `latest` beside it: no record, as for a lone checkpoint
  }
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  // "owner/name" that is not here is most likely a Hugging Face hub name.
  const bool hub_name = std::count(path.begin(), path.end(), '/') == 1 && path.front() != '/' && path.front() != '.' &&
                        path.back() != '/';
  HYMBA_CHECK(fs::exists(path, ec), excerpt(path, 300), ": no such checkpoint or run directory",
              ec ? " (" + ec.message() + ")" : std::string(),
              hub_name ? "; a Hugging Face hub name? download the repository, then `hymba import --in DIR --out CKPT` "
                         "(docs/import.md)"
                       : "");
  const fs::path latest = fs::path(path) / kLatestFile;
  if (fs::exists(latest, ec)) {
    std::string name = read_file(latest.string());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    // One directory name beside the file (NAME_MAX bytes at most), never a
    // path elsewhere: a hostile run directory cannot point the loader away.
    const bool simple = !name.empty() && name.size() <= 255 && name.find('/') == std::string::npos &&
                        name.find('\0') == std::string::npos && name != "." && name != "..";
    HYMBA_CHECK(simple && fs::is_directory(fs::path(path) / name, ec), latest.string(),
                ": points to missing checkpoint '", excerpt(name), "'");
    return (fs::path(path) / name).string();
  }
  // A suite directory (hymba ablate --out) holds one run per row under runs/.
  const fs::path rows = fs::path(path) / "runs";
  if (!fs::exists(fs::path(path) / kConfigFile, ec) && fs::is_directory(rows, ec)) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(rows, ec))
      if (e.is_directory(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 12; ++i) listed += (i ? ", " : "") + excerpt(names[i], 60);
    if (names.size() > 12) listed += ", ... (" + std::to_string(names.size()) + " in all)";
    fail(excerpt(path, 300), ": a suite directory, not a checkpoint; give one of its rows, ",
         excerpt((rows / "ROW").string(), 300), (names.empty() ? std::string(" (none has run yet)") : " with ROW one of: " + listed));
  }
  return path;
}

LoadedCheckpoint load_checkpoint(const std::string& path, bool training, bool keep_blocks,
                                 std::optional<BlockFormat> hold_floats_as) {
  LoadedCheckpoint c;
  c.dir = resolve_checkpoint(path);
  CheckpointTokenizer tok = load_fitting_tokenizer(c.dir);  // before the weights: cheaper
  c.tokenizer = std::move(tok.tokenizer);
  c.tokenizer_path = tok.path;
  c.add_bos = tok.add_bos;
  c.model = load_model(c.dir, training, keep_blocks, hold_floats_as);
  return c;
}

CheckpointTokenizer load_fitting_tokenizer(const std::string& ckpt_dir, int64_t model_vocab) {
  CheckpointTokenizer tok = load_checkpoint_tokenizer_of(ckpt_dir);  // a missing tokenizer is named first
  if (model_vocab < 0) model_vocab = load_checkpoint_config(ckpt_dir).vocab_size;
  const std::string config = is_gguf_file(ckpt_dir) ? ckpt_dir : (fs::path(ckpt_dir) / kConfigFile).string();
  HYMBA_CHECK(tok.tokenizer->vocab_size() <= model_vocab, tok.path, ": the tokenizer has ", tok.tokenizer->vocab_size(),
              " tokens but the model has only ", model_vocab, " (vocab_size in ", config,
              "); they do not belong together");
  return tok;
}

void save_inference_checkpoint(const std::string& dir, const Model& model, const Tokenizer& tok,
                               const std::map<std::string, std::string>& metadata) {
  save_model(dir, model, metadata);
  (void)save_tokenizer_files(tok, dir);
}

void save_training_checkpoint(const std::string& out_dir, int64_t step, const Model& model, const Tokenizer& tok,
                              const nlohmann::json& state) {
  const std::string name = "ckpt-" + std::to_string(step);
  const fs::path dir = fs::path(out_dir) / name;
  save_inference_checkpoint(dir.string(), model, tok, {{"step", std::to_string(step)}});
  // The AdamW moments, named after the parameters they belong to.
  const ParamTable& t = model.params();
  std::vector<NamedTensor> moments;
  for (const ParamInfo& p : t.rows()) {
    moments.push_back({"m." + p.name, p.shape, t.m_block() + p.offset});
    moments.push_back({"v." + p.name, p.shape, t.v_block() + p.offset});
  }
  save_safetensors((dir / kOptimizerFile).string(), moments);
  write_text_atomic((dir / kTrainStateFile).string(), state.dump(2) + "\n");
  // Only now is the checkpoint complete: publish it, then drop older ones.
  write_text_atomic((fs::path(out_dir) / kLatestFile).string(), name + "\n");
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const std::string n = entry.path().filename().string();
    if (entry.is_directory() && n.rfind("ckpt-", 0) == 0 && n != name) fs::remove_all(entry.path());
  }
}

void load_optimizer_state(const std::string& ckpt_dir, Model& model) {
  const std::string path = (fs::path(ckpt_dir) / kOptimizerFile).string();
  const SafetensorsFile f = SafetensorsFile::open(path);
  ParamTable& t = model.params();
  for (const ParamInfo& p : t.rows()) {
    for (const char* kind : {"m.", "v."}) {
      const std::string name = kind + p.name;
      const SafetensorsEntry* e = f.find(name);
      HYMBA_CHECK(e != nullptr, path, ": missing tensor '", name, "'");
      HYMBA_CHECK(e->numel() == p.shape.numel(), path, ": tensor '", name, "' has ", e->numel(),
                  " elements, expected ", p.shape.numel());
      float* dst = (kind[0] == 'm' ? t.m_block() : t.v_block()) + p.offset;
      f.read_into(name, dst, p.shape.numel());
      check_finite(path, name, dst, p.shape.numel());
    }
  }
}

}  // namespace hymba
