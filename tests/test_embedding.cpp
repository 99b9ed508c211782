#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/threading.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"
#include "kernels/reference/embedding.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::random_floats;
using test::to_double;

// The forward is a copy and the backward a sum of copies: both are compared
// against float64 to within float rounding of a few additions.
constexpr double kBackwardTol = 1e-5;

struct EmbeddingShape {
  int64_t N, V, C;
};

std::vector<int32_t> random_ids(int64_t N, int64_t V, Rng& rng) {
  std::vector<int32_t> ids(N);
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  return ids;
}

class EmbeddingTest : public ::testing::TestWithParam<EmbeddingShape> {};

TEST_P(EmbeddingTest, ForwardMatchesReferenceExactly) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const EmbeddingShape shape = GetParam();
  const auto N = shape.N;
  const auto V = shape.V;
  const auto C = shape.C;
  Rng rng(1);
  auto table = random_floats(V * C, rng);
  auto ids = random_ids(N, V, rng);
  std::vector<float> out(N * C, -7.0f), ref(N * C);
  cpu::embedding_forward(out.data(), ids.data(), table.data(), N, V, C);
  ref::embedding_forward(ref.data(), ids.data(), table.data(), N, C);
  EXPECT_EQ(out, ref);
}

TEST_P(EmbeddingTest, BackwardMatchesFiniteDifferences) {
  // Copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const EmbeddingShape shape = GetParam();
  const auto N = shape.N;
  const auto V = shape.V;
  const auto C = shape.C;
  Rng rng(2);
  auto table = random_floats(V * C, rng);
  auto ids = random_ids(N, V, rng);
  auto dout = random_floats(N * C, rng);
  // Non-zero initial gradients check that backward accumulates.
  auto dtable0 = random_floats(V * C, rng);
  std::vector<float> dtable = dtable0;
  cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), N, V, C);
  for (size_t i = 0; i < dtable.size(); ++i) dtable[i] -= dtable0[i];

  auto table_d = to_double(table), w = to_double(dout);
  std::vector<double> out(N * C);
  auto loss = [&] {
    ref::embedding_forward(out.data(), ids.data(), table_d.data(), N, C);
    return test::weighted_sum(out, w);
  };
  test::expect_grad_matches(loss, table_d, dtable, kBackwardTol, "dtable");
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingTest,
                         ::testing::Values(EmbeddingShape{1, 1, 1}, EmbeddingShape{3, 5, 7},
                                           EmbeddingShape{17, 4, 33}, EmbeddingShape{33, 50, 16},
                                           EmbeddingShape{64, 3, 1}));

TEST(Embedding, RepeatedIdsAccumulate) {
  const int64_t V = 4, C = 3;
  const std::vector<int32_t> ids = {2, 0, 2, 2};
  const std::vector<float> dout = {1, 2, 3, 10, 20, 30, 100, 200, 300, 1000, 2000, 3000};
  std::vector<float> dtable(V * C, 0.5f);
  cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), 4, V, C);
  const std::vector<float> expected = {10.5f,  20.5f,  30.5f,  0.5f, 0.5f, 0.5f,
                                       1101.5f, 2202.5f, 3303.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_EQ(dtable, expected);
}

TEST(Embedding, NullGradientIsSkipped) {
  const std::vector<int32_t> ids = {0};
  const std::vector<float> dout = {1.0f};
  EXPECT_NO_THROW(cpu::embedding_backward(nullptr, dout.data(), ids.data(), 1, 1, 1));
}

// A table kept in q8 / q4 blocks, as the file's rows or repacked for the
// products, gives each looked-up row exactly as the whole table widened (C
// not a multiple of the block: the padded last block).
TEST(Embedding, BlockTablesGiveTheRowsOfTheWidenedTable) {
  const int64_t V = 37, C = 70, N = 11;
  Rng rng(5);
  const std::vector<float> table = random_floats(static_cast<size_t>(V * C), rng);
  const std::vector<int32_t> ids = random_ids(N, V, rng);
  std::vector<cpu::BlockQ8> q8(static_cast<size_t>(V * cpu::q8_blocks_per_row(C)));
  std::vector<cpu::BlockQ4> q4(static_cast<size_t>(V * cpu::q4_blocks_per_row(C)));
  cpu::quantize_q8(q8.data(), table.data(), V, C);
  cpu::quantize_q4(q4.data(), table.data(), V, C);
  std::vector<float> wide8(V * C), wide4(V * C), want(N * C), got(N * C);
  cpu::dequantize_q8(wide8.data(), q8.data(), V, C);
  cpu::dequantize_q4(wide4.data(), q4.data(), V, C);
  cpu::embedding_forward(want.data(), ids.data(), wide8.data(), N, V, C);
  cpu::embedding_forward_q8(got.data(), ids.data(), q8.data(), N, V, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  ref::embedding_forward_q8(want.data(), ids.data(), q8.data(), N, C);  // and the reference, element by element
  cpu::embedding_forward_q8(got.data(), ids.data(), q8.data(), N, V, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  cpu::embedding_forward(want.data(), ids.data(), wide4.data(), N, V, C);
  cpu::embedding_forward_q4(got.data(), ids.data(), q4.data(), N, V, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  ref::embedding_forward_q4(want.data(), ids.data(), q4.data(), N, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  // Repacked for the products (V not a multiple of 8: a part-filled last group).
  std::vector<cpu::PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(V) * cpu::q8_blocks_per_row(C)));
  std::vector<cpu::PackedQ4> p4(static_cast<size_t>(cpu::packed_groups(V) * cpu::q4_blocks_per_row(C)));
  cpu::pack_q8(p8.data(), q8.data(), V, C);
  cpu::pack_q4(p4.data(), q4.data(), V, C);
  cpu::embedding_forward_packed_q4(got.data(), ids.data(), p4.data(), N, V, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  cpu::embedding_forward_q8(want.data(), ids.data(), q8.data(), N, V, C);
  cpu::embedding_forward_packed_q8(got.data(), ids.data(), p8.data(), N, V, C);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  const std::vector<int32_t> bad = {0, static_cast<int32_t>(V)};
  EXPECT_THROW(cpu::embedding_forward_q8(got.data(), bad.data(), q8.data(), 2, V, C), Error);
  EXPECT_THROW(cpu::embedding_forward_q4(got.data(), bad.data(), q4.data(), 2, V, C), Error);
  EXPECT_THROW(cpu::embedding_forward_packed_q8(got.data(), bad.data(), p8.data(), 2, V, C), Error);
  EXPECT_THROW(cpu::embedding_forward_packed_q4(got.data(), bad.data(), p4.data(), 2, V, C), Error);
}

TEST(Embedding, IdOutsideVocabularyThrowsNamingPositionAndId) {
  const int64_t V = 5, C = 2;
  std::vector<float> table(V * C, 1.0f), out(3 * C), dtable(V * C), dout(3 * C, 1.0f);
  for (int32_t bad : {-1, 5, 1 << 30}) {
    const std::vector<int32_t> ids = {0, bad, 4};
    try {
      cpu::embedding_forward(out.data(), ids.data(), table.data(), 3, V, C);
      ADD_FAILURE() << "no throw for id " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("position 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
    EXPECT_THROW(cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), 3, V, C), Error);
  }
}

TEST(Embedding, BackwardIsBitIdenticalAcrossRunsAndThreadCounts) {
  const int64_t N = 4099, V = 37, C = 67;  // many repeats per row
  Rng rng(5);
  auto ids = random_ids(N, V, rng);
  auto dout = random_floats(N * C, rng);
  const int saved_threads = num_threads();
  std::vector<float> first;
  for (int threads : {2, 2, 1, 3}) {
    set_num_threads(threads);
    std::vector<float> dtable(V * C, 0.25f);
    cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), N, V, C);
    if (first.empty()) first = dtable;
    EXPECT_EQ(std::memcmp(dtable.data(), first.data(), first.size() * sizeof(float)), 0)
        << "threads = " << threads;
  }
  set_num_threads(saved_threads);
}

}  // namespace
}  // namespace hymba
