// A matrix operand as the bf16 GEMM (kernels/cpu/gemm_bf16.h) and its plain
// reference (kernels/reference/gemm_bf16.h) both take it, here so that the
// reference depends on no fast kernel's header. The type keeps the
// namespace of the kernel that introduced it.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// An operand in row-major storage: element (r, c) of op(X) is
// data[r * ld + c], or data[c * ld + r] when transposed.
struct GemmOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
};

}  // namespace hymba::cpu
