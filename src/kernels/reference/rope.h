// Plain scalar reference for rotate-half rotary position embedding, written
// straight from the formula (angles in double).
#pragma once

#include <cmath>
#include <cstdint>

namespace hymba::ref {

// In place on x[B, T, H, D] with tokens ld apart; token t of sequence b is at
// position pos0[b] + t (pos0 null = 0).
template <typename T>
void rope_forward(T* x, int64_t ld, int64_t B, int64_t Tn, int64_t H, int64_t D, const int64_t* pos0,
                  double theta) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t pos = (pos0 ? pos0[b] : 0) + t;
      for (int64_t h = 0; h < H; ++h) {
        T* v = x + (b * Tn + t) * ld + h * D;
        for (int64_t i = 0; i < half; ++i) {
          const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
          const double angle = static_cast<double>(pos) * freq;
          const T c = static_cast<T>(std::cos(angle)), s = static_cast<T>(std::sin(angle));
          const T a = v[i], bb = v[i + half];
          v[i] = a * c - bb * s;
          v[i + half] = bb * c + a * s;
        }
      }
    }
}

}  // namespace hymba::ref
