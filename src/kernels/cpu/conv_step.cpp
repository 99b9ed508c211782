// The causal conv1d of a decode step (conv_step.h).
#include "kernels/cpu/conv_step.h"

#include <cstdint>

#include "core/parallel.h"

namespace hymba::cpu {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// conv_step's rows [first, last) (row = b * C + c); K_FIXED > 0 is K known
// at compile time (Mamba's d_conv of 4), where the tap loops unroll.
template <int64_t K_FIXED>
void conv_rows(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight,
               const float* bias, int64_t C, int64_t k_runtime, int64_t first, int64_t last) {
  const int64_t K = K_FIXED > 0 ? K_FIXED : k_runtime;
  for (int64_t row = first; row < last; ++row) {
    const int64_t b = row / C, c = row % C;
    const float* w = weight + c * K;
    float* s = state[b] + c * (K - 1);
    const float xv = x[b * ld_x + c];
    // Same order as the full convolution: bias, then taps oldest first.
    float acc = bias != nullptr ? bias[c] : 0.0f;
    for (int64_t k = 0; k < K - 1; ++k) acc += w[k] * s[k];
    acc += w[K - 1] * xv;
    out[row] = acc;
    for (int64_t k = 0; k + 1 < K - 1; ++k) s[k] = s[k + 1];
    if (K > 1) s[K - 2] = xv;
  }
}

}  // namespace

void conv_step(float* out, const float* x, int64_t ld_x, float* const* state, const float* weight, const float* bias,
               int64_t B, int64_t C, int64_t K) {
  // Channels are independent: a step of one sequence splits them too.
  parallel_for(B * C, B * C * K >= kParallelMin, [&](int64_t first, int64_t last) {
    if (K == 4)
      conv_rows<4>(out, x, ld_x, state, weight, bias, C, K, first, last);
    else
      conv_rows<0>(out, x, ld_x, state, weight, bias, C, K, first, last);
  });
}

}  // namespace hymba::cpu
