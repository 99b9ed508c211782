// Thread-count control shared by our OpenMP loops and OpenBLAS (built against
// OpenMP, so both draw on the same pool). Results are reproducible for a fixed
// thread count: kernels partition work statically and never use atomics.
#pragma once

#include <cstdint>

namespace hymba {

// Sets the thread count for all later kernels; n <= 0 means OpenMP's default
// (OMP_NUM_THREADS when set, else all cores).
void set_num_threads(int n);
int num_threads();
int max_hardware_threads();

// Threads worth using for a step over `param_rows` = parameters x rows. A
// small model's step is microseconds of work per kernel, less than waking
// sleeping OpenMP threads costs (hymba runs with passive waits), and on shared
// cores every parallel region can wait a scheduler slice for a descheduled
// worker: below 256M parameter-rows one thread is faster. Measured with 2
// threads on decoding (hymba hybrid-official seed scale 147 vs 132 tok/s, tiny
// 6.3K vs 0.4K) and on `hymba synth` training of tiny models.
int threads_for_param_rows(int64_t param_rows);

// Runs the kernels of its scope on at most `n` threads, restoring the previous
// count when it ends. Results are bit-identical only for the same count
// (docs/architecture.md, Determinism), so callers derive `n` from the model alone.
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
