// Unicode normalization forms (UAX #15: NFC, NFD, NFKC, NFKD) of UTF-8 text,
// through libunistring's u8_normalize — the normalizers of HF tokenizer.json.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hymba {

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// "NFC", "NFD", "NFKC", "NFKD" (HF's normalizer type names); nullopt otherwise.
std::optional<NormalForm> normal_form_from_name(std::string_view name);

// `text` in normal form `form`. Byte-level fallback for invalid UTF-8 (a
// stray byte, a truncated or overlong sequence, a surrogate): each invalid
// byte is kept as it is and splits the text, and the valid runs between such
// bytes are normalized separately. So any byte string goes in and no byte is
// lost or replaced (byte-level BPE encodes raw bytes). Never throws on input.
std::string normalize_utf8(std::string_view text, NormalForm form);

}  // namespace hymba
