// Standard base64 (RFC 4648, with padding), for binary payloads in JSON
// (the embeddings route's encoding_format "base64").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hymba {

inline std::string base64_encode(const uint8_t* data, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = (uint32_t{data[i]} << 16) | (i + 1 < n ? uint32_t{data[i + 1]} << 8 : 0u) |
                       (i + 2 < n ? uint32_t{data[i + 2]} : 0u);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(b >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[b & 63] : '=';
  }
  return out;
}

}  // namespace hymba
