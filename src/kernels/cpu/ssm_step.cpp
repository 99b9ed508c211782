// The Mamba-1 recurrence of a decode step (ssm_step.h). Plain loops written
// so GCC vectorises them without -ffast-math: exponentials use the
// branch-free polynomials of fast_math.h (libm's expf is a scalar call), and
// the sums C . h run in eight independent partial sums (a single running
// sum is a reassociation GCC will not vectorise).
#include "kernels/cpu/ssm_step.h"

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/vec8.h"

namespace hymba::cpu {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelMin = int64_t{1} << 15;

}  // namespace

void ssm_step(float* y, float* const* h, const SsmStepArgs& a) {
  const int64_t D = a.D, N = a.N;
  // Rows (b, d) in runs of 8 of one sequence: each row's step size and gate
  // first, in loops GCC vectorises (a softplus and a sigmoid a row, one at a
  // time, cost more than the row's N state updates), then the state updates,
  // and the 8 rows' sums C . h in one lane_sums8 (kernels/cpu/vec8.h).
  const int64_t runs_per_row = (D + 7) / 8;
  parallel_for(a.B * runs_per_row, a.B * D * N >= kParallelMin, [&](int64_t first, int64_t last) {
    for (int64_t run = first; run < last; ++run) {
      const int64_t b = run / runs_per_row, d0 = run % runs_per_row * 8, nd = std::min<int64_t>(8, D - d0);
      const float* __restrict u = a.u + b * D + d0;
      const float* __restrict delta = a.delta + b * D + d0;
      float dt[8], gate[8];
      for (int64_t i = 0; i < nd; ++i) dt[i] = fast::softplus(delta[i] + a.delta_bias[d0 + i]);
      if (a.z != nullptr) {
        const float* __restrict z = a.z + b * a.ld_z + d0;
        for (int64_t i = 0; i < nd; ++i) gate[i] = z[i] * fast::sigmoid(z[i]);
      }
      const float* __restrict Bm = a.Bm + b * a.ld_B;
      const float* __restrict Cm = a.Cm + b * a.ld_C;
      Vec8 parts[8] = {};
      float tails[8] = {};
      for (int64_t i = 0; i < nd; ++i) {
        const float dt_r = dt[i], dtu = dt_r * u[i];
        const float* __restrict A = a.A + (d0 + i) * N;
        float* __restrict hs = h[b] + (d0 + i) * N;
        for (int64_t n = 0; n < N; ++n) hs[n] = fast::exp_nonpositive(dt_r * A[n]) * hs[n] + dtu * Bm[n];
        int64_t n = 0;
        for (; n + 8 <= N; n += 8) parts[i] += load8(Cm + n) * load8(hs + n);
        for (; n < N; ++n) tails[i] += Cm[n] * hs[n];
      }
      const Vec8 sums = lane_sums8(parts);
      float* __restrict yr = y + b * D + d0;
      for (int64_t i = 0; i < nd; ++i) {
        const float out = (sums[i] + tails[i]) + a.Dskip[d0 + i] * u[i];
        yr[i] = a.z == nullptr ? out : out * gate[i];
      }
    }
  });
}

}  // namespace hymba::cpu
