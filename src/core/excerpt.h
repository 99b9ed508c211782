// Quoting values from untrusted files in one-line messages (docs/security.md).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace hymba {

// A value from a file, fit to quote in a one-line message: control characters
// and bytes that are not UTF-8 escaped (\n, \xNN), at most about `max` bytes
// of it (whole characters), followed by "... (N bytes)" when it was cut. Messages never echo more of
// a value than this (docs/security.md).
inline constexpr std::size_t kMaxQuoted = 80;
inline std::string excerpt(std::string_view s, std::size_t max = kMaxQuoted) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && out.size() < max) {
    const auto c = static_cast<unsigned char>(s[i]);
    // A well-formed UTF-8 sequence is copied whole; anything else byte by byte.
    const std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool whole = len > 1 && i + len <= s.size() && c >= 0xC2 && c <= 0xF4;
    for (std::size_t k = 1; whole && k < len; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (whole) {
      out.append(s.substr(i, len));
      i += len;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c < 0x20 || c >= 0x7F) {  // control characters and bytes of no character
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
      ++i;
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace hymba
