// The long product on bf16 weights (kernels/cpu/matmul_bf16_widened.h):
// against the plain reference (kernels/reference/matmul_bf16.h, the widened
// weights in float64) on ragged shapes and strided rows, and the bits of
// decode_linear on the widened weights on any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/float_formats.h"
#include "core/rng.h"
#include "core/threading.h"
#include "kernels/cpu/decode_linear.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_bf16_widened.h"
#include "kernels/reference/matmul_bf16.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;

// Against the float64 reference: float32 sums of up to 257 products.
constexpr double kReferenceRelTol = 1e-5;
// What the floats between output rows hold, and must still hold after.
constexpr float kPad = -7.0f;

std::vector<uint16_t> rounded(const std::vector<float>& w) {
  std::vector<uint16_t> b(w.size());
  cpu::quantize_bf16(b.data(), w.data(), 1, static_cast<int64_t>(w.size()));
  return b;
}

// Weight rows within one tile of 256 and over it (a ragged second tile);
// input rows C + 2 floats apart, output rows OC + 3 apart (the floats past
// OC must stay as they were).
TEST(MatmulBf16Widened, MatchesTheReferenceOnRaggedShapes) {
  for (const int64_t rows : {1, 16, 17})
    for (const int64_t C : {7, 136, 257})
      for (const int64_t OC : {5, 256, 300}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " C " + std::to_string(C) + " OC " + std::to_string(OC));
        Rng rng(static_cast<uint64_t>(3 * C + OC + rows));
        const int64_t ld_in = C + 2, ld_out = OC + 3;
        const auto w = rounded(random_floats(OC * C, rng));
        const auto x = random_floats(rows * C, rng);
        const std::vector<float> in = test::strided(x, rows, C, ld_in, NAN);
        std::vector<float> out(static_cast<size_t>(rows * ld_out), kPad);
        cpu::matmul_bf16_widened(out.data(), ld_out, in.data(), ld_in, w.data(), rows, C, OC);
        test::expect_close(test::unstrided(out, rows, OC, ld_out, kPad),
                           ref::matmul_bf16(x.data(), w.data(), nullptr, rows, C, OC), kReferenceRelTol, "out");
      }
}

// Each tile's product is decode_linear's on the widened rows, whatever the
// threads that split the widening (decode_linear's own bits on many rows
// are OpenBLAS's, which this kernel does not fix).
TEST(MatmulBf16Widened, IsDecodeLinearOnTheWidenedWeightsOnAnyThreadCount) {
  const int64_t rows = 20, C = 136, OC = 300;
  Rng rng(23);
  const auto w = rounded(random_floats(OC * C, rng));
  const auto x = random_floats(rows * C, rng);
  std::vector<float> widened(w.size());
  for (size_t i = 0; i < w.size(); ++i) widened[i] = bf16_to_f32(w[i]);
  const int before = num_threads();
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> out(static_cast<size_t>(rows * OC)), want(out.size());
    cpu::matmul_bf16_widened(out.data(), OC, x.data(), C, w.data(), rows, C, OC);
    for (const int64_t first : {int64_t{0}, int64_t{256}})
      cpu::decode_linear(want.data() + first, OC, x.data(), C, widened.data() + first * C, rows, C,
                         std::min<int64_t>(256, OC - first));
    EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0) << "threads " << threads;
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace hymba
