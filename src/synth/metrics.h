// Accuracy as MAD reports it: torchmetrics' MulticlassAccuracy with its
// default average="macro" over the scored positions, logged per test batch
// and averaged over the epoch by PyTorch Lightning (weighted by batch size).
#pragma once

#include <cstdint>
#include <vector>

namespace hymba::synth {

// Per-class counts of one batch of scored positions.
class ClassCounts {
 public:
  explicit ClassCounts(int64_t num_classes);
  void add(int32_t target, int32_t predicted);
  void clear();
  int64_t scored() const { return scored_; }
  // torchmetrics' macro accuracy: the mean over classes of correct / target
  // count, over every class that occurs as a target or as a prediction (a
  // class only ever predicted counts 0); 0 when nothing was scored.
  double macro() const;

 private:
  std::vector<int64_t> targets_, correct_, predicted_;
  int64_t scored_ = 0;
};

// MAD's epoch figure: consecutive test batches of `batch_examples` examples
// (its test DataLoader: batch_size, no shuffling), each batch's macro
// accuracy, averaged with the batches' example counts as weights.
class MadAccuracy {
 public:
  MadAccuracy(int64_t num_classes, int64_t batch_examples);
  // Example `index` (0-based, in test-set order) with its scored positions.
  void add_example(int64_t index, const int32_t* targets, const int32_t* predicted, int64_t n);
  double value();  // closes the last batch

 private:
  void close_batch();
  ClassCounts batch_;
  int64_t batch_examples_, current_ = -1, examples_in_batch_ = 0, examples_ = 0;
  double weighted_sum_ = 0;
};

// Row-wise argmax (the first of equal maxima, as torch.argmax) of logits [N, V].
void argmax_rows(int32_t* out, const float* logits, int64_t N, int64_t V);

}  // namespace hymba::synth
