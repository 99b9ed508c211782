// WordPiece (BERT) and WordLevel as HF `tokenizers` runs them: WordPiece
// takes the longest vocabulary piece at each point (later pieces carry the
// continuing_subword_prefix, "##"); a word it cannot cover, or longer than
// max_input_chars_per_word, becomes one unk_token. WordLevel looks words up whole.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/hf/models.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

class WordPieceModel final : public Model {
 public:
  WordPieceModel(const json& j, const std::string& where) : vocab_(read_vocab_object(j, where)) {
    unk_ = field_string_or(j, "unk_token", where, "[UNK]");
    prefix_ = field_string_or(j, "continuing_subword_prefix", where, "##");
    max_chars_ = static_cast<size_t>(field_int(j, "max_input_chars_per_word", where, 100, 0, int64_t{1} << 40));
  }
  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view w, std::vector<ModelToken>& out) const override {
    size_t chars = 0;
    for (size_t i = 0; i < w.size(); i += char_len(w, i)) ++chars;
    if (chars > max_chars_) return unknown(w, out);
    const size_t first = out.size();
    std::string buf;
    for (size_t start = 0; start < w.size();) {
      size_t end = w.size();
      int32_t id = -1;
      while (start < end) {
        std::string_view piece = w.substr(start, end - start);
        if (start > 0) {
          buf.assign(prefix_).append(piece);
          piece = buf;
        }
        id = vocab_.find(piece);
        if (id >= 0) break;
        end = prev_char_start(w, end);
      }
      if (id < 0) {
        out.resize(first);
        return unknown(w, out);
      }
      out.push_back({id, start, end});
      start = end;
    }
  }

 private:
  void unknown(std::string_view w, std::vector<ModelToken>& out) const {
    const int32_t id = vocab_.find(unk_);
    HYMBA_CHECK(id >= 0, "WordPiece unk_token \"", unk_, "\" is not in the vocabulary");
    out.push_back({id, 0, w.size()});
  }

  Vocab vocab_;
  std::string unk_, prefix_;
  size_t max_chars_ = 100;
};

class WordLevelModel final : public Model {
 public:
  WordLevelModel(const json& j, const std::string& where) : vocab_(read_vocab_object(j, where)) {
    unk_ = field_string_or(j, "unk_token", where, "<unk>");
  }
  const Vocab& vocab() const override { return vocab_; }
  void tokenize(std::string_view w, std::vector<ModelToken>& out) const override {
    int32_t id = vocab_.find(w);
    if (id < 0) id = vocab_.find(unk_);
    HYMBA_CHECK(id >= 0, "WordLevel unk_token \"", unk_, "\" is not in the vocabulary");
    out.push_back({id, 0, w.size()});
  }

 private:
  Vocab vocab_;
  std::string unk_;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece_model(const json& j, const std::string& where) {
  return std::make_unique<WordPieceModel>(j, where);
}
std::unique_ptr<Model> make_wordlevel_model(const json& j, const std::string& where) {
  return std::make_unique<WordLevelModel>(j, where);
}

}  // namespace hymba::tok
