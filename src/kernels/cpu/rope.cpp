#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace hymba::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

void check(int64_t ld, int64_t H, int64_t D, float theta, const char* who) {
  HYMBA_CHECK(D % 2 == 0, who, ": head dimension D = ", D, " must be even");
  HYMBA_CHECK(ld >= H * D, who, ": row stride ld = ", ld, " is smaller than H * D = ", H * D);
  HYMBA_CHECK(theta > 0.0f, who, ": theta = ", theta, " must be positive");
}

// f_i = theta^(-2i/D) in double; positions can reach 1e5+, where a float
// angle would already be off by ~1e-2 rad.
std::vector<double> frequencies(int64_t D, float theta) {
  std::vector<double> freq(static_cast<size_t>(D / 2));
  for (int64_t i = 0; i < D / 2; ++i)
    freq[i] = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(D));
  return freq;
}

// cos/sin of one position, rounded to float: the one definition the direct
// and the table paths share, so both give the same bits.
void angles(float* cos_a, float* sin_a, double pos, const std::vector<double>& freq) {
  for (size_t i = 0; i < freq.size(); ++i) {
    const double angle = pos * freq[i];
    cos_a[i] = static_cast<float>(std::cos(angle));
    sin_a[i] = static_cast<float>(std::sin(angle));
  }
}

// Rotates the H heads of one token by +angle (direction 1) or -angle
// (direction -1: a rotation's Jacobian is orthogonal, so its transpose is the
// inverse).
void rotate_token(float* x, int64_t H, int64_t D, const float* __restrict c, const float* __restrict s,
                  float direction) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < H; ++h) {
    float* __restrict lo = x + h * D;
    float* __restrict hi = lo + half;
    for (int64_t i = 0; i < half; ++i) {
      const float a = lo[i], b = hi[i], si = direction * s[i];
      lo[i] = a * c[i] - b * si;
      hi[i] = b * c[i] + a * si;
    }
  }
}

void rotate(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const int64_t* pos0, float theta,
            float direction, const char* who) {
  check(ld, H, D, theta, who);
  const int64_t half = D / 2;
  if (half == 0 || H == 0) return;
  const std::vector<double> freq = frequencies(D, theta);
  const int64_t tokens = B * T;
#pragma omp parallel if (tokens * H * D >= kParallelMin)
  {
    // cos/sin of one token, shared by its H heads.
    std::vector<float> cos_a(static_cast<size_t>(half)), sin_a(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t tok = 0; tok < tokens; ++tok) {
      const int64_t b = tok / T, t = tok % T;
      angles(cos_a.data(), sin_a.data(), static_cast<double>((pos0 != nullptr ? pos0[b] : 0) + t), freq);
      rotate_token(x + tok * ld, H, D, cos_a.data(), sin_a.data(), direction);
    }
  }
}

void rotate_table(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const float* cos_t,
                  const float* sin_t, float direction) {
  HYMBA_CHECK(D % 2 == 0 && ld >= H * D, "rope (table): D must be even and ld >= H * D");
  const int64_t half = D / 2, tokens = B * T;
  if (half == 0 || H == 0) return;
#pragma omp parallel for schedule(static) if (tokens * H * D >= kParallelMin)
  for (int64_t tok = 0; tok < tokens; ++tok) {
    const int64_t t = tok % T;
    rotate_token(x + tok * ld, H, D, cos_t + t * half, sin_t + t * half, direction);
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

void rope_table(float* cos_t, float* sin_t, int64_t T, int64_t D, float theta) {
  check(D, 1, D, theta, "rope_table");
  const std::vector<double> freq = frequencies(D, theta);
  for (int64_t t = 0; t < T; ++t) angles(cos_t + t * (D / 2), sin_t + t * (D / 2), static_cast<double>(t), freq);
}

void rope_forward_table(float* x, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const float* cos_t,
                        const float* sin_t) {
  rotate_table(x, ld, B, T, H, D, cos_t, sin_t, 1.0f);
}

void rope_backward_table(float* dx, int64_t ld, int64_t B, int64_t T, int64_t H, int64_t D, const float* cos_t,
                         const float* sin_t) {
  rotate_table(dx, ld, B, T, H, D, cos_t, sin_t, -1.0f);
}

}  // namespace hymba::cpu
