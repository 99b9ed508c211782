#include "tokenizer/hf/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

namespace {

// Per-thread match data and JIT stack: matching is const and thread-safe.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(16, nullptr);
    // Long pre-tokens (a 100,000-letter run) backtrack deeply in lookaheads.
    stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? "error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buf));
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE at = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  HYMBA_CHECK(code_ != nullptr, where, ": regex /", pattern, "/ does not compile (PCRE2: ", pcre2_message(err),
              " at offset ", at, ")");
  jit_ = pcre2_jit_compile(static_cast<pcre2_code*>(code_), PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<MatchSpan> Regex::find_all(std::string_view text) const {
  std::vector<MatchSpan> out;
  MatchScratch& s = scratch();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, 0, s.data, s.context)
                        : pcre2_match(code, subject, text.size(), pos, 0, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    HYMBA_CHECK(rc >= 0, "regex /", pattern_, "/ failed on a text of ", text.size(), " bytes (PCRE2: ",
                pcre2_message(rc), ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    const size_t start = ov[0], end = ov[1];
    out.push_back({start, end});
    if (end > start) {
      pos = end;
    } else {
      if (start >= text.size()) break;
      pos = start + char_len(text, start);
    }
  }
  return out;
}

}  // namespace hymba::tok
