#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <atomic>
#include <chrono>

#include "kernels/cpu/matmul_trace.h"

namespace hymba::cpu {

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::kF32};
std::atomic<Bf16GemmIsa> g_bf16_isa{Bf16GemmIsa::kPortable};

bool in_bf16() { return g_precision.load(std::memory_order_relaxed) == MatmulPrecision::kBf16; }
Bf16GemmIsa bf16_isa() { return g_bf16_isa.load(std::memory_order_relaxed); }
}  // namespace

std::optional<MatmulPrecision> parse_matmul_precision(std::string_view name) {
  if (name == "f32") return MatmulPrecision::kF32;
  if (name == "bf16") return MatmulPrecision::kBf16;
  return std::nullopt;
}

const char* to_string(MatmulPrecision p) { return p == MatmulPrecision::kBf16 ? "bf16" : "f32"; }

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision p, Bf16GemmIsa isa)
    : saved_precision_(g_precision.load()), saved_isa_(g_bf16_isa.load()) {
  g_bf16_isa.store(isa);
  g_precision.store(p);
}

MatmulPrecisionScope::~MatmulPrecisionScope() {
  g_precision.store(saved_precision_);
  g_bf16_isa.store(saved_isa_);
}

MatmulPrecision matmul_precision() { return g_precision.load(); }

namespace {
// Runs one product, timed into the active trace when there is one.
template <class Product>
void traced(ProductKind kind, int64_t M, int64_t N, int64_t K, bool accumulate, Product&& product) {
  MatmulTrace* trace = active_matmul_trace();
  if (trace == nullptr) {
    product();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  product();
  trace->add({kind, M, N, K, accumulate}, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

void matmul_forward(float* out, int64_t ld_out, const float* inp, int64_t ld_inp, const float* weight,
                    const float* bias, int64_t BT, int64_t C, int64_t OC) {
  if (BT == 0 || OC == 0) return;
  traced(ProductKind::kForward, BT, OC, C, bias != nullptr, [&] {
    float beta = 0.0f;
    if (bias != nullptr) {
      // Seed each output row with the bias, then let sgemm accumulate onto it.
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < BT; ++r) {
        float* o = out + r * ld_out;
        for (int64_t j = 0; j < OC; ++j) o[j] = bias[j];
      }
      beta = 1.0f;
    }
    if (in_bf16()) {
      gemm_bf16(BT, OC, C, {inp, ld_inp, false}, {weight, C, true}, beta, out, ld_out, bf16_isa());
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(BT), static_cast<int>(OC),
                static_cast<int>(C), 1.0f, inp, static_cast<int>(ld_inp), weight, static_cast<int>(C), beta, out,
                static_cast<int>(ld_out));
  });
}

void matmul_backward(float* dinp, int64_t ld_dinp, float* dweight, float* dbias, const float* dout,
                     int64_t ld_dout, const float* inp, int64_t ld_inp, const float* weight, int64_t BT,
                     int64_t C, int64_t OC, bool overwrite_dinp) {
  if (BT == 0) return;
  const bool bf16 = in_bf16();
  if (dinp != nullptr) {
    traced(ProductKind::kInputGrad, BT, C, OC, !overwrite_dinp, [&] {
      const float beta = overwrite_dinp ? 0.0f : 1.0f;  // beta 0 never reads dinp
      if (bf16) {
        gemm_bf16(BT, C, OC, {dout, ld_dout, false}, {weight, C, false}, beta, dinp, ld_dinp, bf16_isa());
        return;
      }
      // dinp[BT, C] (+)= dout[BT, OC] @ weight[OC, C]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(BT), static_cast<int>(C),
                  static_cast<int>(OC), 1.0f, dout, static_cast<int>(ld_dout), weight, static_cast<int>(C), beta,
                  dinp, static_cast<int>(ld_dinp));
    });
  }
  if (dweight != nullptr) {
    traced(ProductKind::kWeightGrad, OC, C, BT, true, [&] {
      if (bf16) {
        gemm_bf16(OC, C, BT, {dout, ld_dout, true}, {inp, ld_inp, false}, 1.0f, dweight, C, bf16_isa());
        return;
      }
      // dweight[OC, C] += dout^T[OC, BT] @ inp[BT, C]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(OC), static_cast<int>(C),
                  static_cast<int>(BT), 1.0f, dout, static_cast<int>(ld_dout), inp, static_cast<int>(ld_inp), 1.0f,
                  dweight, static_cast<int>(C));
    });
  }
  if (dbias != nullptr) {
    // Parallel over output channels: each channel sums its column in row
    // order, so the result does not depend on the thread count.
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < OC; ++j) {
      float s = 0.0f;
      for (int64_t r = 0; r < BT; ++r) s += dout[r * ld_dout + j];
      dbias[j] += s;
    }
  }
}

}  // namespace hymba::cpu
