#include "infer/json_prefix.h"

namespace hymba::infer {

namespace {
bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool JsonPrefix::in_string() const {
  switch (mode_) {
    case Mode::kString:
    case Mode::kEscape:
    case Mode::kHex:
    case Mode::kLowBackslash:
    case Mode::kLowU:
    case Mode::kUtf8:
      return true;
    default:
      return false;
  }
}

bool JsonPrefix::feed(std::string_view bytes) {
  for (const char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonPrefix::feed(uint8_t c) {
  const JsonPrefix before = *this;
  bool ok = false;
  switch (mode_) {
    case Mode::kStart:
      ok = whitespace(c) || (c == '{' && open_container(true));
      break;
    case Mode::kValue:
      ok = whitespace(c) || value_start(c);
      break;
    case Mode::kKeyOrClose:
    case Mode::kKey:
      if (whitespace(c)) {
        ok = true;
      } else if (c == '"') {
        mode_ = Mode::kString;
        key_ = true;
        ok = true;
      } else if (c == '}' && mode_ == Mode::kKeyOrClose) {
        ok = after_value(c);
      }
      break;
    case Mode::kColon:
      if (c == ':') {
        mode_ = Mode::kValue;
        ws_run_ = 0;
        ok = true;
      } else {
        ok = whitespace(c);
      }
      break;
    case Mode::kValueOrClose:
      ok = whitespace(c) || (c == ']' ? after_value(c) : value_start(c));
      break;
    case Mode::kAfterValue:
      ok = after_value(c);
      break;
    case Mode::kString:
    case Mode::kUtf8:
      ok = string_byte(c);
      break;
    case Mode::kEscape:
      ok = escape_byte(c);
      break;
    case Mode::kHex:
      ok = hex_byte(c);
      break;
    case Mode::kLowBackslash:
      ok = c == '\\';
      mode_ = Mode::kLowU;
      break;
    case Mode::kLowU:
      ok = c == 'u';
      mode_ = Mode::kHex;
      hex_left_ = 4;
      code_ = 0;
      break;
    case Mode::kLiteral:
      ok = c == static_cast<uint8_t>(*literal_);
      if (ok && *++literal_ == '\0') value_done();
      break;
    case Mode::kDone:
      break;
    default:
      ok = number_byte(c);
      break;
  }
  if (!ok) *this = before;
  return ok;
}

// Whitespace between tokens, at most kMaxWhitespaceRun bytes in a row.
bool JsonPrefix::whitespace(uint8_t c) {
  if (!is_ws(c) || ws_run_ >= kMaxWhitespaceRun) return false;
  ++ws_run_;
  return true;
}

bool JsonPrefix::open_container(bool object) {
  if (depth_ >= kMaxDepth) return false;
  if (object)
    objects_ |= uint64_t{1} << depth_;
  else
    objects_ &= ~(uint64_t{1} << depth_);
  ++depth_;
  ws_run_ = 0;
  mode_ = object ? Mode::kKeyOrClose : Mode::kValueOrClose;
  return true;
}

bool JsonPrefix::value_start(uint8_t c) {
  ws_run_ = 0;
  if (c == '{' || c == '[') return open_container(c == '{');
  if (c == '"') {
    mode_ = Mode::kString;
    key_ = false;
    return true;
  }
  if (c == '-' || is_digit(c)) {
    mode_ = c == '-' ? Mode::kMinus : c == '0' ? Mode::kZero : Mode::kInt;
    return true;
  }
  static constexpr const char* kLiterals[] = {"true", "false", "null"};
  for (const char* lit : kLiterals)
    if (c == static_cast<uint8_t>(lit[0])) {
      mode_ = Mode::kLiteral;
      literal_ = lit + 1;
      return true;
    }
  return false;
}

// After a value: whitespace, ',' or the close of the container it sits in.
bool JsonPrefix::after_value(uint8_t c) {
  if (whitespace(c)) return true;
  ws_run_ = 0;
  const bool object = depth_ > 0 && ((objects_ >> (depth_ - 1)) & 1) != 0;
  if (c == ',' && depth_ > 0) {
    mode_ = object ? Mode::kKey : Mode::kValue;
    return true;
  }
  if ((c == '}' && object) || (c == ']' && depth_ > 0 && !object)) {
    --depth_;
    mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
    return true;
  }
  return false;
}

// Inside a string: UTF-8 checked as strict parsers check it.
bool JsonPrefix::string_byte(uint8_t c) {
  if (utf8_left_ > 0) {
    if (c < utf8_lo_ || c > utf8_hi_) return false;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    if (--utf8_left_ == 0) mode_ = Mode::kString;
    return true;
  }
  if (c == '"') {
    if (key_) {
      mode_ = Mode::kColon;
    } else {
      value_done();
    }
    ws_run_ = 0;
    return true;
  }
  if (c == '\\') {
    mode_ = Mode::kEscape;
    return true;
  }
  if (c < 0x20) return false;  // control characters must be escaped
  if (c < 0x80) return true;
  // A lead byte: how many continuation bytes, and the range of the first.
  if (c >= 0xC2 && c <= 0xDF) {
    utf8_left_ = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    utf8_left_ = 2;
    if (c == 0xE0) utf8_lo_ = 0xA0;  // no overlong forms
    if (c == 0xED) utf8_hi_ = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    utf8_left_ = 3;
    if (c == 0xF0) utf8_lo_ = 0x90;
    if (c == 0xF4) utf8_hi_ = 0x8F;  // nothing past U+10FFFF
  } else {
    return false;
  }
  mode_ = Mode::kUtf8;
  return true;
}

bool JsonPrefix::escape_byte(uint8_t c) {
  if (want_low_) return false;  // a high surrogate's partner is a \u escape (kLowBackslash)
  switch (c) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      mode_ = Mode::kString;
      return true;
    case 'u':
      mode_ = Mode::kHex;
      hex_left_ = 4;
      code_ = 0;
      return true;
    default:
      return false;
  }
}

// A \u escape's digits; surrogates come in high-low pairs.
bool JsonPrefix::hex_byte(uint8_t c) {
  const int v = hex_value(c);
  if (v < 0) return false;
  code_ = static_cast<uint16_t>(code_ << 4 | v);
  if (--hex_left_ > 0) return true;
  const bool high = code_ >= 0xD800 && code_ <= 0xDBFF, low = code_ >= 0xDC00 && code_ <= 0xDFFF;
  if (want_low_ != low || (want_low_ && high)) return false;
  want_low_ = high;
  mode_ = high ? Mode::kLowBackslash : Mode::kString;
  return true;
}

// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?; a byte that ends
// a complete number is read as what follows the value.
bool JsonPrefix::number_byte(uint8_t c) {
  switch (mode_) {
    case Mode::kMinus:
      if (!is_digit(c)) return false;
      mode_ = c == '0' ? Mode::kZero : Mode::kInt;
      return true;
    case Mode::kInt:
      if (is_digit(c)) return true;
      [[fallthrough]];
    case Mode::kZero:
      if (c == '.') {
        mode_ = Mode::kDot;
        return true;
      }
      [[fallthrough]];
    case Mode::kFrac:
      if (mode_ == Mode::kFrac && is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        mode_ = Mode::kExp;
        return true;
      }
      value_done();
      return after_value(c);
    case Mode::kDot:
      if (!is_digit(c)) return false;
      mode_ = Mode::kFrac;
      return true;
    case Mode::kExp:
      if (c == '+' || c == '-') {
        mode_ = Mode::kExpSign;
        return true;
      }
      [[fallthrough]];
    case Mode::kExpSign:
      if (!is_digit(c)) return false;
      mode_ = Mode::kExpDigits;
      return true;
    case Mode::kExpDigits:
      if (is_digit(c)) return true;
      value_done();
      return after_value(c);
    default:
      return false;
  }
}

}  // namespace hymba::infer
