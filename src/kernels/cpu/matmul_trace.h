// Where the linear layers' products spend their time, for profiles. While a
// MatmulTraceScope is alive, every product matmul_forward and
// matmul_backward run (kernels/cpu/matmul.h) is timed and added to the trace
// under its shape; replay_product() then runs one shape alone in a hot loop,
// which gives the library's peak on exactly the shapes a model multiplies.
// Tracing costs two clock reads a product; with no scope alive, one load.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <mutex>

namespace hymba::cpu {

// out = inp · weightᵀ (forward), dinp = dout · weight (the input's gradient)
// or dweight += doutᵀ · inp (the weight's gradient): C[M, N] from K-long sums.
enum class ProductKind { kForward, kInputGrad, kWeightGrad };
const char* to_string(ProductKind k);

struct ProductShape {
  ProductKind kind = ProductKind::kForward;
  int64_t M = 0, N = 0, K = 0;
  bool accumulate = false;  // C += product (beta 1; a forward seeded with its bias) rather than C = product
  auto operator<=>(const ProductShape&) const = default;
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
};

struct ProductTime {
  int64_t calls = 0;
  double seconds = 0.0;
};

class MatmulTrace {
 public:
  void add(const ProductShape& shape, double seconds);
  std::map<ProductShape, ProductTime> by_shape() const;
  double seconds() const;
  double flops() const;  // all calls

 private:
  mutable std::mutex mu_;
  std::map<ProductShape, ProductTime> by_shape_;
};

// Records into `trace` while alive (one scope at a time; nesting restores).
class MatmulTraceScope {
 public:
  explicit MatmulTraceScope(MatmulTrace& trace);
  ~MatmulTraceScope();
  MatmulTraceScope(const MatmulTraceScope&) = delete;
  MatmulTraceScope& operator=(const MatmulTraceScope&) = delete;

 private:
  MatmulTrace* saved_;
};

// The trace products are recorded into now (nullptr: none).
MatmulTrace* active_matmul_trace();

// The fastest of `reps` runs (after one untimed) of one product of `shape`
// through matmul_forward / matmul_backward in the current precision, on
// buffers of its own: seconds per call. Not recorded in any trace.
double replay_product(const ProductShape& shape, int reps);

}  // namespace hymba::cpu
