#include "tokenizer/hf/models.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"

namespace hymba::tok {

using nlohmann::json;

void Vocab::add(const std::string& piece, int32_t id) {
  ids_[piece] = id;
  const auto k = static_cast<size_t>(id);
  if (k >= pieces_.size()) {
    pieces_.resize(k + 1);
    has_.resize(k + 1, false);
  }
  pieces_[k] = piece;
  has_[k] = true;
}

std::string byte_piece(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

namespace {
constexpr int64_t kMaxVocabId = int64_t{1} << 22;  // 4M; published vocabularies have under 300k
}  // namespace

Vocab read_vocab_object(const json& j, const std::string& where) {
  const json& v = field(j, "vocab", where);
  HYMBA_CHECK(v.is_object(), sub(where, ".vocab"), " must be an object of piece -> id");
  Vocab vocab;
  for (auto it = v.begin(); it != v.end(); ++it) {
    // Ids index tables: a bound keeps a hostile file from asking for gigabytes.
    HYMBA_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() < kMaxVocabId,
                sub(where, ".vocab"), " entry '", it.key(), "' must be an id in 0..", kMaxVocabId - 1);
    vocab.add(it.key(), static_cast<int32_t>(it->get<int64_t>()));
  }
  HYMBA_CHECK(!vocab.empty(), sub(where, ".vocab"), " is empty");
  return vocab;
}

std::unique_ptr<Model> make_model(const json& j, const std::string& where) {
  HYMBA_CHECK(j.is_object(), where, " must be an object");
  // Files written by old versions of tokenizers may leave out BPE's type.
  const std::string type = j.contains("type") ? component_type(j, where) : "BPE";
  if (type == "BPE") return make_bpe_model(j, where);
  if (type == "Unigram") return make_unigram_model(j, where);
  if (type == "WordPiece") return make_wordpiece_model(j, where);
  if (type == "WordLevel") return make_wordlevel_model(j, where);
  unsupported(where, type, "BPE, Unigram, WordPiece, WordLevel");
}

}  // namespace hymba::tok
