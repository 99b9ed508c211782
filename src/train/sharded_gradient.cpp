#include "train/sharded_gradient.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/cross_entropy.h"

namespace hymba {

void check_grad_shards(int64_t shards, int64_t batch, int ranks) {
  HYMBA_CHECK(shards >= 1 && batch % shards == 0, "--grad-shards ", shards, " must be >= 1 and divide --batch ",
              batch);
  const bool power_of_two = ranks >= 1 && (ranks & (ranks - 1)) == 0;
  HYMBA_CHECK(power_of_two && shards % ranks == 0, "--grad-shards ", shards, ": the ", ranks,
              " MPI rank(s) must be a power of two that divides it (each rank owns a whole subtree of shards)");
}

double timed_grad_sum(const dist::Communicator& comm, ParamTable& params) {
  if (comm.size() == 1) return 0.0;
  double arrived = 1.0;
  comm.sum(&arrived, 1);
  const double before = comm.sum_seconds();
  comm.sum(params.grads_block(), params.total_floats());
  return comm.sum_seconds() - before;
}

ShardedGradient::ShardedGradient(int64_t shards, int64_t batch, int64_t seq_len, int64_t grad_accum,
                                 const dist::Communicator& comm)
    : shards_(shards), batch_(batch), seq_len_(seq_len), accum_(grad_accum), comm_(comm) {
  check_grad_shards(shards, batch, comm.size());
  const int64_t leaves = shards * grad_accum;
  first_leaf_ = leaves * comm.rank() / comm.size();
  end_leaf_ = leaves * (comm.rank() + 1) / comm.size();
  ids_.resize(static_cast<size_t>(grad_accum));
  targets_.resize(static_cast<size_t>(grad_accum));
  scored_.resize(static_cast<size_t>(grad_accum));
  leaf_loss_.resize(static_cast<size_t>(leaves));
}

// Leaf j is shard j / accum of micro-batch j % accum: its gradient of
// (its loss sum) / (the micro-batch's scored tokens) / accum.
void ShardedGradient::leaf(int64_t index, float* out) {
  const int64_t shard = index / accum_, micro = index % accum_;
  const int64_t rows = batch_ / shards_;
  const int64_t first = shard * rows * seq_len_;
  const int32_t* ids = ids_[static_cast<size_t>(micro)].data() + first;
  const int32_t* targets = targets_[static_cast<size_t>(micro)].data() + first;
  ForwardOptions fo;
  fo.label_smoothing = label_smoothing_;
  fo.recompute = recompute_;
  const Rng drop = dropout_ != nullptr ? dropout_->split(static_cast<uint64_t>(step_ * accum_ + micro))
                                             .split(0x5A4D00 + static_cast<uint64_t>(shard))
                                       : Rng(0);
  if (dropout_ != nullptr) fo.dropout_rng = &drop;
  ParamTable& params = model_->params();
  params.zero_grad();
  const LossStats s = model_->forward(ids, targets, rows, seq_len_, fo);
  leaf_loss_[static_cast<size_t>(index)] = s.loss_sum;
  const double whole = scored_[static_cast<size_t>(micro)];
  if (s.scored > 0 && whole > 0)
    model_->backward(static_cast<float>(static_cast<double>(s.scored) / whole / static_cast<double>(accum_)));
  std::copy_n(params.grads_block(), params.total_floats(), out);
}

void ShardedGradient::subtree(int64_t lo, int64_t hi, size_t depth, float* out) {
  if (hi - lo == 1) {
    leaf(lo, out);
    return;
  }
  const int64_t mid = lo + (hi - lo) / 2;
  subtree(lo, mid, depth + 1, out);
  if (partial_.size() <= depth) partial_.resize(depth + 1);
  std::vector<float>& right = partial_[depth];
  right.resize(static_cast<size_t>(model_->params().total_floats()));
  subtree(mid, hi, depth + 1, right.data());
  const int64_t n = model_->params().total_floats();
  for (int64_t i = 0; i < n; ++i) out[i] += right[static_cast<size_t>(i)];
}

ShardedGradient::Step ShardedGradient::compute(Model& model, const BatchSampler& sampler, int64_t step,
                                               double label_smoothing, const Rng* dropout) {
  model_ = &model;
  dropout_ = dropout;
  label_smoothing_ = label_smoothing;
  step_ = step;
  // Every rank draws the whole step: the scored counts of each micro-batch
  // come from its targets, before any backward pass needs them.
  for (int64_t micro = 0; micro < accum_; ++micro) {
    const size_t m = static_cast<size_t>(micro);
    sampler.batch_at(step * accum_ + micro, ids_[m], targets_[m]);
    scored_[m] = static_cast<double>(
        std::count_if(targets_[m].begin(), targets_[m].end(), [](int32_t t) { return t != cpu::kIgnoreIndex; }));
  }
  std::fill(leaf_loss_.begin(), leaf_loss_.end(), 0.0);
  ParamTable& params = model.params();
  // This rank's subtree, then the ranks' subtrees added in the same tree.
  total_.resize(static_cast<size_t>(params.total_floats()));
  subtree(first_leaf_, end_leaf_, 0, total_.data());
  std::copy(total_.begin(), total_.end(), params.grads_block());
  grad_sum_seconds_ += timed_grad_sum(comm_, params);
  // x + 0 is exact: after the sum every rank holds every leaf's loss sum.
  comm_.sum(leaf_loss_.data(), static_cast<int64_t>(leaf_loss_.size()));
  Step out;
  for (int64_t micro = 0; micro < accum_; ++micro) {
    double loss_sum = 0.0;
    for (int64_t shard = 0; shard < shards_; ++shard) loss_sum += leaf_loss_[static_cast<size_t>(shard * accum_ + micro)];
    const double whole = scored_[static_cast<size_t>(micro)];
    const double mean = whole > 0 ? loss_sum / whole : 0.0;
    if (!std::isfinite(mean) && std::isfinite(out.worst_mean)) {
      out.worst_mean = mean;
      out.worst_micro = micro;
    }
    out.loss += mean / static_cast<double>(accum_);
  }
  return out;
}

}  // namespace hymba
