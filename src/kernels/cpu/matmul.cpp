#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>

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

// Float32 products of many rows run as row bands of C on the OpenMP team,
// one single-threaded OpenBLAS call per band (OpenBLAS built for OpenMP runs
// single-threaded inside a parallel region). OpenBLAS's own threading makes
// its threads wait on each other's packed panels, spinning in sched_yield; at
// the training shapes (2048-2560 rows) bands were 1.3-1.5x faster where
// K <= 1024, and no slower above. With few rows each band packs all of B
// for little work, and whole 96-row units share badly: at a prefill's 256
// rows bands were 15-30 % slower, so forward and input-gradient products
// are banded only from kMinBandRows rows a band (docs/kernels.md).
//
// Bits: OpenBLAS never splits K, but its kernels sum a partial block of their
// unroll (the last rows of a product) in another order than whole blocks.
// Bands therefore start on multiples of 96 rows, a multiple of every kernel
// set's unroll (16 on SkylakeX and Cooperlake, 24 on Haswell and Zen): each
// row then sits in the same kind of block as in one call, and a banded
// product's bits do not depend on the thread count. (Bands of columns do not
// keep the bits on the Haswell kernels, and OpenBLAS's own threading does not
// either: products too narrow to band keep its threads, and their bits may
// change with the thread count.)
// And on SkylakeX and Cooperlake OpenBLAS 0.3.21 runs products of at most
// 100^3 multiply-adds through "small matrix" kernels, which sum in yet
// another order: every band must stay above that size (measured).
constexpr int64_t kBandAlign = 96;
constexpr double kSmallKernelMacs = 1e6;
constexpr int64_t kMinBandRows = 768;
constexpr int64_t kNeverBand = std::numeric_limits<int64_t>::max();  // min_band_rows: one call, OpenBLAS's threads

// First row of band t of n: whole 96-row units, shared as evenly as rounding
// allows; the last band also takes the rows after the last unit.
int64_t band_start(int64_t M, int t, int n) {
  const int64_t units = M / kBandAlign;
  return t == n ? M : (units * t + n / 2) / n * kBandAlign;
}

// How many row bands a product of M rows can take, at most `threads`: each
// band at least min_rows long and above the small-matrix size. 1: not
// worth banding.
int band_count(int64_t M, int64_t N, int64_t K, int threads, int64_t min_rows) {
  for (int n = threads; n > 1; --n) {
    bool fits = true;
    for (int t = 0; t < n && fits; ++t) {
      const int64_t rows = band_start(M, t + 1, n) - band_start(M, t, n);
      fits = rows >= std::max<int64_t>(min_rows, 1) && static_cast<double>(rows) * N * K > kSmallKernelMacs;
    }
    if (fits) return n;
  }
  return 1;
}

// C[M, N] = op(A) op(B) + beta C (op(X) = X^T when trans_x), in row bands
// when the product is large enough, else in one call on OpenBLAS's threads.
void sgemm_bands(int64_t min_band_rows, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const auto call = [&](int64_t r0, int64_t rows) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(rows), static_cast<int>(N), static_cast<int>(K), 1.0f,
                trans_a ? A + r0 : A + r0 * lda, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C + r0 * ldc,
                static_cast<int>(ldc));
  };
  const int bands = band_count(M, N, K, omp_in_parallel() ? 1 : omp_get_max_threads(), min_band_rows);
  if (bands == 1) {
    call(0, M);
    return;
  }
#pragma omp parallel num_threads(bands)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = band_start(M, t, n), r1 = band_start(M, t + 1, n);
    if (r1 > r0) call(r0, r1 - r0);
  }
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
    sgemm_bands(kMinBandRows, false, true, BT, OC, C, inp, ld_inp, weight, C, beta, out, ld_out);
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
      sgemm_bands(kMinBandRows, false, false, BT, C, OC, dout, ld_dout, weight, C, beta, dinp, ld_dinp);
    });
  }
  if (dweight != nullptr) {
    traced(ProductKind::kWeightGrad, OC, C, BT, true, [&] {
      if (bf16) {
        gemm_bf16(OC, C, BT, {dout, ld_dout, true}, {inp, ld_inp, false}, 1.0f, dweight, C, bf16_isa());
        return;
      }
      // dweight[OC, C] += dout^T[OC, BT] @ inp[BT, C]. Banded over OC, bands
      // of any length, only when OC >= C: otherwise each band's copy of all of
      // inp's panels costs more than OpenBLAS's threading gains (measured).
      sgemm_bands(OC >= C ? 0 : kNeverBand, true, false, OC, C, BT, dout, ld_dout, inp, ld_inp, 1.0f, dweight, C);
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
