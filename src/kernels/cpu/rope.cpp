#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// Rotates every head of every token by +angle (forward) or -angle (backward:
// a rotation's Jacobian is orthogonal, so its transpose is the inverse).
void rotate(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0, float theta,
            float direction, const char* who) {
  HYMBA_CHECK(D % 2 == 0, who, ": head dimension D = ", D, " must be even");
  HYMBA_CHECK(ld >= H * D, who, ": row stride ld = ", ld, " is smaller than H * D = ", H * D);
  HYMBA_CHECK(theta > 0.0f, who, ": theta = ", theta, " must be positive");
  const int64_t half = D / 2;
  if (half == 0 || H == 0) return;
  // f_i = theta^(-2i/D) in double; positions can reach 1e5+, where a float
  // angle would already be off by ~1e-2 rad.
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[i] = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(D));
  const int64_t tokens = B * T;
#pragma omp parallel if (tokens * H * D >= kParallelMin)
  {
    // cos/sin of one token, shared by its H heads.
    std::vector<float> cos_a(static_cast<size_t>(half)), sin_a(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t tok = 0; tok < tokens; ++tok) {
      const int64_t b = tok / T, t = tok % T;
      const double pos = static_cast<double>((pos0 != nullptr ? pos0[b] : 0) + t);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * freq[i];
        cos_a[i] = static_cast<float>(std::cos(angle));
        sin_a[i] = direction * static_cast<float>(std::sin(angle));
      }
      const float* __restrict c = cos_a.data();
      const float* __restrict s = sin_a.data();
      for (int64_t h = 0; h < H; ++h) {
        float* __restrict lo = x + tok * ld + h * D;
        float* __restrict hi = lo + half;
        for (int64_t i = 0; i < half; ++i) {
          const float a = lo[i], b2 = hi[i];
          lo[i] = a * c[i] - b2 * s[i];
          hi[i] = b2 * c[i] + a * s[i];
        }
      }
    }
  }
}

}  // namespace

void rope_forward(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0,
                  float theta) {
  rotate(x, ld, B, T, H, D, pos0, theta, 1.0f, "rope_forward");
}

void rope_backward(float* dx, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0,
                   float theta) {
  rotate(dx, ld, B, T, H, D, pos0, theta, -1.0f, "rope_backward");
}

}  // namespace hymba::cpu
