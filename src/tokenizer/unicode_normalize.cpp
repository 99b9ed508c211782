#include "tokenizer/unicode_normalize.h"

#include <uninorm.h>
#include <unistr.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace hymba {

namespace {

uninorm_t libunistring_form(NormalForm form) {
  switch (form) {
    case NormalForm::kNFD: return UNINORM_NFD;
    case NormalForm::kNFKC: return UNINORM_NFKC;
    case NormalForm::kNFKD: return UNINORM_NFKD;
    case NormalForm::kNFC: break;
  }
  return UNINORM_NFC;
}

// Appends the normal form of a run already checked to be valid UTF-8.
void append_normalized(std::string& out, const uint8_t* run, std::size_t n, NormalForm form) {
  if (n == 0) return;
  std::size_t length = 0;
  // u8_normalize allocates the result with malloc (no result buffer given).
  std::unique_ptr<uint8_t, decltype(&std::free)> result(u8_normalize(libunistring_form(form), run, n, nullptr, &length),
                                                        &std::free);
  // Valid input only fails for lack of memory.
  if (result == nullptr) fail("Unicode normalization of ", n, " bytes failed: ", std::strerror(errno));
  out.append(reinterpret_cast<const char*>(result.get()), length);
}

}  // namespace

std::optional<NormalForm> normal_form_from_name(std::string_view name) {
  if (name == "NFC") return NormalForm::kNFC;
  if (name == "NFD") return NormalForm::kNFD;
  if (name == "NFKC") return NormalForm::kNFKC;
  if (name == "NFKD") return NormalForm::kNFKD;
  return std::nullopt;
}

std::string normalize_utf8(std::string_view text, NormalForm form) {
  std::string out;
  out.reserve(text.size());
  const auto* at = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t* const end = at + text.size();
  while (at < end) {
    // u8_normalize would replace invalid bytes by U+FFFD; cut them out first.
    const uint8_t* bad = u8_check(at, static_cast<std::size_t>(end - at));
    const uint8_t* run_end = bad == nullptr ? end : bad;
    append_normalized(out, at, static_cast<std::size_t>(run_end - at), form);
    if (bad == nullptr) break;
    out.push_back(static_cast<char>(*bad));
    at = bad + 1;
  }
  return out;
}

}  // namespace hymba
