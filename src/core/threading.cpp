#include "core/threading.h"

#include <omp.h>

#include <thread>

namespace hymba {

namespace {
// OpenMP's own default (OMP_NUM_THREADS, else all cores), read before any
// set_num_threads() call can change it.
const int kDefaultThreads = omp_get_max_threads();
}  // namespace

void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : kDefaultThreads); }

int num_threads() { return omp_get_max_threads(); }

ThreadLimit::ThreadLimit(int n) : saved_(num_threads()) {
  if (n >= 1 && n < saved_) omp_set_num_threads(n);
}

ThreadLimit::~ThreadLimit() { omp_set_num_threads(saved_); }

int threads_for_param_rows(int64_t param_rows) {
  constexpr int64_t kSerialParamRows = int64_t{256} << 20;
  return param_rows < kSerialParamRows ? 1 : num_threads();
}

int max_hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace hymba
