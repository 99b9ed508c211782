// Training batches and evaluation windows over a token stream (or over the
// whole windows a chunked split holds: data/dataset.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace hymba {

// Training batches, drawn so any step can be regenerated (resume needs only
// the step). ids and targets are [batch, T] row-major; targets are the next
// tokens (ids shifted by one). The tokens must outlive the sampler. Errors
// name batch / seq_len.
//   Random windows (the constructor): row b of draw s starts at an offset
//     drawn from Rng(seed).split(s).split(b), uniform in [0, n - T - 1].
//   Epochs (epochs()): the windows of T + 1 tokens at `stride` (T: a stream
//     cut as evaluation cuts it; T + 1: whole chunks) are shuffled anew each
//     epoch by Rng(seed).split(epoch) and taken `batch` at a time; the last
//     partial batch is dropped (a DataLoader with shuffle and drop_last), so
//     an epoch is floor(windows / batch) draws.
class BatchSampler {
 public:
  BatchSampler(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed);
  static BatchSampler epochs(std::span<const int32_t> tokens, int64_t stride, int64_t batch, int64_t seq_len,
                             uint64_t seed);
  // Not thread-safe in epochs mode: the current epoch's order is kept.
  void batch_at(int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& targets) const;
  // Draws that make one pass over the tokens: random windows max(1, n /
  // (batch*T)) on average; epochs exactly floor(windows / batch).
  int64_t steps_per_epoch() const;
  bool by_epochs() const { return stride_ > 0; }

 private:
  const std::vector<int64_t>& epoch_order(int64_t epoch) const;

  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t seq_len_;
  Rng rng_;
  int64_t stride_ = 0;  // > 0: epochs mode
  int64_t windows_ = 0;
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

// The number of non-overlapping evaluation windows over a token stream
// (callers cap it themselves). Window w covers tokens [w*S, w*S + T] (T+1
// tokens: T inputs and their T next-token targets) with S = stride, or T
// when stride is 0 (T + 1 for whole chunks back to back).
int64_t num_eval_windows(std::span<const int32_t> tokens, int64_t seq_len, int64_t stride = 0);

}  // namespace hymba
