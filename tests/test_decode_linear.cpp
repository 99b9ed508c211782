// The decoder's float32 product (kernels/cpu/decode_linear.h): against the
// plain reference (kernels/reference/matmul.h) in float64 on ragged shapes
// and strided rows; one row is the fixed-order row kernel's bits
// (matmul_f32_rows) on any thread count, more rows the matmul kernel's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/decode_linear.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/reference/matmul.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;

// Against the float64 reference: float32 sums of up to 257 products.
constexpr double kReferenceRelTol = 1e-5;
// What the floats between output rows hold, and must still hold after.
constexpr float kPad = -7.0f;

// Input rows C + 2 floats apart (NaN past C: a read would show), output
// rows OC + 3 apart (the floats past OC must stay as they were).
TEST(DecodeLinear, MatchesTheReferenceOnRaggedShapes) {
  for (const int64_t rows : {1, 2, 5})
    for (const int64_t C : {1, 7, 9, 136, 257})
      for (const int64_t OC : {1, 5, 300}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " C " + std::to_string(C) + " OC " + std::to_string(OC));
        Rng rng(static_cast<uint64_t>(7 * C + OC + rows));
        const int64_t ld_in = C + 2, ld_out = OC + 3;
        const auto w = random_floats(OC * C, rng), x = random_floats(rows * C, rng);
        const std::vector<float> in = test::strided(x, rows, C, ld_in, NAN);
        std::vector<float> out(static_cast<size_t>(rows * ld_out), kPad);
        cpu::decode_linear(out.data(), ld_out, in.data(), ld_in, w.data(), rows, C, OC);
        std::vector<double> want(static_cast<size_t>(rows * OC));
        ref::matmul_forward<double>(want.data(), test::to_double(x).data(), test::to_double(w).data(), nullptr, rows,
                                    C, OC);
        test::expect_close(test::unstrided(out, rows, OC, ld_out, kPad), want, kReferenceRelTol, "out");
      }
}

// One row is matmul_f32_rows's, whatever the threads (a decode step's bits
// must not depend on them); more rows are matmul_forward's.
TEST(DecodeLinear, IsTheRowKernelForOneRowAndTheMatmulForMore) {
  const int64_t C = 200, OC = 301;
  Rng rng(21);
  const auto w = random_floats(OC * C, rng), x = random_floats(3 * C, rng);
  test::expect_same_bits_on_any_thread_count([&] {
    std::vector<float> out(static_cast<size_t>(OC));
    cpu::decode_linear(out.data(), OC, x.data(), C, w.data(), 1, C, OC);
    std::vector<float> row_kernel(out.size());
    cpu::matmul_f32_rows(row_kernel.data(), OC, x.data(), C, w.data(), nullptr, 1, C, OC);
    EXPECT_EQ(std::memcmp(out.data(), row_kernel.data(), out.size() * sizeof(float)), 0);
    return out;
  });
  std::vector<float> out(static_cast<size_t>(3 * OC)), matmul(out.size());
  cpu::decode_linear(out.data(), OC, x.data(), C, w.data(), 3, C, OC);
  cpu::matmul_forward(matmul.data(), OC, x.data(), C, w.data(), nullptr, 3, C, OC);
  EXPECT_EQ(std::memcmp(out.data(), matmul.data(), out.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace hymba
