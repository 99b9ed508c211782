#include "data/chunk_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace hymba {

namespace {

// Appends chunk c's window to `out` (see split_chunks for the two layouts).
void append_window(std::span<const int32_t> stream, int64_t c, int64_t T, int32_t last_target,
                   std::vector<int32_t>& out) {
  const auto first = stream.begin() + static_cast<std::ptrdiff_t>(c * T);
  if (last_target < 0) {
    out.insert(out.end(), first, first + T + 1);
  } else {
    out.insert(out.end(), first, first + T);
    out.push_back(last_target);
  }
}

}  // namespace

ChunkSplit split_chunks(std::span<const int32_t> stream, int64_t chunk_tokens, double val_fraction, uint64_t seed,
                        int32_t last_target) {
  const int64_t T = chunk_tokens, n = static_cast<int64_t>(stream.size());
  HYMBA_CHECK(T >= 1, "seq_len must be >= 1 to cut chunks (got ", T, ")");
  HYMBA_CHECK(std::isfinite(val_fraction) && val_fraction > 0 && val_fraction < 1,
              "val_fraction must be in (0, 1) for data_split chunks-shuffled (got ", val_fraction, ")");
  const int64_t chunks = last_target < 0 ? (n > 0 ? (n - 1) / T : 0) : n / T;
  // The small epsilon keeps 0.9 * 1194 = 1074.6 from flooring differently
  // than Python's int() would on the same product.
  const int64_t n_train = static_cast<int64_t>(std::floor((1.0 - val_fraction) * static_cast<double>(chunks) + 1e-9));
  HYMBA_CHECK(n_train >= 1 && n_train < chunks, "data_split chunks-shuffled: ", n, " tokens make ", chunks,
              " chunk(s) of seq_len ", T, ", too few to hold out val_fraction ", val_fraction,
              " and keep training chunks (lower seq_len or give more data)");
  std::vector<int64_t> order(static_cast<size_t>(chunks));
  std::iota(order.begin(), order.end(), 0);
  Rng rng = Rng(seed).split(hash_name("chunk-split"));
  for (int64_t i = chunks - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  ChunkSplit s;
  s.train_chunks = n_train;
  s.val_chunks = chunks - n_train;
  s.train.reserve(static_cast<size_t>(n_train * (T + 1)));
  s.val.reserve(static_cast<size_t>(s.val_chunks * (T + 1)));
  for (int64_t i = 0; i < chunks; ++i)
    append_window(stream, order[static_cast<size_t>(i)], T, last_target, i < n_train ? s.train : s.val);
  return s;
}

}  // namespace hymba
