#include "core/rng.h"

#include <cmath>

namespace hymba {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

Rng::Rng(uint64_t seed, uint64_t key) {
  // key_ is this stream's identity: it folds in the seed and every split key
  // on the path from the root, so children of different seeds differ.
  uint64_t x = seed ^ (key * 0xD1B54A32D192ED03ull);
  key_ = splitmix64(x);
  for (auto& w : s_) w = splitmix64(x);
}

Rng Rng::split(uint64_t key) const {
  // Derived from the identity alone, never from the draws made so far.
  uint64_t x = key_ ^ (key * 0x9E3779B97F4A7C15ull);
  return Rng(splitmix64(x), key + 1);
}

double Rng::uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

float Rng::normal() {
  double u1 = uniform_double();
  double u2 = uniform_double();
  if (u1 < 1e-300) u1 = 1e-300;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t Rng::below(uint64_t n) {
  // Rejection sampling removes modulo bias.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next_u64();
  while (r >= limit);
  return r % n;
}

Rng Rng::from_state(const State& st) {
  Rng r;
  for (int i = 0; i < 4; ++i) r.s_[i] = st[i];
  r.key_ = st[4];
  return r;
}

uint64_t hash_name(const char* s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001B3ull;
  return h;
}

}  // namespace hymba
