// float32 <-> bfloat16 / IEEE half conversions (core/float_formats.h): hand-
// computed bit patterns for ties, overflow, subnormals, NaN and inf (the half
// expectations agree with Python's struct.pack('<e'), an independent
// round-to-nearest-even), then every 16-bit pattern, its neighbours' midpoint
// and the floats just either side of it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/float_formats.h"
#include "core/rng.h"

namespace hymba {
namespace {

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
bool same_bits(float a, float b) { return bits_of(a) == bits_of(b); }

struct Case {
  uint32_t in;   // float32 bits
  uint16_t out;  // expected 16-bit pattern
  const char* why;
};

TEST(FloatFormats, Bf16HandComputedPatterns) {
  const Case cases[] = {
      {0x3F800000, 0x3F80, "1.0 exact"},
      {0xC0400000, 0xC040, "-3.0 exact"},
      {0x3F808000, 0x3F80, "tie between 0x3F80 and 0x3F81: even is 0x3F80"},
      {0x3F818000, 0x3F82, "tie between 0x3F81 and 0x3F82: even is 0x3F82"},
      {0xBF818000, 0xBF82, "negative tie rounds the magnitude the same way"},
      {0x3F808001, 0x3F81, "just above the tie rounds up"},
      {0x3F807FFF, 0x3F80, "just below the tie rounds down"},
      {0x3F80FFFF, 0x3F81, "carry within the mantissa"},
      {0x3FFF8000, 0x4000, "tie with odd 0x3FFF carries into the exponent (2.0)"},
      {0x7F7F7FFF, 0x7F7F, "just below the overflow tie stays finite"},
      {0x7F7F8000, 0x7F80, "tie at the top (odd 0x7F7F) overflows to inf"},
      {0x7F7FFFFF, 0x7F80, "FLT_MAX rounds to inf"},
      {0x7F800000, 0x7F80, "+inf"},
      {0xFF800000, 0xFF80, "-inf"},
      {0x7FC00000, 0x7FC0, "quiet NaN"},
      {0x7F800001, 0x7FC0, "NaN with only a low payload bit stays NaN (not inf)"},
      {0xFF80FFFF, 0xFFC0, "negative NaN whose rounding would carry stays NaN"},
      {0x00000000, 0x0000, "+0"},
      {0x80000000, 0x8000, "-0"},
      {0x00010000, 0x0001, "smallest bf16 subnormal exact"},
      {0x00008000, 0x0000, "half the smallest subnormal ties to even zero"},
      {0x00018000, 0x0002, "subnormal tie 1.5 rounds to even 2"},
      {0x00008001, 0x0001, "just above half the smallest subnormal"},
      {0x80008001, 0x8001, "negative subnormal"},
      {0x007FFFFF, 0x0080, "largest float32 subnormal rounds to the smallest normal"},
  };
  for (const Case& c : cases) EXPECT_EQ(f32_to_bf16(from_bits(c.in)), c.out) << c.why;
}

TEST(FloatFormats, F16HandComputedPatterns) {
  const Case cases[] = {
      {0x3F800000, 0x3C00, "1.0"},
      {0xC0000000, 0xC000, "-2.0"},
      {0x3DCCCCCD, 0x2E66, "0.1"},
      {0x40490FD0, 0x4248, "3.14159"},
      {0x3F801000, 0x3C00, "1 + 2^-11: tie, even is 1.0"},
      {0x3F803000, 0x3C02, "1 + 3 * 2^-11: tie, even is 0x3C02"},
      {0x3F801001, 0x3C01, "just above the tie"},
      {0x45001000, 0x6800, "2049: tie, even is 2048"},
      {0x45003000, 0x6802, "2051: tie, even is 2052"},
      {0x477FE000, 0x7BFF, "65504, the largest finite"},
      {0x477FEF00, 0x7BFF, "65519 rounds down to 65504"},
      {0x477FF000, 0x7C00, "65520: tie with odd 0x7BFF overflows to inf"},
      {0x4788B800, 0x7C00, "70000 overflows"},
      {0xC788B800, 0xFC00, "-70000 overflows to -inf"},
      {0x7F7FFFFF, 0x7C00, "FLT_MAX"},
      {0x7F800000, 0x7C00, "+inf"},
      {0xFF800000, 0xFC00, "-inf"},
      {0x7FC00000, 0x7E00, "quiet NaN"},
      {0x7F800001, 0x7E00, "NaN with only a low payload bit stays NaN"},
      {0xFFC00000, 0xFE00, "negative NaN"},
      {0x38800000, 0x0400, "2^-14, the smallest normal"},
      {0x387FE000, 0x0400, "1023.5 * 2^-24: tie, even is 0x400 (the smallest normal)"},
      {0x387FC000, 0x03FF, "1023 * 2^-24, the largest subnormal"},
      {0x33800000, 0x0001, "2^-24, the smallest subnormal"},
      {0x33000000, 0x0000, "2^-25: tie, even is zero"},
      {0x33000001, 0x0001, "just above 2^-25"},
      {0x32FFFFFF, 0x0000, "just below 2^-25"},
      {0x33C00000, 0x0002, "1.5 * 2^-24: tie, even is 2"},
      {0x34200000, 0x0002, "2.5 * 2^-24: tie, even is 2"},
      {0xB3C00000, 0x8002, "negative subnormal tie"},
      {0x2EDBE6FF, 0x0000, "1e-10 underflows to +0"},
      {0xAEDBE6FF, 0x8000, "-1e-10 underflows to -0"},
      {0x80000000, 0x8000, "-0"},
      {0x00000001, 0x0000, "a float32 subnormal is far below half's range"},
  };
  for (const Case& c : cases) EXPECT_EQ(f32_to_f16(from_bits(c.in)), c.out) << c.why;
}

// Every non-NaN 16-bit pattern round-trips exactly; the float32 midpoint
// between it and its upper neighbour goes to the even one of the two; the
// floats one ulp either side of the midpoint go to the nearer one.
template <typename Widen, typename Narrow>
void check_every_pattern(Widen widen, Narrow narrow, uint16_t max_finite_bits, const char* what) {
  for (uint32_t sign : {0x0000u, 0x8000u}) {
    for (uint32_t mag = 0; mag <= max_finite_bits; ++mag) {
      const auto h = static_cast<uint16_t>(sign | mag);
      const float x = widen(h);
      ASSERT_EQ(narrow(x), h) << what << " round trip of " << std::hex << h;
      const auto up = static_cast<uint16_t>(h + 1);  // the next magnitude (inf after the largest finite)
      // Past the largest finite the ulp stays that of its binade, so the
      // overflow midpoint is x + half of the previous step.
      const double next = mag == max_finite_bits ? 2.0 * x - widen(static_cast<uint16_t>(h - 1)) : widen(up);
      const double mid = (static_cast<double>(x) + next) / 2;
      const auto mid_f = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(mid_f), mid) << what << ": midpoints are float32 values";
      const uint16_t even = (h & 1u) == 0 ? h : up;
      ASSERT_EQ(narrow(mid_f), even) << what << " tie after " << std::hex << h;
      const float toward_zero = std::nextafter(mid_f, 0.0f);
      const float away = std::nextafter(mid_f, sign != 0 ? -INFINITY : INFINITY);
      ASSERT_EQ(narrow(toward_zero), h) << what << " below the midpoint after " << std::hex << h;
      ASSERT_EQ(narrow(away), up) << what << " above the midpoint after " << std::hex << h;
    }
  }
}

TEST(FloatFormats, Bf16EveryPatternAndMidpoint) {
  check_every_pattern(bf16_to_f32, f32_to_bf16, 0x7F7F, "bf16");
}

TEST(FloatFormats, F16EveryPatternAndMidpoint) {
  check_every_pattern(f16_to_f32, f32_to_f16, 0x7BFF, "f16");
}

TEST(FloatFormats, F16WideningIsExactForEveryBitPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float got = f16_to_f32(h);
    // Independent definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 31) {
      if (m == 0)
        ASSERT_EQ(got, sign * std::numeric_limits<float>::infinity()) << bits;
      else
        ASSERT_TRUE(std::isnan(got)) << bits;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    ASSERT_TRUE(same_bits(got, sign * static_cast<float>(mag))) << bits;
  }
  EXPECT_TRUE(same_bits(bf16_to_f32(0xBF80), -1.0f));
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC1)));
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion (round to nearest even) on
// random floats spread over the whole half range, subnormals included.
TEST(FloatFormats, F16MatchesTheCompilersConversion) {
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(rng.uniform() * 2.0f - 1.0f, static_cast<int>(rng.uniform() * 46.0f) - 28);
    const auto ref = static_cast<_Float16>(x);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(f32_to_f16(x), ref_bits) << x;
  }
}
#endif

TEST(FloatFormats, NamesAndRoundTo) {
  EXPECT_EQ(float_format_from_name("bf16"), FloatFormat::kBF16);
  EXPECT_EQ(float_format_from_name("f16"), FloatFormat::kF16);
  EXPECT_EQ(float_format_from_name("f32"), FloatFormat::kF32);
  EXPECT_FALSE(float_format_from_name("fp16").has_value());
  EXPECT_FALSE(float_format_from_name("").has_value());
  EXPECT_STREQ(safetensors_dtype(FloatFormat::kBF16), "BF16");
  EXPECT_STREQ(torch_dtype_name(FloatFormat::kF16), "float16");
  EXPECT_EQ(bytes_per_element(FloatFormat::kF32), 4);
  EXPECT_EQ(bytes_per_element(FloatFormat::kBF16), 2);
  EXPECT_EQ(round_to_format(FloatFormat::kF32, 0.1f), 0.1f);
  EXPECT_EQ(round_to_format(FloatFormat::kBF16, 0.1f), from_bits(0x3DCD0000));
  EXPECT_EQ(round_to_format(FloatFormat::kF16, 0.1f), 0.0999755859375f);
}

// overflow_threshold is the exact boundary: the float below it stays finite.
TEST(FloatFormats, LargestFiniteAndOverflowThreshold) {
  EXPECT_EQ(largest_finite(FloatFormat::kF16), 65504.0f);
  EXPECT_EQ(bits_of(largest_finite(FloatFormat::kBF16)), 0x7F7F0000u);
  EXPECT_EQ(largest_finite(FloatFormat::kF32), std::numeric_limits<float>::max());
  EXPECT_TRUE(std::isinf(overflow_threshold(FloatFormat::kF32)));
  for (FloatFormat f : {FloatFormat::kBF16, FloatFormat::kF16}) {
    for (float sign : {1.0f, -1.0f}) {
      const float t = sign * overflow_threshold(f);
      EXPECT_TRUE(std::isinf(round_to_format(f, t))) << to_string(f);
      EXPECT_EQ(round_to_format(f, std::nextafter(t, 0.0f)), sign * largest_finite(f)) << to_string(f);
    }
  }
}

}  // namespace
}  // namespace hymba
