#include "kernels/cpu/matmul_trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>

#include "core/aligned.h"
#include "kernels/cpu/matmul.h"

namespace hymba::cpu {

namespace {
std::atomic<MatmulTrace*> g_trace{nullptr};

// Values that keep sums finite and away from subnormals over any K.
void fill(float* p, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) p[i] = scale * static_cast<float>((i * 7919) % 17 - 8) / 8.0f;
}

AlignedFloats filled(int64_t n, float scale) {
  AlignedFloats a = make_aligned_floats(static_cast<std::size_t>(std::max<int64_t>(n, 1)));
  fill(a.get(), n, scale);
  return a;
}
}  // namespace

const char* to_string(ProductKind k) {
  switch (k) {
    case ProductKind::kForward: return "forward";
    case ProductKind::kInputGrad: return "input-grad";
    case ProductKind::kWeightGrad: return "weight-grad";
  }
  return "?";
}

void MatmulTrace::add(const ProductShape& shape, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ProductTime& t = by_shape_[shape];
  ++t.calls;
  t.seconds += seconds;
}

std::map<ProductShape, ProductTime> MatmulTrace::by_shape() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_shape_;
}

double MatmulTrace::seconds() const {
  double s = 0.0;
  for (const auto& [shape, t] : by_shape()) s += t.seconds;
  return s;
}

double MatmulTrace::flops() const {
  double f = 0.0;
  for (const auto& [shape, t] : by_shape()) f += shape.flops() * static_cast<double>(t.calls);
  return f;
}

MatmulTraceScope::MatmulTraceScope(MatmulTrace& trace) : saved_(g_trace.exchange(&trace)) {}
MatmulTraceScope::~MatmulTraceScope() { g_trace.store(saved_); }

MatmulTrace* active_matmul_trace() { return g_trace.load(std::memory_order_relaxed); }

double replay_product(const ProductShape& s, int reps) {
  MatmulTrace* const outer = g_trace.exchange(nullptr);  // the replay is not part of the traced work
  // forward: out[M, N] = inp[M, K] · weight[N, K]ᵀ; input-grad: dinp[M, N] =
  // dout[M, K] · weight[K, N]; weight-grad: dweight[M, N] += dout[K, M]ᵀ · inp[K, N].
  const AlignedFloats a = filled(s.M * s.K, 0.5f), b = filled(s.N * s.K, 0.25f);
  AlignedFloats c = filled(s.M * s.N, 0.0f);
  const AlignedFloats bias = filled(s.N, 0.125f);  // forward products with a bias seed C with it
  auto run = [&] {
    switch (s.kind) {
      case ProductKind::kForward:
        matmul_forward(c.get(), a.get(), b.get(), s.accumulate ? bias.get() : nullptr, s.M, s.K, s.N);
        break;
      case ProductKind::kInputGrad:
        matmul_backward(c.get(), s.N, nullptr, nullptr, a.get(), s.K, nullptr, s.N, b.get(), s.M, s.N, s.K,
                        !s.accumulate);
        break;
      case ProductKind::kWeightGrad:
        matmul_backward(nullptr, s.N, c.get(), nullptr, a.get(), s.M, b.get(), s.N, nullptr, s.K, s.N, s.M);
        break;
    }
  };
  run();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  g_trace.store(outer);
  return best;
}

}  // namespace hymba::cpu
