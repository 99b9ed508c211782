// The Tokenizer of an HF tokenizer.json: its pipeline (tokenizer/hf/) and
// the special tokens hymba needs (bos, eos, pad, unk), which come from
// tokenizer_config.json or the usual token names.
#include "tokenizer/hf_tokenizer.h"

#include <filesystem>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "tokenizer/hf/pipeline.h"

namespace hymba {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

TokenizerKind kind_of_model(const std::string& type) {
  if (type == "Unigram") return TokenizerKind::kUnigram;
  if (type == "WordPiece") return TokenizerKind::kWordPiece;
  if (type == "WordLevel") return TokenizerKind::kWordLevel;
  return TokenizerKind::kBpe;
}

class HfTokenizer final : public Tokenizer {
 public:
  // `config`: the tokenizer_config.json's text, `config_path` its name in errors.
  HfTokenizer(const std::string& path, std::string contents, std::string config, const std::string& config_path)
      : contents_(std::move(contents)), config_(std::move(config)) {
    const json j = parse_json(contents_, path);  // duplicate keys refused, errors name the file
    pipeline_ = std::make_unique<tok::Pipeline>(j, path);
    kind_ = kind_of_model(pipeline_->model_type());
    vocab_ = pipeline_->vocab_end();
    read_special_tokens(path, j, config_path);
  }

  TokenizerKind kind() const override { return kind_; }
  int32_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> encode(std::string_view text) const override {
    return pipeline_->encode(text, /*add_special_tokens=*/false, /*offsets=*/false).ids;
  }
    // Raw bytes kept (streaming needs them); decode_full is HF's exact text.
  std::string decode(const std::vector<int32_t>& ids) const override { return pipeline_->decode(ids, true, true); }
  Encoding encode_full(std::string_view text, bool add_special_tokens) const override {
    tok::EncodedText e = pipeline_->encode(text, add_special_tokens, true);
    Encoding out;
    out.ids = std::move(e.ids);
    out.offsets.reserve(e.offsets.size());
    for (const tok::TokenSpan& s : e.offsets) out.offsets.push_back({s.start, s.end});
    return out;
  }
  std::string decode_full(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    return pipeline_->decode(ids, skip_special_tokens, false);
  }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  std::string fingerprint() const override { return "hf-" + tokenizer_fingerprint(kind_, contents_); }
  void save(const std::string& path) const override { write_text_atomic(path, contents_); }
  const char* file_name() const override { return "tokenizer.json"; }
  std::string config_json() const override { return config_; }

 private:
  int32_t id_of(const json& token) const {
    const json& t = token.is_object() && token.contains("content") ? token["content"] : token;
    return t.is_string() ? pipeline_->token_to_id(t.get<std::string>()) : -1;
  }

  // bos/eos/pad/unk: tokenizer_config.json beside the file, else the usual names.
  void read_special_tokens(const std::string& path, const json& j, const std::string& cfg_path) {
    json cfg = json::object();
    if (!config_.empty()) cfg = parse_json(config_, cfg_path);
    auto named = [&](const char* key, std::initializer_list<const char*> fallbacks) {
      if (cfg.is_object() && cfg.contains(key) && !cfg[key].is_null()) {
        const int32_t id = id_of(cfg[key]);
        HYMBA_CHECK(id >= 0, cfg_path, ": field '", key, "' names ", json_excerpt(cfg[key]),
                    ", which is not in the vocabulary of ", path);
        return id;
      }
      for (const char* f : fallbacks)
        if (const int32_t id = pipeline_->token_to_id(f); id >= 0) return id;
      return -1;
    };
    eos_ = named("eos_token", {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|im_end|>", "<EOT>",
                               "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[SEP]"});
    // Else the file's first special token: generation needs some id to stop at.
    if (eos_ < 0) eos_ = pipeline_->first_special_id();
    HYMBA_CHECK(eos_ >= 0, path, ": no end-of-text token (set eos_token in tokenizer_config.json)");
    bos_ = named("bos_token", {"<|endoftext|>", "<s>", "<|begin_of_text|>", "<bos>", "<SOS>",
                               "<\xEF\xBD\x9C" "begin\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[CLS]"});
    if (bos_ < 0) bos_ = eos_;
    pad_ = named("pad_token", {"<|padding|>", "<pad>", "[PAD]"});
    if (pad_ < 0) pad_ = eos_;
    unk_ = named("unk_token", {});
    if (unk_ < 0 && j["model"].contains("unk_token") && j["model"]["unk_token"].is_string())
      unk_ = pipeline_->token_to_id(j["model"]["unk_token"].get<std::string>());
    if (unk_ < 0 && j["model"].contains("unk_id") && j["model"]["unk_id"].is_number_integer())
      unk_ = static_cast<int32_t>(j["model"]["unk_id"].get<int64_t>());
  }

  std::string contents_, config_;
  std::unique_ptr<tok::Pipeline> pipeline_;
  TokenizerKind kind_ = TokenizerKind::kBpe;
  int32_t vocab_ = 0, bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path, const std::string& contents) {
  const fs::path cfg_path = fs::path(path).parent_path() / "tokenizer_config.json";
  std::string config = fs::exists(cfg_path) ? read_file(cfg_path.string()) : std::string();
  return std::make_unique<HfTokenizer>(path, contents, std::move(config), cfg_path.string());
}

std::unique_ptr<Tokenizer> make_hf_tokenizer_json(const std::string& name, std::string contents, std::string config) {
  return std::make_unique<HfTokenizer>(name, std::move(contents), std::move(config), name + " (tokenizer_config.json)");
}

}  // namespace hymba
