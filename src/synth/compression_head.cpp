#include "synth/compression_head.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"

namespace hymba::synth {

namespace {

// nn.GELU's exact form, x * Phi(x); kept here because only this head uses it.
void gelu_forward(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

// dx += dout * (Phi(x) + x phi(x)).
void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.0f + std::erf(x[i] * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * std::exp(-0.5f * x[i] * x[i]);
    dx[i] += dout[i] * (cdf + x[i] * pdf);
  }
}

}  // namespace

std::vector<float> sincos_positions(int64_t L, int64_t d) {
  const int64_t half = d / 2;
  // MAD divides by half - 1; at d < 4 that is 0, so use one frequency of 1 there.
  const double step = half > 1 ? std::log(10000.0) / static_cast<double>(half - 1) : 0.0;
  std::vector<float> pe(static_cast<size_t>(L * d), 0.0f);
  for (int64_t p = 0; p < L; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * std::exp(-static_cast<double>(i) * step);
      pe[static_cast<size_t>(p * d + i)] = static_cast<float>(std::sin(a));
      pe[static_cast<size_t>(p * d + half + i)] = static_cast<float>(std::cos(a));
    }
  return pe;
}

CompressionHead::CompressionHead(int64_t seq_len, int64_t d, int64_t width, int64_t vocab, bool training)
    : L_(seq_len), d_(d), W_(width), V_(vocab), pe_(sincos_positions(seq_len, d)) {
  HYMBA_CHECK(seq_len >= 1 && d >= 1 && width >= 1 && vocab >= 1, "compression head: sizes must be positive");
  const auto dense = InitRule::normal(0.02f);
  params_.add("compression.norm1.weight", {d_}, InitRule::ones(), false, "head");
  params_.add("compression.fc1.weight", {W_, d_}, dense, true, "head");
  params_.add("compression.fc1.bias", {W_}, InitRule::zeros(), false, "head");
  params_.add("compression.norm2.weight", {W_}, InitRule::ones(), false, "head");
  params_.add("compression.fc2.weight", {W_, W_}, dense, true, "head");
  params_.add("compression.fc2.bias", {W_}, InitRule::zeros(), false, "head");
  params_.add("compression.norm3.weight", {W_}, InitRule::ones(), false, "head");
  params_.add("compression.unembed.weight", {V_, W_}, dense, true, "head");
  params_.add("compression.unembed.bias", {V_}, InitRule::zeros(), false, "head");
  params_.allocate(training, training);
  auto at = [&](const char* name) { return params_.info(name).offset; };
  g1_ = at("compression.norm1.weight");
  w1_ = at("compression.fc1.weight");
  b1_ = at("compression.fc1.bias");
  g2_ = at("compression.norm2.weight");
  w2_ = at("compression.fc2.weight");
  b2_ = at("compression.fc2.bias");
  g3_ = at("compression.norm3.weight");
  w3_ = at("compression.unembed.weight");
  b3_ = at("compression.unembed.bias");
}

LossStats CompressionHead::forward(const float* h, const int32_t* targets, int64_t B) {
  const float* P = params_.values_block();
  B_ = B;
  const int64_t rows = B * L_;
  targets_.assign(targets, targets + rows);
  for (std::vector<float>* v : {&z_, &n1_}) v->resize(static_cast<size_t>(rows * d_));
  for (std::vector<float>* v : {&a1_, &x1_, &n2_, &a2_, &x2_, &n3_}) v->resize(static_cast<size_t>(rows * W_));
  for (std::vector<float>* v : {&r1_, &r2_, &r3_}) v->resize(static_cast<size_t>(rows));
  logits_.resize(static_cast<size_t>(rows * V_));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < L_; ++p)
      for (int64_t c = 0; c < d_; ++c)
        z_[static_cast<size_t>((b * L_ + p) * d_ + c)] = h[b * d_ + c] + pe_[static_cast<size_t>(p * d_ + c)];
  cpu::rmsnorm_forward(n1_.data(), r1_.data(), z_.data(), P + g1_, rows, d_, kNormEps);
  cpu::matmul_forward(a1_.data(), n1_.data(), P + w1_, P + b1_, rows, d_, W_);
  gelu_forward(x1_.data(), a1_.data(), rows * W_);
  cpu::rmsnorm_forward(n2_.data(), r2_.data(), x1_.data(), P + g2_, rows, W_, kNormEps);
  cpu::matmul_forward(a2_.data(), n2_.data(), P + w2_, P + b2_, rows, W_, W_);
  gelu_forward(x2_.data(), a2_.data(), rows * W_);
  cpu::rmsnorm_forward(n3_.data(), r3_.data(), x2_.data(), P + g3_, rows, W_, kNormEps);
  cpu::matmul_forward(logits_.data(), n3_.data(), P + w3_, P + b3_, rows, W_, V_);
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
  // Gradient buffers, zeroed: every kernel backward accumulates.
  std::vector<float> dlogits(logits_.size(), 0.0f), dn3(n3_.size(), 0.0f), dx2(x2_.size(), 0.0f),
      da2(a2_.size(), 0.0f), dn2(n2_.size(), 0.0f), dx1(x1_.size(), 0.0f), da1(a1_.size(), 0.0f),
      dn1(n1_.size(), 0.0f), dz(z_.size(), 0.0f);
  cpu::cross_entropy_backward(dlogits.data(), logits_.data(), targets_.data(), rows, V_, 0.0f,
                              1.0f / static_cast<float>(last_.scored));
  cpu::matmul_backward(dn3.data(), G + w3_, G + b3_, dlogits.data(), n3_.data(), P + w3_, rows, W_, V_);
  cpu::rmsnorm_backward(dx2.data(), G + g3_, dn3.data(), x2_.data(), P + g3_, r3_.data(), rows, W_);
  gelu_backward(da2.data(), dx2.data(), a2_.data(), rows * W_);
  cpu::matmul_backward(dn2.data(), G + w2_, G + b2_, da2.data(), n2_.data(), P + w2_, rows, W_, W_);
  cpu::rmsnorm_backward(dx1.data(), G + g2_, dn2.data(), x1_.data(), P + g2_, r2_.data(), rows, W_);
  gelu_backward(da1.data(), dx1.data(), a1_.data(), rows * W_);
  cpu::matmul_backward(dn1.data(), G + w1_, G + b1_, da1.data(), n1_.data(), P + w1_, rows, d_, W_);
  cpu::rmsnorm_backward(dz.data(), G + g1_, dn1.data(), z_.data(), P + g1_, r1_.data(), rows, d_);
  // z = h + pe: h receives dz summed over the positions (pe is fixed).
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t p = 0; p < L_; ++p)
      for (int64_t c = 0; c < d_; ++c) dh[b * d_ + c] += dz[static_cast<size_t>((b * L_ + p) * d_ + c)];
}

}  // namespace hymba::synth
