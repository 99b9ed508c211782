// What the micro-benchmarks share: seeded random inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace hymba::bench {

// n values uniform in [lo, hi), the same for the same seed.
inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -0.5f, float hi = 0.5f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

}  // namespace hymba::bench
