// HF's NormalizedString and PreTokenizedString: text being tokenized, with,
// for each of its bytes, the span of the original input it came from, so
// tokens map back to offsets in the caller's text after normalizers,
// Metaspace and ByteLevel have rewritten it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf/pattern.h"

namespace hymba::tok {

struct Span {
  uint32_t start = 0, end = 0;  // byte range of the original input
};

class NormalizedString {
 public:
  NormalizedString() = default;
  // `text` as the original; `base` is its offset in the whole input.
  explicit NormalizedString(std::string_view text, size_t base = 0);

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  size_t size() const { return text_.size(); }
  // The original span covered by bytes [a, b) of the text (a < b).
  Span original(size_t a, size_t b) const;
  // Original start of the first byte (HF's offsets_original().0).
  uint32_t original_start() const { return align_.empty() ? 0 : align_.front().start; }
  NormalizedString slice(size_t a, size_t b) const;

 private:
  friend class NormalizedBuilder;
  std::string text_;
  std::vector<Span> align_;  // one per byte of text_
};

// Builds a rewritten NormalizedString from a source, piece by piece, in order.
class NormalizedBuilder {
 public:
  explicit NormalizedBuilder(const NormalizedString& src) : src_(src) { out_.text_.reserve(src.size() + 8); }
  // Bytes [a, b) of the source, unchanged.
  void keep(size_t a, size_t b);
  // `s` in place of source bytes [a, b): every byte of it maps to their span.
  // With a == b, `s` is inserted and maps to the character at a (or the one before).
  void put(std::string_view s, size_t a, size_t b);
  NormalizedString finish() { return std::move(out_); }

 private:
  const NormalizedString& src_;
  NormalizedString out_;
};

// The text rewritten character by character: map(cp, out) appends the
// replacement of each character (nothing removes it).
template <typename Map>
NormalizedString map_chars(const NormalizedString& s, Map&& map);

// HF's SplitDelimiterBehavior: what becomes of the matched pieces.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
// "Removed", "Isolated", ...; errors name `where`.
SplitBehavior split_behavior_from_name(const std::string& name, const std::string& where);

// Cuts `s` at the pieces of a pattern as `behavior` says; empty parts dropped.
std::vector<NormalizedString> split_normalized(const NormalizedString& s, const Pieces& pieces, SplitBehavior behavior);

// A token found before the model runs (an added token).
struct PreToken {
  NormalizedString text;
  int32_t id = -1;  // >= 0: already a token
};
using PreTokenized = std::vector<PreToken>;

}  // namespace hymba::tok

#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

template <typename Map>
NormalizedString map_chars(const NormalizedString& s, Map&& map) {
  NormalizedBuilder b(s);
  std::string buf;
  const std::string& t = s.text();
  for (size_t i = 0; i < t.size();) {
    const CodePoint c = next_code_point(t, i);
    buf.clear();
    map(c.cp, buf);
    if (buf.size() == c.len && t.compare(i, c.len, buf) == 0) b.keep(i, i + c.len);
    else b.put(buf, i, i + c.len);
    i += c.len;
  }
  return b.finish();
}

}  // namespace hymba::tok
