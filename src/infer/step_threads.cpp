#include "infer/step_threads.h"

#include <algorithm>

namespace hymba::infer {

StepThreads::StepThreads(int most) : most_(std::max(1, most)) {
  if (most_ == 1) chosen_ = 1;
}

// Step 0 is the untimed warm-up on all threads; then all threads and one
// alternate, so a drift of the machine's speed touches both alike.
int StepThreads::next() const {
  if (chosen_ != 0) return chosen_;
  return step_ % 2 == 0 ? most_ : 1;
}

void StepThreads::record(double seconds) {
  if (chosen_ != 0) return;
  if (step_ > 0) {
    double& best = best_[step_ % 2 == 0 ? 0 : 1];
    best = std::min(best, seconds);
  }
  ++step_;
  if (step_ > 2 * kTrialsEach) chosen_ = best_[1] < kOneThreadMargin * best_[0] ? 1 : most_;
}

}  // namespace hymba::infer
