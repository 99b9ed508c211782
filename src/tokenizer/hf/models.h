// tokenizer.json models: BPE (models_bpe.cpp), Unigram (models_unigram.cpp),
// WordPiece and WordLevel (models_wordpiece.cpp), with HF `tokenizers`'
// semantics (src/models/). A model turns one pre-token into tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hymba::tok {

struct ModelToken {
  int32_t id;
  size_t start, end;  // bytes of the pre-token
};

// Piece <-> id, looked up by string_view without copying.
class Vocab {
 public:
  void add(const std::string& piece, int32_t id);  // a later id for the same piece wins, as in HF
  int32_t find(std::string_view piece) const {     // -1 when absent
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }
  const std::string* piece(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < pieces_.size() && has_[static_cast<size_t>(id)]
               ? &pieces_[static_cast<size_t>(id)]
               : nullptr;
  }
  int32_t end_id() const { return static_cast<int32_t>(pieces_.size()); }  // max id + 1
  int32_t count() const { return static_cast<int32_t>(ids_.size()); }       // distinct pieces (HF's vocab size)
  bool empty() const { return ids_.empty(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::string> pieces_;
  std::vector<bool> has_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of one pre-token (offsets within it).
  virtual void tokenize(std::string_view piece, std::vector<ModelToken>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// `where` names the field ("tok.json: field 'model'") in errors.
std::unique_ptr<Model> make_model(const nlohmann::json& j, const std::string& where);
std::unique_ptr<Model> make_bpe_model(const nlohmann::json& j, const std::string& where);
std::unique_ptr<Model> make_unigram_model(const nlohmann::json& j, const std::string& where);
std::unique_ptr<Model> make_wordpiece_model(const nlohmann::json& j, const std::string& where);
std::unique_ptr<Model> make_wordlevel_model(const nlohmann::json& j, const std::string& where);

// "<0xAB>": the byte-fallback piece of a byte.
std::string byte_piece(unsigned char b);
// A "vocab" object of piece -> id; errors name where.vocab.
Vocab read_vocab_object(const nlohmann::json& j, const std::string& where);

}  // namespace hymba::tok
