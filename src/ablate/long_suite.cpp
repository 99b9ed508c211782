#include "ablate/long_suite.h"

#include <algorithm>

#include "core/error.h"
#include "core/system_memory.h"

namespace hymba::ablate {

const std::vector<int64_t>& long_seq_default_lengths() {
  static const std::vector<int64_t> v = {256, 512, 1024, 2048, 4096};
  return v;
}

int64_t long_seq_batch(int64_t seq_len, int64_t tokens_per_step) {
  HYMBA_CHECK(seq_len >= 1, "sequence length must be >= 1 (got ", seq_len, ")");
  return std::max<int64_t>(1, tokens_per_step / seq_len);
}

int64_t long_seq_eval_windows(int64_t seq_len) {
  HYMBA_CHECK(seq_len >= 1, "sequence length must be >= 1 (got ", seq_len, ")");
  return std::max<int64_t>(1, kLongSeqEvalTokens / seq_len);
}

void check_seq_lens(const std::vector<int64_t>& v) {
  HYMBA_CHECK(!v.empty(), "--seq-lens: give at least one length");
  for (size_t i = 0; i < v.size(); ++i) {
    HYMBA_CHECK(v[i] >= 2 && v[i] <= (int64_t{1} << 20), "--seq-lens: ", v[i], " is outside [2, 1048576]");
    HYMBA_CHECK(i == 0 || v[i] > v[i - 1], "--seq-lens: lengths must be strictly ascending (", v[i - 1], " then ",
                v[i], ")");
  }
}

std::optional<std::string> memory_skip_reason(const MemoryEstimate& need, int64_t available) {
  const double bytes = need.total();
  if (available < 0 || bytes <= static_cast<double>(available)) return std::nullopt;
  std::string parts;
  for (const MemoryEstimate::Part& p : need.parts)
    if (p.bytes > 0) parts += (parts.empty() ? "" : ", ") + p.what + " " + format_bytes(p.bytes);
  return "estimated training memory " + format_bytes(bytes) + " (" + parts + ") exceeds the " +
         format_bytes(static_cast<double>(available)) + " available";
}

}  // namespace hymba::ablate
