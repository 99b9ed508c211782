// parallel_for: one loop split over threads, either in an OpenMP parallel
// region or, inside a SpinTeamScope, on a team of threads that spin briefly
// between jobs instead of sleeping.
//
// Why a second kind of thread: hymba runs OpenMP with passive waits (an
// OpenMP thread that spins makes every kernel slow as soon as the cores are
// shared), so each parallel region wakes a sleeping thread. A decode step
// runs a few hundred short regions; where waking a core is slow (a VM whose
// idle cores halt: tens of microseconds), the wakes cost a third of a
// hymba-1.5b q4 step. The team's workers spin for kSpinMicros after each job,
// long enough to catch the next region of the same step, then sleep; the
// decoder opens the scope only for a step it runs on several threads, and
// chooses one thread where that is faster (infer/step_threads.h).
//
// Both ways split [0, n) into the same contiguous parts, one per thread, and
// each index is handled by exactly one thread, so results depend only on what
// body does with an index, not on which way ran it.
#pragma once

#include <omp.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace hymba {

// Part `part` of `parts` of [0, n): sizes differ by at most one, larger first
// (as OpenMP's schedule(static) without a chunk size).
inline std::pair<int64_t, int64_t> static_part(int64_t n, int64_t parts, int64_t part) {
  const int64_t q = n / parts, r = n % parts;
  const int64_t begin = part * q + (part < r ? part : r);
  return {begin, begin + q + (part < r ? 1 : 0)};
}

// A range job for the team: call(context, begin, end).
struct RangeJob {
  void (*call)(void* context, int64_t begin, int64_t end) = nullptr;
  void* context = nullptr;
};

namespace detail {
// The team the calling thread opened a scope for (null: none), and whether
// the calling thread is running a part of a team job (a nested parallel_for
// then runs its loop alone).
int team_threads_here();
bool in_team_job();
// Runs job over [0, n) on the calling thread's team; the caller takes part 0.
void run_on_team(int64_t n, RangeJob job);
}  // namespace detail

// Runs body(begin, end) over parts of [0, n) on several threads when
// `parallel` is true (callers pass their work threshold), else on the calling
// thread. body must not throw.
template <typename Body>
void parallel_for(int64_t n, bool parallel, Body&& body) {
  if (n <= 0) return;
  if (!parallel || n == 1 || detail::in_team_job()) {
    body(int64_t{0}, n);
    return;
  }
  if (detail::team_threads_here() > 1) {
    using B = std::remove_reference_t<Body>;
    RangeJob job;
    job.call = [](void* context, int64_t begin, int64_t end) { (*static_cast<B*>(context))(begin, end); };
    job.context = const_cast<void*>(static_cast<const void*>(&body));
    detail::run_on_team(n, job);
    return;
  }
#pragma omp parallel
  {
    const auto [begin, end] = static_part(n, omp_get_num_threads(), omp_get_thread_num());
    if (begin < end) body(begin, end);
  }
}

// While it lives, parallel_for calls made on the constructing thread run on
// a process-wide spinning team of `threads` threads (the caller among them).
// One scope at a time: a scope opened while another thread holds the team,
// or with threads <= 1, is inactive and parallel_for uses OpenMP as before.
class SpinTeamScope {
 public:
  explicit SpinTeamScope(int threads);
  ~SpinTeamScope();
  SpinTeamScope(const SpinTeamScope&) = delete;
  SpinTeamScope& operator=(const SpinTeamScope&) = delete;
  bool active() const { return active_; }

  // How long a worker spins after a job before it sleeps.
  static constexpr int kSpinMicros = 100;

 private:
  bool active_ = false;
};

// Whether parallel_for calls on this thread run on a spinning team now.
inline bool on_spin_team() { return detail::team_threads_here() > 1 && !detail::in_team_job(); }

// Jobs run on a team so far in this process (for tests and benchmarks).
int64_t spin_team_jobs();

}  // namespace hymba
