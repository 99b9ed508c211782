// Deterministic, splittable random numbers (xoshiro256** seeded by splitmix64).
// split(k) derives an independent stream from (seed, path, k), so each layer or
// thread gets its own generator and results do not depend on visiting order.
#pragma once

#include <array>
#include <cstdint>

namespace hymba {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : Rng(seed, 0) {}

  // An independent generator for sub-stream `key` (e.g. a layer index or a
  // parameter name hash). Does not advance this generator.
  Rng split(uint64_t key) const;

  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits (exactly representable in float).
  float uniform();
  // Uniform double in [0, 1) with 53 random bits.
  double uniform_double();
  // Standard normal via Box-Muller (one value per call; stateless otherwise).
  float normal();
  // Uniform integer in [0, n); n > 0.
  uint64_t below(uint64_t n);

  using State = std::array<uint64_t, 5>;  // xoshiro words + derivation key
  State state() const { return {s_[0], s_[1], s_[2], s_[3], key_}; }
  static Rng from_state(const State& st);

 private:
  Rng(uint64_t seed, uint64_t key);
  std::array<uint64_t, 4> s_{};
  uint64_t key_ = 0;  // identifies this stream for further splits
};

// 64-bit FNV-1a, for turning names into split keys.
uint64_t hash_name(const char* s);

}  // namespace hymba
