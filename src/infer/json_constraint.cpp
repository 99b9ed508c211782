#include "infer/json_constraint.h"

#include <limits>
#include <map>
#include <mutex>

#include "core/error.h"

namespace hymba::infer {

namespace {
// A token of plain text to decode others after: the first of "a", "x", "0"
// that encodes to a single token whose decode is that text.
int32_t anchor_token(const Tokenizer& tokenizer) {
  for (const char* text : {"a", "x", "0", "e"}) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    if (ids.size() == 1 && tokenizer.decode(ids) == text) return ids[0];
  }
  return -1;
}
}  // namespace

TokenPieces::TokenPieces(const Tokenizer& tokenizer) : pieces_(static_cast<size_t>(tokenizer.vocab_size())) {
  const int32_t anchor = anchor_token(tokenizer);
  const std::string anchor_text = anchor >= 0 ? tokenizer.decode({anchor}) : std::string();
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (id == tokenizer.eos_id() || id == tokenizer.bos_id() || id == tokenizer.pad_id()) continue;
    if (anchor < 0) {
      pieces_[static_cast<size_t>(id)] = tokenizer.decode({id});
      continue;
    }
    const std::string both = tokenizer.decode({anchor, id});
    if (both.size() > anchor_text.size() && both.compare(0, anchor_text.size(), anchor_text) == 0)
      pieces_[static_cast<size_t>(id)] = both.substr(anchor_text.size());
  }
}

std::shared_ptr<const TokenPieces> token_pieces(const Tokenizer& tokenizer) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const TokenPieces>> built;
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const TokenPieces>& p = built[tokenizer.fingerprint()];
  if (!p) p = std::make_shared<const TokenPieces>(tokenizer);
  return p;
}

JsonConstraint::JsonConstraint(std::shared_ptr<const TokenPieces> pieces, int32_t eos_id)
    : pieces_(std::move(pieces)), eos_id_(eos_id) {}

bool JsonConstraint::allows(int32_t token) const {
  if (token == eos_id_) return state_.complete();
  if (token < 0 || token >= pieces_->size()) return false;
  const std::string& piece = (*pieces_)[token];
  if (piece.empty()) return false;
  JsonPrefix next = state_;
  return next.feed(piece);
}

void JsonConstraint::mask(float* logits, int64_t n) const {
  bool any = false;
  for (int64_t id = 0; id < n; ++id) {
    if (allows(static_cast<int32_t>(id)))
      any = true;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  HYMBA_CHECK(any, "response_format json_object: no token of the vocabulary continues the JSON object");
}

void JsonConstraint::accept(int32_t token) {
  if (token == eos_id_) return;
  HYMBA_CHECK(allows(token), "json mode: token ", token, " does not continue the JSON object");
  state_.feed((*pieces_)[token]);
}

}  // namespace hymba::infer
