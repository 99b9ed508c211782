#include "tokenizer/hf/pattern.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

namespace {

// Matched spans -> pieces covering the text, gaps between them unmatched.
Pieces pieces_from_spans(const std::vector<MatchSpan>& spans, size_t size) {
  if (size == 0) return {{0, 0, false}};
  Pieces out;
  out.reserve(spans.size() * 2 + 1);
  size_t prev = 0;
  for (const MatchSpan& m : spans) {
    if (prev != m.start) out.push_back({prev, m.start, false});
    out.push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != size) out.push_back({prev, size, false});
  return out;
}

class RegexPattern final : public Pattern {
 public:
  RegexPattern(const std::string& regex, const std::string& where) : re_(regex, where) {}
  Pieces find_matches(std::string_view text) const override {
    if (text.empty()) return {{0, 0, false}};
    return pieces_from_spans(re_.find_all(text), text.size());
  }

 private:
  Regex re_;
};

class LiteralPattern final : public Pattern {
 public:
  explicit LiteralPattern(std::string literal) : literal_(std::move(literal)) {}
  Pieces find_matches(std::string_view text) const override {
    if (text.empty() || literal_.empty()) return {{0, text.size(), false}};
    std::vector<MatchSpan> spans;
    for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
      spans.push_back({at, at + literal_.size()});
    return pieces_from_spans(spans, text.size());
  }

 private:
  std::string literal_;
};

class CharPattern final : public Pattern {
 public:
  explicit CharPattern(bool (*is_match)(uint32_t)) : is_match_(is_match) {}
  Pieces find_matches(std::string_view text) const override {
    if (text.empty()) return {{0, 0, false}};
    std::vector<MatchSpan> spans;
    for (size_t i = 0; i < text.size();) {
      const CodePoint c = next_code_point(text, i);
      if (is_match_(c.cp)) spans.push_back({i, i + c.len});
      i += c.len;
    }
    return pieces_from_spans(spans, text.size());
  }

 private:
  bool (*is_match_)(uint32_t);
};

}  // namespace

std::unique_ptr<Pattern> make_regex_pattern(const std::string& regex, const std::string& where) {
  return std::make_unique<RegexPattern>(regex, where);
}
std::unique_ptr<Pattern> make_literal_pattern(std::string literal) {
  return std::make_unique<LiteralPattern>(std::move(literal));
}
std::unique_ptr<Pattern> make_char_pattern(bool (*is_match)(uint32_t)) { return std::make_unique<CharPattern>(is_match); }

std::unique_ptr<Pattern> pattern_from_json(const nlohmann::json& j, const std::string& where) {
  HYMBA_CHECK(j.is_object() && j.size() == 1 && (j.contains("Regex") || j.contains("String")), where,
              " must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  const bool regex = j.contains("Regex");
  const nlohmann::json& v = regex ? j["Regex"] : j["String"];
  HYMBA_CHECK(v.is_string(), where, (regex ? ".Regex" : ".String"), " must be a string");
  if (regex) return make_regex_pattern(v.get<std::string>(), where);
  return make_literal_pattern(v.get<std::string>());
}

Pieces invert(Pieces pieces) {
  for (Piece& p : pieces) p.match = !p.match;
  return pieces;
}

}  // namespace hymba::tok
