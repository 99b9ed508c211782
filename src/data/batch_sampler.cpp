// Training batches (random windows, or shuffled epochs with drop_last) and
// the count of evaluation windows; declared in data/corpus.h.
#include "data/batch_sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/corpus.h"

namespace hymba {

BatchSampler::BatchSampler(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed)
    : tokens_(tokens), batch_(batch), seq_len_(seq_len), rng_(seed) {
  HYMBA_CHECK(batch > 0, "batch must be positive, got ", batch);
  HYMBA_CHECK(seq_len > 0, "seq_len must be positive, got ", seq_len);
  HYMBA_CHECK(static_cast<int64_t>(tokens.size()) >= seq_len + 1, "seq_len=", seq_len, " needs at least ", seq_len + 1,
              " training tokens, but there are only ", tokens.size(), " (use a shorter seq_len or more data)");
}

BatchSampler BatchSampler::epochs(std::span<const int32_t> tokens, int64_t stride, int64_t batch, int64_t seq_len,
                                  uint64_t seed) {
  BatchSampler s(tokens, batch, seq_len, seed);
  HYMBA_CHECK(stride >= 1, "batching epochs: the window stride must be >= 1 (got ", stride, ")");
  s.stride_ = stride;
  s.windows_ = num_eval_windows(tokens, seq_len, stride);
  HYMBA_CHECK(s.windows_ >= batch, "batching epochs: the training split holds ", s.windows_, " window(s) of seq_len ",
              seq_len, ", fewer than one batch of ", batch, " (the last partial batch is dropped; lower batch)");
  return s;
}

const std::vector<int64_t>& BatchSampler::epoch_order(int64_t epoch) const {
  if (order_epoch_ == epoch) return order_;
  order_.resize(static_cast<size_t>(windows_));
  std::iota(order_.begin(), order_.end(), 0);
  Rng rng = rng_.split(hash_name("epoch")).split(static_cast<uint64_t>(epoch));
  for (int64_t i = windows_ - 1; i > 0; --i)
    std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  order_epoch_ = epoch;
  return order_;
}

void BatchSampler::batch_at(int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& targets) const {
  HYMBA_CHECK(step >= 0, "step must be non-negative, got ", step);
  const size_t T = static_cast<size_t>(seq_len_);
  ids.resize(static_cast<size_t>(batch_) * T);
  targets.resize(ids.size());
  const Rng step_rng = rng_.split(static_cast<uint64_t>(step));
  const uint64_t starts = tokens_.size() - T;  // offsets 0 .. n-T-1 leave room for the last target
  const int64_t per_epoch = by_epochs() ? steps_per_epoch() : 1;
  const std::vector<int64_t>* order = by_epochs() ? &epoch_order(step / per_epoch) : nullptr;
  for (int64_t b = 0; b < batch_; ++b) {
    const size_t offset =
        order != nullptr ? static_cast<size_t>((*order)[static_cast<size_t>((step % per_epoch) * batch_ + b)] * stride_)
                         : step_rng.split(static_cast<uint64_t>(b)).below(starts);
    const int32_t* src = tokens_.data() + offset;
    std::copy(src, src + T, ids.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * T));
    std::copy(src + 1, src + T + 1, targets.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * T));
  }
}

int64_t BatchSampler::steps_per_epoch() const {
  if (by_epochs()) return windows_ / batch_;
  return std::max<int64_t>(1, static_cast<int64_t>(tokens_.size()) / (batch_ * seq_len_));
}

int64_t num_eval_windows(std::span<const int32_t> tokens, int64_t seq_len, int64_t stride) {
  HYMBA_CHECK(seq_len > 0, "seq_len must be positive, got ", seq_len);
  const int64_t S = stride > 0 ? stride : seq_len;
  const int64_t n = static_cast<int64_t>(tokens.size());
  return n >= seq_len + 1 ? (n - seq_len - 1) / S + 1 : 0;
}

}  // namespace hymba
