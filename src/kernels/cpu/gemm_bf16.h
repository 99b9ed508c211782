// Matrix products in bfloat16 with float32 sums: the CPU form of mixed
// precision (PyTorch's autocast to bf16), used by training with
// `--precision bf16` (kernels/cpu/matmul.h routes to it).
//
// C[M, N] = beta * C + op(A)[M, K] · op(B)[K, N], where A and B are float32
// and each element is rounded to bfloat16 (to nearest even) as it is packed.
// Products of two bf16 values are exact in float32; only the sums round.
//
// The summation order, which every path follows: k runs in pairs (2p, 2p+1),
// with an odd K padded by a zero; within a block of kBf16GemmBlockPairs an
// element's float32 sum starts at zero and adds, pair by pair, the odd
// product and then the even one (the order of AVX512-BF16's vdpbf16ps); the
// blocks' sums are added to C in order of k. Threads split the rows of C, so
// results do not depend on the thread count. The instruction sets need not
// give the same bits: vdpbf16ps flushes subnormal inputs and results to zero,
// the portable path does not, and a CPU may round a pair's two products once
// rather than after each (AMD Zen 5 rounds after each, as the portable path).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm_operand.h"

namespace hymba::cpu {

inline constexpr int64_t kBf16GemmBlockPairs = 256;

// kPortable: plain C++ (the reference the fast path is tested against, and
// the only path on CPUs without AVX512-BF16, where it is slower than
// float32: training refuses bf16 there). kAvx512Bf16: vdpbf16ps.
enum class Bf16GemmIsa { kPortable, kAvx512Bf16 };
Bf16GemmIsa best_bf16_gemm_isa();
bool bf16_gemm_isa_available(Bf16GemmIsa isa);
std::vector<Bf16GemmIsa> bf16_gemm_isas_here();
const char* to_string(Bf16GemmIsa isa);

// C[M, N] (row stride ldc) = beta * C + op(A) · op(B). beta 0 never reads C.
void gemm_bf16(int64_t M, int64_t N, int64_t K, GemmOperand A, GemmOperand B, float beta, float* C, int64_t ldc,
               Bf16GemmIsa isa = best_bf16_gemm_isa());

}  // namespace hymba::cpu
