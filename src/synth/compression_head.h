// MAD's compression decoder: the model reads the whole sequence, and only the
// last position's hidden state h may be used to rebuild it. Every position p
// is decoded from h alone: logits_p = W2 silu(W1 (h + pos_p) + b1) + b2, a
// small MLP with learned position embeddings (as MAD's encoder/decoder setup).
#pragma once

#include <cstdint>
#include <vector>

#include "core/params.h"
#include "model/ops.h"

namespace hymba::synth {

class CompressionHead {
 public:
  // seq_len positions decoded, from states of width d, through `width`
  // hidden units, into vocab classes. training allocates grads and moments.
  CompressionHead(int64_t seq_len, int64_t d, int64_t width, int64_t vocab, bool training);
  ParamTable& params() { return params_; }
  const ParamTable& params() const { return params_; }

  // h: [B, d] final states; targets: [B, seq_len] (kIgnoreIndex allowed).
  // Keeps what backward needs.
  LossStats forward(const float* h, const int32_t* targets, int64_t B);
  // Accumulates into the head's gradients d(mean loss of the last forward)
  // and writes dh [B, d].
  void backward(float* dh);
  const float* logits() const { return logits_.data(); }

 private:
  int64_t L_, d_, H_, V_, B_ = 0;
  ParamTable params_;
  int64_t pos_ = 0, w1_ = 0, b1_ = 0, w2_ = 0, b2_ = 0;  // offsets in the value / grad blocks
  std::vector<int32_t> targets_;
  std::vector<float> z_, pre_, act_, logits_;
  LossStats last_;
};

}  // namespace hymba::synth
