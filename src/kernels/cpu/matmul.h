// Linear layers through cblas_sgemm. Weights use the PyTorch nn.Linear layout
// [OC, C]. Size letters: BT rows, C input channels, OC output channels.
// Convention for every backward in src/kernels: gradients ACCUMULATE (+=) into
// the d-pointers the caller passes (zero them first); a null d-pointer skips
// that gradient.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/cpu/gemm_bf16.h"

namespace hymba::cpu {

// The precision of matmul_forward's and matmul_backward's products: float32
// through OpenBLAS, or bf16 with float32 sums (kernels/cpu/gemm_bf16.h),
// the CPU form of PyTorch's autocast. Process-wide like autocast's state and
// float32 unless a scope says otherwise; training sets it for each step's
// forward and backward (`--precision bf16`), never for evaluation.
enum class MatmulPrecision { kF32, kBf16 };
std::optional<MatmulPrecision> parse_matmul_precision(std::string_view name);  // "f32", "bf16"
const char* to_string(MatmulPrecision p);

class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p, Bf16GemmIsa isa = best_bf16_gemm_isa());
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision saved_precision_;
  Bf16GemmIsa saved_isa_;
};
MatmulPrecision matmul_precision();

// out[BT, OC] = inp[BT, C] @ weight[OC, C]^T + bias[OC] (bias may be null).
// ld_out / ld_inp are row strides in floats (>= OC / >= C) so column slices of a
// fused projection can be read and written in place.
void matmul_forward(float* out, int64_t ld_out, const float* inp, int64_t ld_inp, const float* weight,
                    const float* bias, int64_t BT, int64_t C, int64_t OC);

// dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout.
// overwrite_dinp: dinp = dout @ weight instead, for a first writer into a
// fresh buffer (spares zeroing it; dinp is never read). dweight and dbias
// always accumulate.
void matmul_backward(float* dinp, int64_t ld_dinp, float* dweight, float* dbias, const float* dout,
                     int64_t ld_dout, const float* inp, int64_t ld_inp, const float* weight, int64_t BT,
                     int64_t C, int64_t OC, bool overwrite_dinp = false);

// Contiguous conveniences (ld = C / OC).
inline void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t BT,
                           int64_t C, int64_t OC) {
  matmul_forward(out, OC, inp, C, weight, bias, BT, C, OC);
}
inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, int64_t BT, int64_t C, int64_t OC) {
  matmul_backward(dinp, C, dweight, dbias, dout, OC, inp, C, weight, BT, C, OC);
}

}  // namespace hymba::cpu
