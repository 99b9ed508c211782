// UTF-8 and Unicode character classes shared by the tokenizer.json pipeline.
// Classes come from libunistring (not hand-written tables), named after the
// Rust predicates HF `tokenizers` calls (char::is_whitespace, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hymba::tok {

// One code point of s at i and its byte length. An invalid byte comes back as
// kInvalidCp + the byte, length 1, so no input is ever lost.
inline constexpr uint32_t kInvalidCp = 0x110000;
struct CodePoint {
  uint32_t cp;
  size_t len;
};
CodePoint next_code_point(std::string_view s, size_t i);
// Byte length of the character starting at s[i] (1 for an invalid byte).
inline size_t char_len(std::string_view s, size_t i) { return next_code_point(s, i).len; }
// Start of the character that ends at byte `end` (end > 0).
size_t prev_char_start(std::string_view s, size_t end);

void append_utf8(std::string& out, uint32_t cp);

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes
// one U+FFFD. HF decoders return Rust strings, so decoded text goes through it.
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view s);

bool is_whitespace(uint32_t cp);   // White_Space (Rust char::is_whitespace)
bool is_numeric(uint32_t cp);      // Nd, Nl, No (char::is_numeric)
bool is_punctuation(uint32_t cp);  // P* or ASCII punctuation (HF Punctuation, Bert)
bool is_word_char(uint32_t cp);    // regex \w: Alphabetic, M, Nd, Pc, Join_Control
bool is_mark_nonspacing(uint32_t cp);
bool is_combining_mark(uint32_t cp);  // M*
bool is_other(uint32_t cp);           // C* (Cc, Cf, Cs, Co, Cn)

// GPT-2's bytes_to_unicode: each byte as a printable character (UTF-8), and
// back (-1 for a character that is not one of the 256).
const std::string& byte_level_char(unsigned char b);
int byte_level_byte(uint32_t cp);

// Full lower-case mapping of one character (char::to_lowercase), as UTF-8.
void append_lowercase(std::string& out, uint32_t cp);

}  // namespace hymba::tok
