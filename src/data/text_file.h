// Reading corpus text files: UTF-8 checked, a leading byte order mark
// dropped. Shared by the corpus readers (data/corpus.cpp,
// data/published_corpus.cpp).
#pragma once

#include <string>
#include <string_view>

namespace hymba {

// The file's text, checked to be UTF-8 ("path:line: invalid UTF-8 at byte N"
// otherwise), without a leading byte order mark.
std::string read_utf8_text(const std::string& path);

// Fails with "where:line: invalid UTF-8 at byte N" when `text` is not UTF-8.
void check_utf8(const std::string& where, std::string_view text);

// Only ASCII whitespace (or nothing).
bool is_blank_text(std::string_view s);

// `s` without its leading and trailing ASCII whitespace.
std::string_view trim_text(std::string_view s);

}  // namespace hymba
