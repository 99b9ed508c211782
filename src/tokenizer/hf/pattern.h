// What HF's `Pattern` trait does: cut a string into matched and unmatched
// pieces, by a regex, a literal string or a character class. Split
// pre-tokenizers, Replace normalizers and decoders, Metaspace and the
// Whitespace / Digits / Punctuation pre-tokenizers all cut text this way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/hf/regex.h"

namespace hymba::tok {

struct Piece {
  size_t start, end;
  bool match;
};
// Covers the whole string in order (a string of length 0 gives {0, 0, false}).
using Pieces = std::vector<Piece>;

class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual Pieces find_matches(std::string_view text) const = 0;
};

std::unique_ptr<Pattern> make_regex_pattern(const std::string& regex, const std::string& where);
std::unique_ptr<Pattern> make_literal_pattern(std::string literal);
std::unique_ptr<Pattern> make_char_pattern(bool (*is_match)(uint32_t));
// tokenizer.json's {"Regex": "..."} or {"String": "..."}; errors name `where`.
std::unique_ptr<Pattern> pattern_from_json(const nlohmann::json& j, const std::string& where);

// Matched pieces become unmatched and the other way round (Split's invert).
Pieces invert(Pieces pieces);

}  // namespace hymba::tok
