// Thread-count control shared by our OpenMP loops and OpenBLAS (built against
// OpenMP, so both draw on the same pool). Results are reproducible for a fixed
// thread count: kernels partition work statically and never use atomics.
#pragma once

namespace hymba {

// Sets the thread count for all later kernels; n <= 0 means OpenMP's default
// (OMP_NUM_THREADS when set, else all cores).
void set_num_threads(int n);
int num_threads();
int max_hardware_threads();

// Runs the kernels of its scope on at most `n` threads (results do not depend
// on the count), restoring the previous count when it ends.
class ThreadLimit {
 public:
  explicit ThreadLimit(int n);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

}  // namespace hymba
