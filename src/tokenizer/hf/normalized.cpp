#include "tokenizer/hf/normalized.h"

#include <algorithm>

#include "core/error.h"

namespace hymba::tok {

NormalizedString::NormalizedString(std::string_view text, size_t base) : text_(text) {
  align_.resize(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = char_len(text, i);
    const Span span{static_cast<uint32_t>(base + i), static_cast<uint32_t>(base + i + len)};
    for (size_t k = 0; k < len; ++k) align_[i + k] = span;
    i += len;
  }
}

Span NormalizedString::original(size_t a, size_t b) const {
  if (align_.empty()) return {};
  if (a >= align_.size()) return {align_.back().end, align_.back().end};
  b = std::min(b, align_.size());
  if (b <= a) return {align_[a].start, align_[a].start};
  Span s{align_[a].start, align_[a].end};
  for (size_t i = a; i < b; ++i) {
    s.start = std::min(s.start, align_[i].start);
    s.end = std::max(s.end, align_[i].end);
  }
  return s;
}

NormalizedString NormalizedString::slice(size_t a, size_t b) const {
  NormalizedString out;
  out.text_ = text_.substr(a, b - a);
  out.align_.assign(align_.begin() + static_cast<std::ptrdiff_t>(a), align_.begin() + static_cast<std::ptrdiff_t>(b));
  return out;
}

void NormalizedBuilder::keep(size_t a, size_t b) {
  out_.text_.append(src_.text_, a, b - a);
  out_.align_.insert(out_.align_.end(), src_.align_.begin() + static_cast<std::ptrdiff_t>(a),
                     src_.align_.begin() + static_cast<std::ptrdiff_t>(b));
}

void NormalizedBuilder::put(std::string_view s, size_t a, size_t b) {
  Span span;
  if (a < b) {
    span = src_.original(a, b);
  } else if (a < src_.align_.size()) {
    span = src_.align_[a];
  } else if (!out_.align_.empty()) {
    span = out_.align_.back();
  } else if (!src_.align_.empty()) {
    span = src_.align_.back();
  }
  out_.text_.append(s);
  out_.align_.insert(out_.align_.end(), s.size(), span);
}

SplitBehavior split_behavior_from_name(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(where, " is \"", name, "\"; expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

std::vector<NormalizedString> split_normalized(const NormalizedString& s, const Pieces& pieces,
                                               SplitBehavior behavior) {
  // (start, end, drop) parts, as HF's NormalizedString::split computes them.
  struct Part {
    size_t start, end;
    bool drop;
  };
  std::vector<Part> parts;
  parts.reserve(pieces.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Piece& p : pieces) parts.push_back({p.start, p.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Piece& p : pieces) parts.push_back({p.start, p.end, p.match});
      break;
    case SplitBehavior::kContiguous:
      for (const Piece& p : pieces) {
        if (p.match == previous_match && !parts.empty()) parts.back().end = p.end;
        else parts.push_back({p.start, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Piece& p : pieces) {
        if (p.match && !previous_match && !parts.empty()) parts.back().end = p.end;
        else parts.push_back({p.start, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = pieces.size(); k-- > 0;) {
        const Piece& p = pieces[k];
        if (p.match && !previous_match && !parts.empty()) parts.back().start = p.start;
        else parts.push_back({p.start, p.end, false});
        previous_match = p.match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  std::vector<NormalizedString> out;
  out.reserve(parts.size());
  for (const Part& p : parts)
    if (!p.drop && p.end > p.start) out.push_back(s.slice(p.start, p.end));
  return out;
}

}  // namespace hymba::tok
