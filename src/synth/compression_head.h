// MAD's compression decoder (its AutoEncoder backbone): the model reads the
// whole sequence and only the last position's hidden state h may be used to
// rebuild it. Every position p is decoded from h plus a fixed sin-cos
// position encoding: z = h + pe_p, then two (RMSNorm -> Linear -> GELU)
// blocks, then RMSNorm -> Linear to the vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include "core/params.h"
#include "model/ops.h"

namespace hymba::synth {

// MAD's posemb_sincos_1d (fairseq's): [L, d], row p = [sin(p f_0..f_{h-1}),
// cos(p f_0..f_{h-1})] with h = d/2 and f_i = 10000^(-i/(h-1)); a zero
// column appended when d is odd.
std::vector<float> sincos_positions(int64_t L, int64_t d);

class CompressionHead {
 public:
  // seq_len positions decoded, from states of width d, through `width`
  // hidden units (MAD: width = d), into vocab classes. training allocates
  // grads and moments. Linear weights N(0, 0.02), biases 0, norms 1 (MAD's init).
  CompressionHead(int64_t seq_len, int64_t d, int64_t width, int64_t vocab, bool training);
  ParamTable& params() { return params_; }
  const ParamTable& params() const { return params_; }
  const std::vector<float>& positions() const { return pe_; }

  // h: [B, d] final states; targets: [B, seq_len] (kIgnoreIndex allowed).
  // Keeps what backward needs.
  LossStats forward(const float* h, const int32_t* targets, int64_t B);
  // Accumulates into the head's gradients d(mean loss of the last forward)
  // and writes dh [B, d].
  void backward(float* dh);
  const float* logits() const { return logits_.data(); }

  static constexpr float kNormEps = 1e-5f;  // MAD's RMSNorm

 private:
  int64_t L_, d_, W_, V_, B_ = 0;
  ParamTable params_;
  std::vector<float> pe_;
  int64_t g1_ = 0, w1_ = 0, b1_ = 0, g2_ = 0, w2_ = 0, b2_ = 0, g3_ = 0, w3_ = 0, b3_ = 0;  // param offsets
  std::vector<int32_t> targets_;
  // z -> n1 -> a1 -> x1 -> n2 -> a2 -> x2 -> n3 -> logits, and the norms' rstd.
  std::vector<float> z_, n1_, a1_, x1_, n2_, a2_, x2_, n3_, logits_, r1_, r2_, r3_;
  LossStats last_;
};

}  // namespace hymba::synth
