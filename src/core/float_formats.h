// The float formats checkpoints store: float32, bfloat16 (float32's sign and
// 8-bit exponent with a 7-bit mantissa: the dtype of the published Hymba and
// Mamba checkpoints) and IEEE binary16 ("half": 5-bit exponent, 10-bit
// mantissa, largest finite 65504). Every conversion in the engine goes
// through these functions: safetensors and torch readers widen to float32,
// `export --dtype` narrows.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hymba {

enum class FloatFormat { kF32, kBF16, kF16 };

// "f32", "bf16", "f16" (the --dtype spellings); nullopt for anything else.
std::optional<FloatFormat> float_format_from_name(std::string_view name);
const char* to_string(FloatFormat f);          // "f32", "bf16", "f16"
const char* safetensors_dtype(FloatFormat f);  // "F32", "BF16", "F16"
const char* torch_dtype_name(FloatFormat f);   // "float32", "bfloat16", "float16" (config.json torch_dtype)
int bytes_per_element(FloatFormat f);          // 4, 2, 2

// Widening: exact for every bit pattern (subnormals, signed zeros, inf; NaN
// stays NaN with its payload).
float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);

// Narrowing: round to nearest, ties to even, as IEEE 754 and torch's .to()
// do. Finite values beyond the format's range become infinity (bf16 from
// 0x7F7F8000 ≈ 3.39e38 up, f16 from 65520 up: 65504 < |x| < 65520 rounds down
// to 65504); values below half the smallest subnormal become signed zero;
// NaN stays a quiet NaN of the same sign.
uint16_t f32_to_bf16(float x);
uint16_t f32_to_f16(float x);

// x as format f stores it, back in float32 (x itself for kF32).
float round_to_format(FloatFormat f, float x);

// The format's largest finite value (65504 for f16, ≈ 3.39e38 for bf16,
// FLT_MAX for f32), and the smallest magnitude that rounds to infinity in it
// (65520, 0x7F7F8000 ≈ 3.40e38; infinity for f32): a finite x overflows
// exactly when |x| >= overflow_threshold.
float largest_finite(FloatFormat f);
float overflow_threshold(FloatFormat f);

}  // namespace hymba
