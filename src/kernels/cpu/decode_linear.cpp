#include "kernels/cpu/decode_linear.h"

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_bf16.h"

namespace hymba::cpu {

void decode_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
                   int64_t OC) {
  if (rows == 1) {
    // A decode step's product of one row: rows summed in one fixed order
    // (kernels/cpu/matmul_bf16.h), so the bits depend neither on the threads
    // nor on OpenBLAS, whose sgemv sums a row one way in a group of four
    // and another way in the ragged rest of the band its threads give it.
    matmul_f32_rows(out, ld_out, in, ld_in, w, nullptr, 1, C, OC);
    return;
  }
  matmul_forward(out, ld_out, in, ld_in, w, nullptr, rows, C, OC);
}

}  // namespace hymba::cpu
