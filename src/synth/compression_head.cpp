#include "synth/compression_head.h"

#include "core/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/matmul.h"

namespace hymba::synth {

CompressionHead::CompressionHead(int64_t seq_len, int64_t d, int64_t width, int64_t vocab, bool training)
    : L_(seq_len), d_(d), H_(width), V_(vocab) {
  HYMBA_CHECK(seq_len >= 1 && d >= 1 && width >= 1 && vocab >= 1, "compression head: sizes must be positive");
  const auto dense = InitRule::normal(0.02f);
  params_.add("compression.pos_embed", {L_, d_}, dense, false, "head");
  params_.add("compression.fc1.weight", {H_, d_}, dense, true, "head");
  params_.add("compression.fc1.bias", {H_}, InitRule::zeros(), false, "head");
  params_.add("compression.fc2.weight", {V_, H_}, dense, true, "head");
  params_.add("compression.fc2.bias", {V_}, InitRule::zeros(), false, "head");
  params_.allocate(training, training);
  pos_ = params_.info("compression.pos_embed").offset;
  w1_ = params_.info("compression.fc1.weight").offset;
  b1_ = params_.info("compression.fc1.bias").offset;
  w2_ = params_.info("compression.fc2.weight").offset;
  b2_ = params_.info("compression.fc2.bias").offset;
}

LossStats CompressionHead::forward(const float* h, const int32_t* targets, int64_t B) {
  const float* P = params_.values_block();
  B_ = B;
  const int64_t rows = B * L_;
  targets_.assign(targets, targets + rows);
  z_.resize(static_cast<size_t>(rows * d_));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < L_; ++p)
      for (int64_t c = 0; c < d_; ++c) z_[static_cast<size_t>((b * L_ + p) * d_ + c)] = h[b * d_ + c] + P[pos_ + p * d_ + c];
  pre_.resize(static_cast<size_t>(rows * H_));
  act_.resize(pre_.size());
  logits_.resize(static_cast<size_t>(rows * V_));
  cpu::matmul_forward(pre_.data(), z_.data(), P + w1_, P + b1_, rows, d_, H_);
  cpu::silu_forward(act_.data(), pre_.data(), rows * H_);
  cpu::matmul_forward(logits_.data(), act_.data(), P + w2_, P + b2_, rows, H_, V_);
  const cpu::CrossEntropyResult r = cpu::cross_entropy_forward(nullptr, logits_.data(), targets, rows, V_, 0.0f);
  last_ = {r.loss_sum, r.scored, r.correct};
  return last_;
}

void CompressionHead::backward(float* dh) {
  HYMBA_CHECK(params_.has_grads(), "compression head: built without gradients");
  const float* P = params_.values_block();
  float* G = params_.grads_block();
  const int64_t rows = B_ * L_;
  std::fill(dh, dh + B_ * d_, 0.0f);
  if (last_.scored == 0) return;
  std::vector<float> dlogits(logits_.size(), 0.0f), dact(act_.size(), 0.0f), dpre(pre_.size(), 0.0f),
      dz(z_.size(), 0.0f);
  cpu::cross_entropy_backward(dlogits.data(), logits_.data(), targets_.data(), rows, V_, 0.0f,
                              1.0f / static_cast<float>(last_.scored));
  cpu::matmul_backward(dact.data(), G + w2_, G + b2_, dlogits.data(), act_.data(), P + w2_, rows, H_, V_);
  cpu::silu_backward(dpre.data(), dact.data(), pre_.data(), rows * H_);
  cpu::matmul_backward(dz.data(), G + w1_, G + b1_, dpre.data(), z_.data(), P + w1_, rows, d_, H_);
  // z = h + pos: both receive dz, summed over the positions / the batch.
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t p = 0; p < L_; ++p)
      for (int64_t c = 0; c < d_; ++c) {
        const float g = dz[static_cast<size_t>((b * L_ + p) * d_ + c)];
        dh[b * d_ + c] += g;
        G[pos_ + p * d_ + c] += g;
      }
}

}  // namespace hymba::synth
