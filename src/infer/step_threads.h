// How many threads a decode step of a few sequences runs on, chosen by
// timing it. A step of one sequence hands work between threads a few hundred
// times (one parallel loop per product, on the spinning team of
// core/parallel.h when on several threads); what a hand-off costs depends on
// the machine far more than on the model: on a quiet 2-core AMD host a
// hymba-125m q4 step paid off on two threads, on a 2-core Intel VM whose idle
// cores halt (waking one takes tens of microseconds) the same step ran at 38
// tok/s on two threads and 68-90 on one. So the decoder tries both on its
// first steps and keeps the faster; one thread only when its fastest step
// beats all threads' by kOneThreadMargin, since a busy machine's noise alone
// (steps of a 1.1B q4 model 30-50 % slower at random on a shared 2-vCPU VM)
// otherwise sends a bandwidth-bound model to one thread at half its speed.
// A step's results do not depend on its thread count
// (Decode.StepResultsDoNotDependOnTheThreadCount).
#pragma once

#include <array>

namespace hymba::infer {

class StepThreads {
 public:
  // most: the threads a step may use (decode_threads). With one there is
  // nothing to choose.
  explicit StepThreads(int most);
  // Threads for the next step.
  int next() const;
  // The step just run with next() threads took `seconds`.
  void record(double seconds);
  // The choice, or 0 while still timing.
  int chosen() const { return chosen_; }

  // Steps timed per candidate after an untimed first step (caches and pages
  // warm); each candidate keeps its fastest.
  static constexpr int kTrialsEach = 3;
  // One thread is kept when its fastest step takes under this share of the team's.
  static constexpr double kOneThreadMargin = 0.9;

 private:
  int most_;
  int chosen_ = 0;
  int step_ = 0;  // steps recorded so far
  std::array<double, 2> best_{1e300, 1e300};  // [most, one]
};

}  // namespace hymba::infer
