// Vectorisable float maths shared by the elementwise kernels: exp for x <= 0,
// log1p on [0, 1], sigmoid and softplus, accurate to a few ulp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace hymba::cpu::fast {

// The helpers below are written so that GCC vectorises the loops calling
// them without -ffast-math: no floating-point operation sits under a
// condition (it would not be if-converted under -ftrapping-math); conditions
// only select between values already computed, or act on integer bits.

// exp(x) for x <= 0 (std::exp does not vectorise). Cephes expf: round x / ln2
// to n, a degree-6 polynomial on the remainder, times 2^n built from bits.
// Within 1.02 ulp on [-87, 0] (checked exhaustively); exactly 0 below -87
// (where exp < 1.7e-38) and for -inf; NaN stays NaN. The clamp works on the
// bits: for x <= 0 a larger uint32 pattern means a more negative float.
inline float exp_nonpositive(float x) {
  constexpr uint32_t kMinBits = 0xC2AE0000u;  // -87.0f
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  constexpr uint32_t kSignBit = 0x80000000u;
  // Setting the sign bit reads x as -|x|: inputs outside the domain (and NaN)
  // still give an n in [-126, 0] for the integer conversion below.
  const uint32_t bits = std::bit_cast<uint32_t>(x) | kSignBit;
  const float xc = std::bit_cast<float>(bits < kMinBits ? bits : kMinBits);
  const float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t scale_bits = (static_cast<int32_t>(n) + 127) << 23;
  // Below -87 the result is 0, except for NaN (bits above -inf's), which
  // stays NaN so that it propagates.
  constexpr uint32_t kNegInfBits = 0xFF800000u, kNaNBits = 0x7FC00000u;
  const uint32_t tail_bits = bits > kNegInfBits ? kNaNBits : 0u;
  return p * std::bit_cast<float>(bits > kMinBits ? tail_bits : static_cast<uint32_t>(scale_bits));
}

// log(u) for u in [1, 2] as 2 atanh(s), s = (u - 1) / (u + 1) in [0, 1/3]:
// the odd series through s^15 leaves a relative error under 3e-9. (No
// range halving: a select feeding arithmetic makes GCC split the loop body.)
inline float log_1_to_2(float u) {
  const float s = (u - 1.0f) / (u + 1.0f), s2 = s * s;
  float series = 1.0f / 15;
  series = series * s2 + 1.0f / 13;
  series = series * s2 + 1.0f / 11;
  series = series * s2 + 1.0f / 9;
  series = series * s2 + 1.0f / 7;
  series = series * s2 + 1.0f / 5;
  series = series * s2 + 1.0f / 3;
  series = series * s2 + 1.0f;
  return 2.0f * s * series;
}

// log(1 + e) for e in [0, 1], accurate for tiny e: u = 1 + e rounds off
// err = (u - 1) - e (exactly representable), and log(1 + e) = log(u - err)
// = log(u) - err / u to within (err / u)^2 < 2^-48.
inline float log1p_unit(float e) {
  const float u = 1.0f + e;
  const float err = (u - 1.0f) - e;
  return log_1_to_2(u) - err / u;
}

// 1 / (1 + exp(-x)) from exp(-|x|) <= 1, which never overflows.
inline float sigmoid(float x) {
  const float e = exp_nonpositive(-std::fabs(x));
  const float numerator = x >= 0.0f ? 1.0f : e;
  return numerator / (1.0f + e);
}

// softplus(x) = max(x, 0) + log(1 + exp(-|x|)), stable for any x. PyTorch
// returns x itself above 20; here that needs no branch: there
// log(1 + exp(-x)) < 2.1e-9 is under half an ulp of x, so the sum rounds to x
// exactly (and sigmoid(x) to 1, the linear branch's slope).
inline float softplus(float x) {
  const float positive_part = x < 0.0f ? 0.0f : x;  // NaN propagates
  return positive_part + log1p_unit(exp_nonpositive(-std::fabs(x)));
}

}  // namespace hymba::cpu::fast
