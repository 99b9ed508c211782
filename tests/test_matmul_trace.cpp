// The linear layers' product trace (kernels/cpu/matmul_trace.h): what a
// profile records per shape, and the replay that measures the shapes' peak.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_trace.h"

namespace hymba {
namespace {

using cpu::ProductKind;
using cpu::ProductShape;

TEST(MatmulTrace, RecordsEachProductUnderItsShape) {
  const int64_t BT = 5, C = 7, OC = 3;
  std::vector<float> x(BT * C, 0.5f), w(OC * C, 0.25f), b(OC, 1.0f), out(BT * OC), dout(BT * OC, 1.0f);
  std::vector<float> dx(BT * C), dw(OC * C), db(OC);
  cpu::MatmulTrace trace;
  {
    const cpu::MatmulTraceScope scope(trace);
    EXPECT_EQ(cpu::active_matmul_trace(), &trace);
    cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, BT, C, OC);
    cpu::matmul_forward(out.data(), x.data(), w.data(), b.data(), BT, C, OC);
    cpu::matmul_forward(out.data(), x.data(), w.data(), b.data(), BT, C, OC);
    cpu::matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), BT, C, OC);
  }
  EXPECT_EQ(cpu::active_matmul_trace(), nullptr);
  cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, BT, C, OC);  // after the scope: not recorded

  const auto shapes = trace.by_shape();
  ASSERT_EQ(shapes.size(), 4u);
  const ProductShape plain{ProductKind::kForward, BT, OC, C, false}, biased{ProductKind::kForward, BT, OC, C, true};
  const ProductShape input_grad{ProductKind::kInputGrad, BT, C, OC, true};  // accumulates into dx
  const ProductShape weight_grad{ProductKind::kWeightGrad, OC, C, BT, true};
  ASSERT_TRUE(shapes.count(plain) && shapes.count(biased) && shapes.count(input_grad) && shapes.count(weight_grad));
  EXPECT_EQ(shapes.at(plain).calls, 1);
  EXPECT_EQ(shapes.at(biased).calls, 2);
  EXPECT_EQ(shapes.at(input_grad).calls, 1);
  EXPECT_EQ(shapes.at(weight_grad).calls, 1);
  EXPECT_DOUBLE_EQ(trace.flops(), 5.0 * 2.0 * BT * C * OC);
  EXPECT_GT(trace.seconds(), 0.0);
}

TEST(MatmulTrace, OverwritingInputGradientIsItsOwnShape) {
  const int64_t BT = 4, C = 6, OC = 2;
  std::vector<float> w(OC * C, 0.5f), dout(BT * OC, 1.0f), dx(BT * C, 99.0f);
  cpu::MatmulTrace trace;
  {
    const cpu::MatmulTraceScope scope(trace);
    cpu::matmul_backward(dx.data(), C, nullptr, nullptr, dout.data(), OC, nullptr, C, w.data(), BT, C, OC,
                         /*overwrite_dinp=*/true);
  }
  const auto shapes = trace.by_shape();
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes.begin()->first, (ProductShape{ProductKind::kInputGrad, BT, C, OC, false}));
  EXPECT_FLOAT_EQ(dx[0], 2 * 0.5f);  // overwritten, not added to 99
}

TEST(MatmulTrace, ReplayTimesEveryKindWithoutRecording) {
  cpu::MatmulTrace outer;
  const cpu::MatmulTraceScope scope(outer);
  for (const ProductKind kind : {ProductKind::kForward, ProductKind::kInputGrad, ProductKind::kWeightGrad})
    for (const bool accumulate : {false, true}) {
      const double s = cpu::replay_product({kind, 33, 17, 9, accumulate}, 2);
      EXPECT_GT(s, 0.0) << cpu::to_string(kind);
      EXPECT_LT(s, 1.0) << cpu::to_string(kind);
    }
  EXPECT_TRUE(outer.by_shape().empty());  // the replay is not part of the traced work
  EXPECT_EQ(cpu::active_matmul_trace(), &outer);
}

TEST(MatmulTrace, ScopesNestAndRestore) {
  cpu::MatmulTrace a, b;
  {
    const cpu::MatmulTraceScope outer(a);
    {
      const cpu::MatmulTraceScope inner(b);
      EXPECT_EQ(cpu::active_matmul_trace(), &b);
    }
    EXPECT_EQ(cpu::active_matmul_trace(), &a);
  }
  EXPECT_EQ(cpu::active_matmul_trace(), nullptr);
}

}  // namespace
}  // namespace hymba
