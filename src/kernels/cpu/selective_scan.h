// Mamba-1 selective scan, fused: the [B, T, D, N] discretised tensors are never
// materialised. Per sequence b, channel d, state n:
//   dt_t   = softplus(delta[t,d] + delta_bias[d])   (or delta + bias if !delta_softplus)
//   A[d,n] = -exp(A_log[d,n])
//   h_t    = exp(dt_t * A[d,n]) * h_{t-1} + dt_t * Bm[t,n] * u[t,d]
//   y[t,d] = (sum_n Cm[t,n] * h_t + Dskip[d] * u[t,d]) * silu(z[t,d])   (z optional)
// Inputs are [B, T, width] rows with per-input row strides (floats between
// consecutive tokens), so slices of fused projections are read in place.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// Tokens per saved state: the forward keeps only h at chunk starts and the
// backward recomputes the states inside each chunk.
inline constexpr int64_t kScanChunk = 64;

inline int64_t scan_num_chunks(int64_t T) { return (T + kScanChunk - 1) / kScanChunk; }

struct ScanArgs {
  int64_t B = 0, T = 0, D = 0, N = 0;
  const float* u = nullptr;          int64_t ld_u = 0;      // [B,T,D]
  const float* delta = nullptr;      int64_t ld_delta = 0;  // [B,T,D]
  const float* delta_bias = nullptr;                        // [D] or null
  bool delta_softplus = true;
  const float* A_log = nullptr;                             // [D,N]
  const float* Bm = nullptr;         int64_t ld_B = 0;      // [B,T,N]
  const float* Cm = nullptr;         int64_t ld_C = 0;      // [B,T,N]
  const float* Dskip = nullptr;                             // [D] or null
  const float* z = nullptr;          int64_t ld_z = 0;      // [B,T,D] or null
  const float* h0 = nullptr;                                // [B,D,N] initial state or null (= 0)
};

// Gradients accumulate (+=); a null pointer skips that gradient.
struct ScanGrads {
  float* du = nullptr;          int64_t ld_du = 0;
  float* ddelta = nullptr;      int64_t ld_ddelta = 0;
  float* ddelta_bias = nullptr;
  float* dA_log = nullptr;
  float* dB = nullptr;          int64_t ld_dB = 0;
  float* dC = nullptr;          int64_t ld_dC = 0;
  float* dDskip = nullptr;
  float* dz = nullptr;          int64_t ld_dz = 0;
};

// y: contiguous [B,T,D]. chunk_states: [B, scan_num_chunks(T), D, N], the state
// entering each chunk (needed by backward; may be null for inference).
// h_last: [B,D,N] state after the last token, or null (used by decoding).
void selective_scan_forward(float* y, float* chunk_states, float* h_last, const ScanArgs& a);

// dy: contiguous [B,T,D]; chunk_states from the forward with the same args.
void selective_scan_backward(const ScanGrads& g, const float* dy, const float* chunk_states, const ScanArgs& a);

}  // namespace hymba::cpu
