// Plain reference for the bf16 matrix product (kernels/cpu/gemm_bf16.h):
// each element rounded to bf16 one by one, the products summed in double.
#pragma once

#include <cstdint>
#include <vector>

#include "core/float_formats.h"
#include "kernels/gemm_operand.h"

namespace hymba::ref {

// op(A)[M, K] · op(B)[K, N] of the bf16-rounded elements, row-major [M, N],
// and the sum of |products| per element (the scale of its rounding error).
struct GemmBf16Result {
  std::vector<double> c, magnitude;
};

inline GemmBf16Result gemm_bf16(int64_t M, int64_t N, int64_t K, cpu::GemmOperand A, cpu::GemmOperand B) {
  auto at = [](const cpu::GemmOperand& X, int64_t r, int64_t c) {
    return double{bf16_to_f32(f32_to_bf16(X.transposed ? X.data[c * X.ld + r] : X.data[r * X.ld + c]))};
  };
  GemmBf16Result out{std::vector<double>(static_cast<size_t>(M * N)), std::vector<double>(static_cast<size_t>(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = at(A, i, k) * at(B, k, j);
        sum += p;
        magnitude += p < 0 ? -p : p;
      }
      out.c[static_cast<size_t>(i * N + j)] = sum;
      out.magnitude[static_cast<size_t>(i * N + j)] = magnitude;
    }
  return out;
}

}  // namespace hymba::ref
