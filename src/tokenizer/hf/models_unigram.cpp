// Unigram as HF `tokenizers` runs it (models/unigram/model.rs,
// encode_optimized, after sentencepiece): Viterbi over the pieces that start
// at each character (a byte trie gives them), a character no piece covers
// costs min_score - 10 as unk; consecutive unknowns are fused, then looked up
// again, or spelled as <0xAB> byte pieces with byte_fallback.
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/hf/models.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

constexpr double kUnkPenalty = 10.0;

class UnigramModel final : public Model {
 public:
  UnigramModel(const json& j, const std::string& where) {
    const json& list = field_array(j, "vocab", where);
    HYMBA_CHECK(!list.empty(), sub(where, ".vocab"), " is empty");
    scores_.reserve(list.size());
    nodes_.push_back({});
    for (size_t id = 0; id < list.size(); ++id) {
      const json& e = list[id];
      HYMBA_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(), sub(where, ".vocab"),
                  " entry ", id, " must be [\"piece\", score]");
      const std::string piece = e[0].get<std::string>();
      const double score = e[1].get<double>();
      vocab_.add(piece, static_cast<int32_t>(id));
      scores_.push_back(score);
      min_score_ = std::min(min_score_, score);
      insert(piece);
    }
    // Trie ends name the id the piece has in the vocabulary (its last entry).
    for (size_t n = 0; n < nodes_.size(); ++n)
      if (nodes_[n].piece_end) nodes_[n].id = vocab_.find(ends_[n]);
    ends_.clear();
    const int64_t unk = field_int(j, "unk_id", where, -1, 0, static_cast<int64_t>(list.size()) - 1);
    unk_id_ = static_cast<int32_t>(unk);
    byte_fallback_ = field_bool(j, "byte_fallback", where, false);
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) byte_ids_[static_cast<size_t>(b)] = vocab_.find(byte_piece(static_cast<unsigned char>(b)));
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view s, std::vector<ModelToken>& out) const override {
    if (s.empty()) return;
    struct Best {
      double score = 0;
      int32_t id = -1;
      int64_t start = -1;  // -1: not reached yet
    };
    std::vector<Best> best(s.size() + 1);
    const double unk_score = min_score_ - kUnkPenalty;
    for (size_t at = 0; at < s.size();) {
      const double here = best[at].score;
      const size_t mblen = char_len(s, at);
      bool single = false;
      int32_t node = 0;
      for (size_t k = at; k < s.size(); ++k) {
        node = child(node, static_cast<unsigned char>(s[k]));
        if (node < 0) break;
        if (!nodes_[static_cast<size_t>(node)].piece_end) continue;
        const int32_t id = nodes_[static_cast<size_t>(node)].id;
        const double cand = here + scores_[static_cast<size_t>(id)];
        Best& t = best[k + 1];
        if (t.start < 0 || cand > t.score) t = {cand, id, static_cast<int64_t>(at)};
        if (k + 1 - at == mblen) single = true;
      }
      if (!single) {
        HYMBA_CHECK(unk_id_ >= 0, "Unigram model has no unk_id and cannot encode \"", std::string(s.substr(at, mblen)),
                    "\"");
        Best& t = best[at + mblen];
        const double cand = here + unk_score;
        if (t.start < 0 || cand > t.score) t = {cand, unk_id_, static_cast<int64_t>(at)};
      }
      at += mblen;
    }
    // Back from the end; runs of unk nodes fuse into one piece.
    std::vector<ModelToken> rev;
    size_t end = s.size(), unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
      const Best& b = best[end];
      const auto start = static_cast<size_t>(b.start);
      if (b.id == unk_id_) {
        if (!in_unk) unk_end = end;
        in_unk = true;
      } else {
        if (in_unk) rev.push_back({-1, end, unk_end});
        in_unk = false;
        rev.push_back({b.id, start, end});
      }
      end = start;
    }
    if (in_unk) rev.push_back({-1, 0, unk_end});
    for (size_t k = rev.size(); k-- > 0;) {
      const ModelToken& t = rev[k];
      if (t.id >= 0) {
        out.push_back(t);
        continue;
      }
      emit_unknown(s, t.start, t.end, out);
    }
  }

 private:
  struct Node {
    bool piece_end = false;
    int32_t id = -1;
  };

  int32_t child(int32_t node, unsigned char b) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | b);
    return it == edges_.end() ? -1 : it->second;
  }

  void insert(const std::string& piece) {
    int32_t node = 0;
    for (unsigned char b : piece) {
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.push_back({});
        edges_[(static_cast<uint64_t>(node) << 8) | b] = next;
      }
      node = next;
    }
    nodes_[static_cast<size_t>(node)].piece_end = true;
    ends_[static_cast<size_t>(node)] = piece;
  }

  // A fused unknown run: its own piece if the vocabulary has it, else bytes, else unk.
  void emit_unknown(std::string_view s, size_t a, size_t b, std::vector<ModelToken>& out) const {
    const int32_t id = vocab_.find(s.substr(a, b - a));
    if (id >= 0) {
      out.push_back({id, a, b});
      return;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = a; k < b && all; ++k) all = byte_ids_[static_cast<unsigned char>(s[k])] >= 0;
      if (all) {
        for (size_t k = a; k < b; ++k) out.push_back({byte_ids_[static_cast<unsigned char>(s[k])], a, b});
        return;
      }
    }
    out.push_back({unk_id_, a, b});
  }

  Vocab vocab_;
  std::vector<double> scores_;
  double min_score_ = std::numeric_limits<double>::infinity();
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child
  std::unordered_map<size_t, std::string> ends_;  // while building: node -> piece
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};
};

}  // namespace

std::unique_ptr<Model> make_unigram_model(const json& j, const std::string& where) {
  return std::make_unique<UnigramModel>(j, where);
}

}  // namespace hymba::tok
