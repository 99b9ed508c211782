// Tokenizer of the Jinja subset: @huggingface/jinja's preprocess() and
// tokenize(), step for step, since whitespace handling decides whether a
// rendered prompt is byte-identical.
#include <array>
#include <cstring>

#include "chat/jinja_ast.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::jinja {

namespace {

// Decodes the UTF-8 character at s[i]; returns its code point and length
// (an invalid byte is itself, length 1).
std::pair<uint32_t, size_t> decode_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1};
  const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (n == 1 || i + n > s.size()) return {c, 1};
  uint32_t cp = c & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {cp, n};
}

bool is_js_space(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680: case 0x2028:
    case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool line_start(std::string_view s, size_t i) {
  if (i == 0) return true;
  if (s[i - 1] == '\n' || s[i - 1] == '\r') return true;
  // JS's multiline ^ also follows U+2028 and U+2029 (E2 80 A8/A9).
  return i >= 3 && s.substr(i - 3, 2) == "\xE2\x80" && (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// preprocess(): drop one trailing newline; lstrip_blocks (/^[ \t]*({[#%-])/gm);
// trim_blocks (/([#%-]})\n/g); {% generation %} tags removed.
std::string preprocess(std::string_view in) {
  if (!in.empty() && in.back() == '\n') in.remove_suffix(1);
  std::string a;
  a.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    if (line_start(in, i)) {
      size_t j = i;
      while (j < in.size() && (in[j] == ' ' || in[j] == '\t')) ++j;
      if (j > i && j + 1 < in.size() && in[j] == '{' && (in[j + 1] == '#' || in[j + 1] == '%' || in[j + 1] == '-')) {
        i = j;  // the block tag keeps its place; the indentation goes
      }
    }
    a += in[i++];
  }
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    b += a[i];
    if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') && i + 1 < a.size() &&
        a[i + 1] == '\n')
      ++i;
  }
  // (\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*): the tag goes, and the
  // whitespace around it too on a side marked with '-'.
  std::string out;
  out.reserve(b.size());
  size_t i = 0;
  while (i < b.size()) {
    const size_t open = b.find("{%", i);
    if (open == std::string::npos) break;
    size_t j = open + 2;
    const bool strip_before = j < b.size() && b[j] == '-';
    if (strip_before) ++j;
    while (size_t n = js_space_at(b, j)) j += n;
    if (b.compare(j, 3, "end") == 0 && b.compare(j + 3, 10, "generation") == 0) j += 3;
    if (b.compare(j, 10, "generation") != 0) {
      out.append(b, i, open + 2 - i);
      i = open + 2;
      continue;
    }
    j += 10;
    while (size_t n = js_space_at(b, j)) j += n;
    const bool strip_after = j < b.size() && b[j] == '-';
    if (strip_after) ++j;
    if (b.compare(j, 2, "%}") != 0) {
      out.append(b, i, open + 2 - i);
      i = open + 2;
      continue;
    }
    j += 2;
    size_t before = open;
    while (before > i && js_space_before(b, before) > 0) before -= js_space_before(b, before);
    out.append(b, i, (strip_before ? before : open) - i);
    size_t after = j;
    while (size_t n = js_space_at(b, after)) after += n;
    if (!strip_after) out.append(b, j, after - j);
    i = after;
  }
  out.append(b, i, std::string::npos);
  return out;
}

}  // namespace

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const auto [cp, n] = decode_at(s, i);
  return is_js_space(cp) ? n : 0;
}

size_t js_space_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    const auto c = static_cast<unsigned char>(s[end - n]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    return js_space_at(s, end - n) == n ? n : 0;
  }
  return 0;
}

std::string js_trim(std::string_view s, bool start, bool end) {
  size_t b = 0, e = s.size();
  if (start)
    while (size_t n = js_space_at(s, b)) b += n;
  if (end)
    while (e > b && js_space_before(s, e) > 0) e -= js_space_before(s, e);
  return std::string(s.substr(b, e - b));
}

namespace {

constexpr std::array<std::pair<const char*, Tok>, 29> kFixed = {{
    {"{%", Tok::kOpenStatement}, {"%}", Tok::kCloseStatement}, {"{{", Tok::kOpenExpression},
    {"}}", Tok::kCloseExpression}, {"(", Tok::kOpenParen}, {")", Tok::kCloseParen}, {"{", Tok::kOpenCurly},
    {"}", Tok::kCloseCurly}, {"[", Tok::kOpenSquare}, {"]", Tok::kCloseSquare}, {",", Tok::kComma},
    {".", Tok::kDot}, {":", Tok::kColon}, {"|", Tok::kPipe}, {"<=", Tok::kComparison}, {">=", Tok::kComparison},
    {"==", Tok::kComparison}, {"!=", Tok::kComparison}, {"<", Tok::kComparison}, {">", Tok::kComparison},
    {"+", Tok::kAdditive}, {"-", Tok::kAdditive}, {"~", Tok::kAdditive}, {"**", Tok::kPower},
    {"*", Tok::kMultiplicative}, {"//", Tok::kMultiplicative}, {"/", Tok::kMultiplicative},
    {"%", Tok::kMultiplicative}, {"=", Tok::kEquals}}};

// One pass over a preprocessed template, as @huggingface/jinja's lexer
// reads it: text between tags, comments, whitespace control, then the
// tokens inside tags.
class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)), size_(src_.size()) {}

  std::vector<Token> run() {
    while (pos_ < size_) {
      if (after_tag() && text()) continue;
      if (src_[pos_] == '{' && at(pos_ + 1) == '#') {
        comment();
        continue;
      }
      if (opening_with_strip()) continue;
      skip_whitespace();
      if (pos_ >= size_) break;
      if (closing_with_strip()) continue;
      if (signed_number()) continue;
      if (fixed_token()) continue;
      if (literal_or_identifier()) continue;
      throw SyntaxError(std::string("unexpected character: '") + src_[pos_] + "'");
    }
    return std::move(tokens_);
  }

 private:
  char at(size_t i) const { return i < size_ ? src_[i] : '\0'; }
  bool starts(const char* s) const { return src_.compare(pos_, std::strlen(s), s) == 0; }
  const Tok* last_type() const { return tokens_.empty() ? nullptr : &tokens_.back().type; }
  void skip_whitespace() {
    while (size_t n = js_space_at(src_, pos_)) pos_ += n;
  }
  void strip_trailing_whitespace() {
    if (!tokens_.empty() && tokens_.back().type == Tok::kText) {
      tokens_.back().value = js_trim(tokens_.back().value, false, true);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }
  bool after_tag() const {
    const Tok* last = last_type();
    return last == nullptr || *last == Tok::kCloseStatement || *last == Tok::kCloseExpression || *last == Tok::kComment;
  }

  // Text up to the next tag; false when a tag starts here.
  bool text() {
    const size_t begin = pos_;
    while (pos_ < size_ && !(src_[pos_] == '{' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '{' || at(pos_ + 1) == '#')))
      ++pos_;
    if (pos_ == begin) return false;
    tokens_.push_back({src_.substr(begin, pos_ - begin), Tok::kText});
    return true;
  }

  // {# ... #}, with {#- and -#} stripping the whitespace around it.
  void comment() {
    pos_ += 2;
    const bool strip_before = at(pos_) == '-';
    if (strip_before) ++pos_;
    const size_t begin = pos_;
    while (at(pos_) != '#' || at(pos_ + 1) != '}') {
      if (pos_ + 2 >= size_) throw SyntaxError("missing end of comment tag");
      ++pos_;
    }
    std::string body = src_.substr(begin, pos_ - begin);
    const bool strip_after = !body.empty() && body.back() == '-';
    if (strip_after) body.pop_back();
    if (strip_before) strip_trailing_whitespace();
    tokens_.push_back({std::move(body), Tok::kComment});
    pos_ += 2;
    if (strip_after) skip_whitespace();
  }

  // {%- and {{-: the tag, with the text before it stripped at its end.
  bool opening_with_strip() {
    if (!starts("{%-") && !starts("{{-")) return false;
    const bool statement = starts("{%-");
    strip_trailing_whitespace();
    tokens_.push_back(statement ? Token{"{%", Tok::kOpenStatement} : Token{"{{", Tok::kOpenExpression});
    if (!statement) curly_depth_ = 0;
    pos_ += 3;
    return true;
  }

  // -%} and -}}: the tag, and the whitespace after it skipped.
  bool closing_with_strip() {
    if (!starts("-%}") && !starts("-}}")) return false;
    tokens_.push_back(starts("-%}") ? Token{"%}", Tok::kCloseStatement} : Token{"}}", Tok::kCloseExpression});
    pos_ += 3;
    skip_whitespace();
    return true;
  }

  std::string digits() {
    const size_t begin = pos_;
    while (is_digit(at(pos_))) ++pos_;
    return src_.substr(begin, pos_ - begin);
  }

  // A + or - where no operand precedes it: a signed number, or a unary operator.
  bool signed_number() {
    const char c = src_[pos_];
    if (c != '-' && c != '+') return false;
    const Tok* prev = last_type();
    if (prev == nullptr || *prev == Tok::kText) throw SyntaxError(std::string("unexpected character: ") + c);
    if (*prev == Tok::kIdentifier || *prev == Tok::kNumber || *prev == Tok::kString || *prev == Tok::kCloseParen ||
        *prev == Tok::kCloseSquare)
      return false;
    ++pos_;
    std::string num = digits();
    if (!num.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
      ++pos_;
      num += "." + digits();
    }
    tokens_.push_back({std::string(1, c) + num, num.empty() ? Tok::kUnary : Tok::kNumber});
    return true;
  }

  // Delimiters and operators; }} closes an expression only outside { }.
  bool fixed_token() {
    for (const auto& [seq, type] : kFixed) {
      if (type == Tok::kCloseExpression && curly_depth_ > 0) continue;
      if (!starts(seq)) continue;
      tokens_.push_back({seq, type});
      if (type == Tok::kOpenExpression) curly_depth_ = 0;
      if (type == Tok::kOpenCurly) ++curly_depth_;
      if (type == Tok::kCloseCurly) --curly_depth_;
      pos_ += std::strlen(seq);
      return true;
    }
    return false;
  }

  bool literal_or_identifier() {
    const char c = src_[pos_];
    if (c == '\'' || c == '"') {
      ++pos_;
      std::string str = string_body(c);
      tokens_.push_back({std::move(str), Tok::kString});
      ++pos_;
      return true;
    }
    if (is_digit(c)) {
      std::string num = digits();
      if (!(last_type() != nullptr && *last_type() == Tok::kDot) && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
        ++pos_;
        num += "." + digits();
      }
      tokens_.push_back({std::move(num), Tok::kNumber});
      return true;
    }
    if (is_word(c)) {
      const size_t begin = pos_;
      while (is_word(at(pos_))) ++pos_;
      tokens_.push_back({src_.substr(begin, pos_ - begin), Tok::kIdentifier});
      return true;
    }
    return false;
  }

  // \xHH or \uHHHH at pos_ (after the backslash and the letter), as UTF-8.
  void hex_escape(char e, std::string& str) {
    const size_t len = e == 'x' ? 2 : 4;
    if (pos_ + len > size_) throw SyntaxError("invalid hexadecimal escape sequence");
    uint32_t cp = 0;
    for (size_t k = 0; k < len; ++k) {
      const char h = src_[pos_ + k];
      const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) throw SyntaxError(std::string("invalid hexadecimal escape sequence: \\") + e + src_.substr(pos_, len));
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) throw SyntaxError("a \\u escape of a lone surrogate is not supported");
    tok::append_utf8(str, cp);
    pos_ += len;
  }

  // A string literal's body up to `quote`, with escapes resolved.
  std::string string_body(char quote) {
    static constexpr std::array<std::pair<char, char>, 9> kEscapes = {
        {{'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'b', '\b'}, {'f', '\f'}, {'v', '\v'}, {'\'', '\''}, {'"', '"'}, {'\\', '\\'}}};
    std::string str;
    while (at(pos_) != quote) {
      if (pos_ >= size_) throw SyntaxError("unexpected end of input in a string literal");
      if (src_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= size_) throw SyntaxError("unexpected end of input");
        const char e = src_[pos_++];
        if (e == 'x' || e == 'u') {
          hex_escape(e, str);
          continue;
        }
        bool known = false;
        for (const auto& [from, to] : kEscapes)
          if (from == e) {
            str += to;
            known = true;
          }
        if (!known) throw SyntaxError(std::string("unexpected escaped character: ") + e);
        continue;
      }
      str += src_[pos_++];
      if (pos_ >= size_) throw SyntaxError("unexpected end of input in a string literal");
    }
    return str;
  }

  const std::string src_;
  const size_t size_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (source.size() > kMaxTemplateBytes) throw SyntaxError("the template is longer than 1 MiB");
  return Lexer(preprocess(source)).run();
}

}  // namespace hymba::jinja
