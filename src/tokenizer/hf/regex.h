// Unicode regular expressions through PCRE2 (UTF + UCP, JIT-compiled), for the
// pre-tokenizer patterns of tokenizer.json files: GPT-2's, Llama-3's,
// GPT-4o's and Qwen's run verbatim (\p{L}, \p{N}, lookahead, (?i:...)).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hymba::tok {

struct MatchSpan {
  size_t start, end;
};

class Regex {
 public:
  // Errors name `where` and PCRE2's message with the offset in the pattern.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches left to right, as Oniguruma's find_iter (HF's
  // engine) yields them: after an empty match the search moves on one
  // character. Bytes that are not valid UTF-8 never match. Thread-safe.
  std::vector<MatchSpan> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

}  // namespace hymba::tok
