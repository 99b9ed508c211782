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

// Inline: dropout masks draw one value an element in a serial loop, where a
// call per draw cost half of the loop's time.
inline uint64_t Rng::next_u64() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;  // xoshiro256**
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

inline float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

// 64-bit FNV-1a, for turning names into split keys.
uint64_t hash_name(const char* s);

}  // namespace hymba
