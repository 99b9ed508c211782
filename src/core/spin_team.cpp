// The spinning team behind SpinTeamScope (core/parallel.h): workers wait for
// a job by watching a counter, spinning for kSpinMicros before they sleep on
// it (C++20 atomic wait: a futex), and report back through a second counter
// that the caller watches the same way.
#include <immintrin.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace hymba {
namespace {

using Clock = std::chrono::steady_clock;

// Spins until `value` differs from `seen` or `micros` have passed, then
// sleeps until it does; returns the new value. The spin yields the core every
// few checks: another thread that wants it (an OpenMP or OpenBLAS worker of a
// kernel that is not ours, another process) gets it at once, and with nobody
// else runnable the yield returns at once.
template <typename T>
T wait_for_change(const std::atomic<T>& value, T seen, int micros) {
  const auto deadline = Clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      const T now = value.load(std::memory_order_acquire);
      if (now != seen) return now;
      _mm_pause();
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::yield();
  }
  for (;;) {
    value.wait(seen, std::memory_order_acquire);
    const T now = value.load(std::memory_order_acquire);
    if (now != seen) return now;
  }
}

std::atomic<int64_t> g_jobs{0};

class SpinTeam {
 public:
  // threads: the team's size, the caller of run() included.
  explicit SpinTeam(int threads) : threads_(threads) {
    for (int part = 1; part < threads; ++part) workers_.emplace_back([this, part] { work(part); });
  }

  ~SpinTeam() {
    stop_.store(true, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  SpinTeam(const SpinTeam&) = delete;
  SpinTeam& operator=(const SpinTeam&) = delete;

  int threads() const { return threads_; }

  void run(int64_t n, RangeJob job) {
    n_ = n;
    job_ = job;
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    run_part(0);
    int left = pending_.load(std::memory_order_acquire);
    while (left != 0) left = wait_for_change(pending_, left, SpinTeamScope::kSpinMicros);
    g_jobs.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  void run_part(int part) {
    const auto [begin, end] = static_part(n_, threads_, part);
    if (begin < end) job_.call(job_.context, begin, end);
  }

  void work(int part) {
    // A kernel run on a worker that reaches OpenMP or OpenBLAS runs there on
    // this thread alone (a team of its own would compete for the cores).
    omp_set_num_threads(1);
    uint32_t seen = 0;
    for (;;) {
      seen = wait_for_change(epoch_, seen, SpinTeamScope::kSpinMicros);
      if (stop_.load(std::memory_order_relaxed)) return;
      run_part(part);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  // Written by run() before it bumps epoch_, read by workers after they see it.
  int64_t n_ = 0;
  RangeJob job_;
  alignas(64) std::atomic<uint32_t> epoch_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// The process's team, made on first use and again when a scope asks for
// another size. A child process after fork() has none of the parent's
// threads: it makes its own (the parent's is left alone, never joined).
std::mutex g_team_lock;  // held by the one active scope
std::unique_ptr<SpinTeam> g_team;
pid_t g_team_pid = 0;

thread_local SpinTeam* t_team = nullptr;  // the scope open on this thread
thread_local bool t_in_job = false;

// HYMBA_SPIN_TEAM=0 turns the team off (every loop back on OpenMP).
bool team_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("HYMBA_SPIN_TEAM");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return allowed;
}

SpinTeam& team_of_size(int threads) {
  if (g_team && g_team_pid != ::getpid()) (void)g_team.release();
  if (!g_team || g_team->threads() != threads) {
    g_team.reset();
    g_team = std::make_unique<SpinTeam>(threads);
    g_team_pid = ::getpid();
  }
  return *g_team;
}

}  // namespace

namespace detail {

int team_threads_here() { return t_team == nullptr ? 0 : t_team->threads(); }

bool in_team_job() { return t_in_job; }

void run_on_team(int64_t n, RangeJob job) {
  // Every part, the caller's too, runs with t_in_job set: a parallel_for
  // inside it runs its loop alone.
  RangeJob marked;
  marked.context = &job;
  // Its OpenMP and OpenBLAS calls run on one thread, as on the workers.
  marked.call = [](void* context, int64_t begin, int64_t end) {
    const bool was = t_in_job;
    const int omp_threads = omp_get_max_threads();
    t_in_job = true;
    omp_set_num_threads(1);
    const RangeJob& inner = *static_cast<const RangeJob*>(context);
    inner.call(inner.context, begin, end);
    omp_set_num_threads(omp_threads);
    t_in_job = was;
  };
  t_team->run(n, marked);
}

}  // namespace detail

SpinTeamScope::SpinTeamScope(int threads) {
  if (threads <= 1 || !team_allowed() || t_team != nullptr || detail::in_team_job() || omp_in_parallel()) return;
  if (!g_team_lock.try_lock()) return;
  t_team = &team_of_size(threads);
  active_ = true;
}

SpinTeamScope::~SpinTeamScope() {
  if (!active_) return;
  t_team = nullptr;
  g_team_lock.unlock();
}

int64_t spin_team_jobs() { return g_jobs.load(std::memory_order_relaxed); }

}  // namespace hymba
