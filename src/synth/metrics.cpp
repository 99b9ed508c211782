#include "synth/metrics.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/cross_entropy.h"

namespace hymba::synth {

ClassCounts::ClassCounts(int64_t num_classes)
    : targets_(static_cast<size_t>(num_classes), 0),
      correct_(targets_.size(), 0),
      predicted_(targets_.size(), 0) {
  HYMBA_CHECK(num_classes >= 1, "accuracy: needs at least one class");
}

void ClassCounts::add(int32_t target, int32_t predicted) {
  if (target == cpu::kIgnoreIndex) return;
  const auto n = static_cast<int64_t>(targets_.size());
  HYMBA_CHECK(target >= 0 && target < n && predicted >= 0 && predicted < n, "accuracy: class out of range (target ",
              target, ", prediction ", predicted, ", ", n, " classes)");
  ++targets_[static_cast<size_t>(target)];
  ++predicted_[static_cast<size_t>(predicted)];
  if (target == predicted) ++correct_[static_cast<size_t>(target)];
  ++scored_;
}

void ClassCounts::clear() {
  std::fill(targets_.begin(), targets_.end(), 0);
  std::fill(correct_.begin(), correct_.end(), 0);
  std::fill(predicted_.begin(), predicted_.end(), 0);
  scored_ = 0;
}

double ClassCounts::macro() const {
  double sum = 0;
  int64_t classes = 0;
  for (size_t c = 0; c < targets_.size(); ++c) {
    if (targets_[c] == 0 && predicted_[c] == 0) continue;  // tp + fp + fn == 0: left out
    sum += targets_[c] > 0 ? static_cast<double>(correct_[c]) / static_cast<double>(targets_[c]) : 0.0;
    ++classes;
  }
  return classes > 0 ? sum / static_cast<double>(classes) : 0.0;
}

MadAccuracy::MadAccuracy(int64_t num_classes, int64_t batch_examples)
    : batch_(num_classes), batch_examples_(batch_examples) {
  HYMBA_CHECK(batch_examples >= 1, "accuracy: batch must hold at least one example");
}

void MadAccuracy::close_batch() {
  if (examples_in_batch_ == 0) return;
  weighted_sum_ += batch_.macro() * static_cast<double>(examples_in_batch_);
  examples_ += examples_in_batch_;
  examples_in_batch_ = 0;
  batch_.clear();
}

void MadAccuracy::add_example(int64_t index, const int32_t* targets, const int32_t* predicted, int64_t n) {
  const int64_t batch = index / batch_examples_;
  if (batch != current_) {
    close_batch();
    current_ = batch;
  }
  ++examples_in_batch_;
  for (int64_t t = 0; t < n; ++t) batch_.add(targets[t], predicted[t]);
}

double MadAccuracy::value() {
  close_batch();
  return examples_ > 0 ? weighted_sum_ / static_cast<double>(examples_) : 0.0;
}

void argmax_rows(int32_t* out, const float* logits, int64_t N, int64_t V) {
  for (int64_t r = 0; r < N; ++r) {
    const float* row = logits + r * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    out[r] = static_cast<int32_t>(best);
  }
}

}  // namespace hymba::synth
