// --grad-shards S: a step's gradient that does not depend on how many MPI
// ranks computed it (docs/training.md, "What is deterministic"). Each
// micro-batch of B sequences is cut into S shards of B/S sequences; every
// (shard, micro-batch) pair is its own forward and backward pass (a leaf),
// and the leaves' gradients are added in one fixed pairwise tree over the
// leaf index, shard-major. N ranks (a power of two dividing S) each own a
// contiguous run of shards, which is a whole subtree; the communicator adds
// the ranks' subtrees in the same pairwise tree. So 1, 2, 4, ... ranks with
// the same threads per rank produce the same bits, and the loss is added in
// the same fixed order on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "data/corpus.h"
#include "data/batch_sampler.h"
#include "dist/communicator.h"
#include "model/model.h"

namespace hymba {

// One line naming the flag when S, the batch and the ranks do not fit.
void check_grad_shards(int64_t shards, int64_t batch, int ranks);

// Sums the gradients over the ranks and returns the seconds of the sum alone:
// a one-number sum first waits for the slowest rank to finish its backward.
double timed_grad_sum(const dist::Communicator& comm, ParamTable& params);

class ShardedGradient {
 public:
  ShardedGradient(int64_t shards, int64_t batch, int64_t seq_len, int64_t grad_accum, const dist::Communicator& comm);

  struct Step {
    double loss = 0.0;        // mean over the micro-batches of each one's mean loss, as the default mode's
    double worst_mean = 0.0;  // a non-finite micro-batch mean if there was one (else finite)
    int64_t worst_micro = 0;
  };
  // Leaves the step's summed gradient in model.params() on every rank.
  // `dropout` (null: none) is keyed by the draw and the shard, not the rank.
  Step compute(Model& model, const BatchSampler& sampler, int64_t step, double label_smoothing, const Rng* dropout);
  double grad_sum_seconds() const { return grad_sum_seconds_; }
  // Each shard's forward keeps only layer inputs; its backward recomputes (ForwardOptions::recompute).
  void set_recompute(bool on) { recompute_ = on; }

 private:
  // Adds the leaves [lo, hi) in the tree into `out`; depth picks the scratch buffer.
  void subtree(int64_t lo, int64_t hi, size_t depth, float* out);
  void leaf(int64_t index, float* out);

  int64_t shards_, batch_, seq_len_, accum_;
  const dist::Communicator& comm_;
  int64_t first_leaf_ = 0, end_leaf_ = 0;  // this rank's leaves
  double grad_sum_seconds_ = 0.0;
  std::vector<float> total_;                 // this rank's subtree
  std::vector<std::vector<float>> partial_;  // a right subtree's sum, one buffer per tree depth
  // The step's state while it is computed.
  Model* model_ = nullptr;
  const Rng* dropout_ = nullptr;
  double label_smoothing_ = 0.0;
  bool recompute_ = false;
  int64_t step_ = 0;
  std::vector<std::vector<int32_t>> ids_, targets_;  // every micro-batch of the step
  std::vector<double> scored_;                       // scored tokens of each micro-batch (whole batch)
  std::vector<double> leaf_loss_;                    // loss sum of every leaf; zero for other ranks' leaves
};

}  // namespace hymba
