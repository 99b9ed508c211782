#include "tokenizer/hf/pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// Ids as HF's add_tokens gives them: a content the model already has keeps
// the model's id, a new one takes the next id after the model's vocabulary;
// the file's "id" is not used (HF only warns when it differs).
std::vector<AddedToken> read_added_tokens(const json& j, const std::string& file, const Vocab& model_vocab) {
  std::vector<AddedToken> out;
  if (!present(j, "added_tokens")) return out;
  const std::string where = file + ": field 'added_tokens'";
  const json& list = j["added_tokens"];
  HYMBA_CHECK(list.is_array(), where, " must be a list");
  std::unordered_map<std::string, int32_t> assigned;
  int32_t next_id = model_vocab.count();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = sub(where, "[" + std::to_string(i) + "]");
    const json& t = list[i];
    AddedToken a;
    field_int(t, "id", at, -1, 0, (1 << 30) - 1);  // checked, not used (above)
    a.content = field_string(t, "content", at);
    HYMBA_CHECK(!a.content.empty(), sub(at, ".content"), " is empty");
    a.special = field_bool(t, "special", at, false);
    a.single_word = field_bool(t, "single_word", at, false);
    a.lstrip = field_bool(t, "lstrip", at, false);
    a.rstrip = field_bool(t, "rstrip", at, false);
    a.normalized = field_bool(t, "normalized", at, !a.special);
    if (auto it = assigned.find(a.content); it != assigned.end()) a.id = it->second;
    else if (const int32_t model_id = model_vocab.find(a.content); model_id >= 0) a.id = model_id;
    else a.id = next_id++;
    assigned[a.content] = a.id;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Pipeline::Pipeline(const json& j, const std::string& file) {
  HYMBA_CHECK(j.is_object(), file, ": expected a JSON object");
  HYMBA_CHECK(present(j, "model"), file, ": field 'model' is missing");
  const std::string model_at = file + ": field 'model'";
  model_ = make_model(j["model"], model_at);
  model_type_ = j["model"].contains("type") ? component_type(j["model"], model_at) : "BPE";
  if (present(j, "normalizer")) normalizer_ = make_normalizer(j["normalizer"], file + ": field 'normalizer'");
  if (present(j, "pre_tokenizer")) pre_tokenizer_ = make_pre_tokenizer(j["pre_tokenizer"], file + ": field 'pre_tokenizer'");
  if (present(j, "decoder")) decoder_ = make_decoder(j["decoder"], file + ": field 'decoder'");
  if (present(j, "post_processor"))
    post_processor_ = make_post_processor(j["post_processor"], file + ": field 'post_processor'");
  added_ = AddedVocabulary(read_added_tokens(j, file, model_->vocab()), normalizer_.get());
}

EncodedText Pipeline::encode(std::string_view text, bool add_special_tokens, bool offsets) const {
  PreTokenized pieces = added_.extract_and_normalize(text, normalizer_.get());
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  EncodedText e;
  e.ids.reserve(text.size() / 3 + 4);
  std::vector<ModelToken> toks;
  for (const PreToken& p : pieces) {
    toks.clear();
    if (p.id >= 0) toks.push_back({p.id, 0, p.text.size()});
    else model_->tokenize(p.text.text(), toks);
    for (const ModelToken& t : toks) {
      e.ids.push_back(t.id);
      if (!offsets) continue;
      const Span s = p.text.original(t.start, t.end);
      e.offsets.push_back({s.start, s.end});
      const std::string* piece = p.id >= 0 ? added_.decoded(t.id) : model_->vocab().piece(t.id);
      e.pieces.push_back(piece ? *piece : std::string());
      e.special.push_back(false);
    }
  }
  // Without special tokens or offsets the post-processors have nothing to do.
  if (post_processor_ && (add_special_tokens || offsets)) {
    if (!offsets) {  // the processors read offsets and pieces; give them empty ones
      e.offsets.assign(e.ids.size(), {});
      e.pieces.assign(e.ids.size(), {});
      e.special.assign(e.ids.size(), false);
    }
    post_processor_->process(e, add_special_tokens);
  }
  return e;
}

std::string Pipeline::decode(const std::vector<int32_t>& ids, bool skip_special_tokens, bool keep_bytes) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* t = added_.decoded(id);
    if (t == nullptr) t = model_->vocab().piece(id);
    if (t == nullptr) continue;  // unknown ids are skipped, as HF does
    if (skip_special_tokens && added_.is_special_content(*t)) continue;
    tokens.push_back(*t);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder_->decode_chain(tokens, keep_bytes);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

int32_t Pipeline::token_to_id(std::string_view token) const {
  const int32_t id = added_.id_of(token);
  return id >= 0 ? id : model_->vocab().find(token);
}

int32_t Pipeline::first_special_id() const { return added_.first_special_id(); }

bool Pipeline::is_special(int32_t id) const {
  const AddedToken* a = added_.find(id);
  return a != nullptr && a->special;
}

int32_t Pipeline::vocab_end() const { return std::max(model_->vocab().end_id(), added_.end_id()); }

}  // namespace hymba::tok
