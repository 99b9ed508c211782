#include "tokenizer/hf/unicode_text.h"

#include <unicase.h>
#include <unictype.h>

#include <array>
#include <cstdlib>

namespace hymba::tok {

CodePoint next_code_point(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte (no overlongs, surrogates)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {kInvalidCp + b0, 1};
  }
  if (i + len > s.size()) return {kInvalidCp + b0, 1};
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < lo || b1 > hi) return {kInvalidCp + b0, 1};
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {kInvalidCp + b0, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, len};
}

size_t prev_char_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  // Back over at most 3 continuation bytes, then check a character ends at `end`.
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  if (next_code_point(s, start).len == end - start) return start;
  return end - 1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const CodePoint c = next_code_point(s, i);
    if (c.cp >= kInvalidCp) return false;
    i += c.len;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const CodePoint c = next_code_point(s, i);
    if (c.cp < kInvalidCp) {
      out.append(s, i, c.len);
      i += c.len;
      continue;
    }
    // A maximal subpart: the longest prefix of a valid sequence (lead byte and
    // continuation bytes in range) is replaced as one unit (Unicode 3.9, as Rust does).
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    size_t k = 1;
    for (; k < len && i + k < s.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp < kInvalidCp && uc_is_property_white_space(cp);
}

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return cp < kInvalidCp && uc_is_general_category(cp, UC_NUMBER);
}

bool is_punctuation(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                        (cp >= 0x7B && cp <= 0x7E);
  return cp < kInvalidCp && uc_is_general_category(cp, UC_PUNCTUATION);
}

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
  if (cp >= kInvalidCp) return false;
  return uc_is_property_alphabetic(cp) || uc_is_general_category(cp, UC_MARK) ||
         uc_is_general_category(cp, UC_DECIMAL_DIGIT_NUMBER) || uc_is_general_category(cp, UC_CONNECTOR_PUNCTUATION) ||
         uc_is_property_join_control(cp);
}

bool is_mark_nonspacing(uint32_t cp) { return cp >= 0x80 && cp < kInvalidCp && uc_is_general_category(cp, UC_NON_SPACING_MARK); }
bool is_combining_mark(uint32_t cp) { return cp >= 0x80 && cp < kInvalidCp && uc_is_general_category(cp, UC_MARK); }

bool is_other(uint32_t cp) {
  if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
  return cp >= kInvalidCp || uc_is_general_category(cp, UC_OTHER);
}

namespace {

struct ByteLevelTables {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes;  // code point (< 512) -> byte
  ByteLevelTables() {
    bytes.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : 256 + extra++;
      append_utf8(chars[static_cast<size_t>(b)], static_cast<uint32_t>(cp));
      bytes[static_cast<size_t>(cp)] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return byte_level_tables().chars[b]; }
int byte_level_byte(uint32_t cp) { return cp < 512 ? byte_level_tables().bytes[cp] : -1; }

void append_lowercase(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (cp >= kInvalidCp) {
    out.push_back(static_cast<char>(cp - kInvalidCp));
    return;
  }
  std::string one;
  append_utf8(one, cp);
  // One character alone: no casing context (Final_Sigma never applies), as in Rust.
  uint8_t buf[32];
  size_t n = sizeof buf;
  uint8_t* r = u8_tolower(reinterpret_cast<const uint8_t*>(one.data()), one.size(), nullptr, nullptr, buf, &n);
  if (r == nullptr) {
    out += one;
    return;
  }
  out.append(reinterpret_cast<const char*>(r), n);
  if (r != buf) std::free(r);
}

}  // namespace hymba::tok
