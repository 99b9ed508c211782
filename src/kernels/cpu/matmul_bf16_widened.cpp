#include "kernels/cpu/matmul_bf16_widened.h"

#include <algorithm>
#include <vector>

#include "core/float_formats.h"
#include "kernels/cpu/decode_linear.h"

namespace hymba::cpu {

void matmul_bf16_widened(float* out, int64_t ld_out, const float* in, int64_t ld_in, const uint16_t* w, int64_t rows,
                         int64_t C, int64_t OC) {
  constexpr int64_t kTileRows = 256;
  thread_local std::vector<float> tile;
  tile.resize(static_cast<size_t>(std::min(kTileRows, OC) * C));
  float* buf = tile.data();  // not `tile` in the loop: each worker has its own thread_local
  for (int64_t r0 = 0; r0 < OC; r0 += kTileRows) {
    const int64_t n = std::min(kTileRows, OC - r0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < C; ++c) buf[r * C + c] = bf16_to_f32(w[(r0 + r) * C + c]);
    decode_linear(out + r0, ld_out, in, ld_in, buf, rows, C, n);
  }
}

}  // namespace hymba::cpu
