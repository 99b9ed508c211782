// JSON mode: sampling constrained so that a sequence's text is one JSON
// object (OpenAI's response_format {"type": "json_object"}). Before each
// token is drawn, every vocabulary entry whose bytes cannot continue the
// object (infer/json_prefix.h) gets a logit of -infinity; EOS only once the
// object is closed, and the sequence ends there ("stop"). A sequence cut by
// max_tokens may hold an unfinished object, as OpenAI's does.
//
// A token's bytes are what it adds in the middle of a text: the decode of
// [anchor, token] less the decode of [anchor], for an anchor token of plain
// text. So a sentencepiece piece "▁x" adds " x", and a WordPiece "##x"
// adds "x" (the first token of a text may lose a leading space to the
// decoder, which JSON ignores). Tokens that add nothing (specials) or whose
// decode does not extend the anchor's are never allowed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "infer/json_prefix.h"

namespace hymba::infer {

// What each token id adds to a text, for one tokenizer.
class TokenPieces {
 public:
  explicit TokenPieces(const Tokenizer& tokenizer);
  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& operator[](int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> pieces_;  // "" for tokens JSON mode never allows
};

// The pieces of a tokenizer, built on first use and shared by every
// sequence of the process that uses a tokenizer with the same fingerprint.
std::shared_ptr<const TokenPieces> token_pieces(const Tokenizer& tokenizer);

class JsonConstraint {
 public:
  JsonConstraint(std::shared_ptr<const TokenPieces> pieces, int32_t eos_id);
  // Sets logits[id] to -infinity for every id in [0, n) that cannot come
  // next; throws when none can (a vocabulary without the bytes JSON needs).
  void mask(float* logits, int64_t n) const;
  // Whether `token` may come next (what mask() keeps).
  bool allows(int32_t token) const;
  // Advances past an allowed token.
  void accept(int32_t token);
  bool complete() const { return state_.complete(); }
  const JsonPrefix& state() const { return state_; }

 private:
  std::shared_ptr<const TokenPieces> pieces_;
  int32_t eos_id_;
  JsonPrefix state_;
};

}  // namespace hymba::infer
