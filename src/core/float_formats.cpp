#include "core/float_formats.h"

#include <bit>
#include <cmath>
#include <limits>

namespace hymba {

namespace {

constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;

// Shifts m right by `shift` bits (1..31), rounding to nearest, ties to even.
uint32_t shift_right_rounded(uint32_t m, uint32_t shift) {
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t q = m >> shift;
  // Branch-free: the round-up decision is a coin flip on real data.
  return q + static_cast<uint32_t>((rest > half) | ((rest == half) & ((q & 1u) != 0)));
}

}  // namespace

std::optional<FloatFormat> float_format_from_name(std::string_view name) {
  if (name == "f32") return FloatFormat::kF32;
  if (name == "bf16") return FloatFormat::kBF16;
  if (name == "f16") return FloatFormat::kF16;
  return std::nullopt;
}

const char* to_string(FloatFormat f) {
  switch (f) {
    case FloatFormat::kBF16: return "bf16";
    case FloatFormat::kF16: return "f16";
    case FloatFormat::kF32: break;
  }
  return "f32";
}

const char* safetensors_dtype(FloatFormat f) {
  switch (f) {
    case FloatFormat::kBF16: return "BF16";
    case FloatFormat::kF16: return "F16";
    case FloatFormat::kF32: break;
  }
  return "F32";
}

const char* torch_dtype_name(FloatFormat f) {
  switch (f) {
    case FloatFormat::kBF16: return "bfloat16";
    case FloatFormat::kF16: return "float16";
    case FloatFormat::kF32: break;
  }
  return "float32";
}

int bytes_per_element(FloatFormat f) { return f == FloatFormat::kF32 ? 4 : 2; }

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exactly representable in float32.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  uint32_t bits;
  if (exp == 31)
    bits = sign | kF32Inf | (mant << 13);  // inf, or NaN with its payload kept
  else
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  // Rounding a NaN's bits could carry into the exponent (or drop a low-only
  // payload, leaving inf): keep the top payload bits and force a quiet NaN.
  if ((b & kF32AbsMask) > kF32Inf) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  // bf16 is float32's top half, so rounding the low 16 bits is the whole job;
  // a carry out of the mantissa correctly bumps the exponent (up to inf), and
  // subnormals need no special case since both share the exponent range.
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

uint16_t f32_to_f16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & kF32AbsMask;
  if (a > kF32Inf) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  // 65520 = 65504 + half an ulp is a tie that rounds to the even neighbour,
  // which is infinity; everything from there up overflows.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // >= 2^-14: a normal half; rebias the exponent, round 23 -> 10 mantissa bits
    const uint32_t rebiased = a - ((127u - 15u) << 23);
    return static_cast<uint16_t>(sign | shift_right_rounded(rebiased, 13));
  }
  if (a < 0x33000000u) return sign;  // below 2^-25 (half the smallest subnormal): zero
  // Subnormal half: the value in units of 2^-24, rounded. x = m * 2^(e - 150)
  // with m the 24-bit significand, so the count is m >> (126 - e); a result of
  // 0x400 is the smallest normal, whose encoding it already is.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_right_rounded(m, 126u - e));
}

float largest_finite(FloatFormat f) {
  switch (f) {
    case FloatFormat::kBF16: return bf16_to_f32(0x7F7Fu);
    case FloatFormat::kF16: return f16_to_f32(0x7BFFu);
    case FloatFormat::kF32: break;
  }
  return std::numeric_limits<float>::max();
}

float overflow_threshold(FloatFormat f) {
  switch (f) {
    case FloatFormat::kBF16: return std::bit_cast<float>(0x7F7F8000u);  // 0x7F7F plus half an ulp: ties to inf
    case FloatFormat::kF16: return 65520.0f;                            // 65504 plus half an ulp (16)
    case FloatFormat::kF32: break;
  }
  return std::numeric_limits<float>::infinity();
}

float round_to_format(FloatFormat f, float x) {
  switch (f) {
    case FloatFormat::kBF16: return bf16_to_f32(f32_to_bf16(x));
    case FloatFormat::kF16: return f16_to_f32(f32_to_f16(x));
    case FloatFormat::kF32: break;
  }
  return x;
}

}  // namespace hymba
