#include "core/threading.h"

#include <omp.h>

#include <thread>

namespace hymba {

void set_num_threads(int n) {
  if (n <= 0) n = max_hardware_threads();
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

int max_hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace hymba
