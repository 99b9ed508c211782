#include "classify/head.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/matmul.h"

namespace hymba::classify {

Pooling parse_pooling(const std::string& s) {
  if (s == "last") return Pooling::kLast;
  if (s == "mean") return Pooling::kMean;
  fail("--pooling: expected last or mean (got '", s, "')");
}

FeatureFusion parse_feature_fusion(const std::string& s) {
  if (s == "concat") return FeatureFusion::kConcat;
  if (s == "gated") return FeatureFusion::kGated;
  if (s == "single") return FeatureFusion::kSingle;
  fail("--fusion: expected concat or gated (got '", s, "')");
}

const char* to_string(Pooling p) { return p == Pooling::kLast ? "last" : "mean"; }

const char* to_string(FeatureFusion f) {
  switch (f) {
    case FeatureFusion::kSingle: return "single";
    case FeatureFusion::kConcat: return "concat";
    case FeatureFusion::kGated: return "gated";
  }
  return "?";
}

int64_t HeadConfig::fused_width() const {
  if (fusion == FeatureFusion::kConcat) return widths.at(0) + widths.at(1);
  return widths.at(0);
}

void HeadConfig::validate() const {
  HYMBA_CHECK(widths.size() == 1 || widths.size() == 2, "--backbone: give one or two backbones (got ",
              widths.size(), ")");
  for (int64_t w : widths) HYMBA_CHECK(w >= 1, "head: backbone width must be >= 1 (got ", w, ")");
  HYMBA_CHECK((widths.size() == 1) == (fusion == FeatureFusion::kSingle),
              "--fusion: concat and gated combine two backbones; one backbone uses its features as they are");
  HYMBA_CHECK(hidden >= 0, "--hidden must be >= 0 (got ", hidden, ")");
  HYMBA_CHECK(num_classes >= 2, "classification needs at least 2 classes (got ", num_classes, ")");
}

nlohmann::json HeadConfig::to_json() const {
  nlohmann::json j = {{"widths", widths},
                      {"pooling", to_string(pooling)},
                      {"fusion", to_string(fusion)},
                      {"hidden", hidden},
                      {"num_classes", num_classes}};
  if (loss_on_raw_logits) j["loss"] = "raw_logits";  // only when set: earlier classifiers stay as written
  return j;
}

bool parse_raw_logits_loss(const std::string& s, const std::string& where) {
  if (s == "log_softmax" || s == "log-softmax") return false;
  if (s == "raw_logits" || s == "raw-logits") return true;
  fail(where, ": expected log-softmax or raw-logits (got '", s, "')");
}

HeadConfig HeadConfig::from_json(const nlohmann::json& j, const std::string& where) {
  HeadConfig c;
  try {
    c.widths = j.at("widths").get<std::vector<int64_t>>();
    c.pooling = parse_pooling(j.at("pooling").get<std::string>());
    c.fusion = parse_feature_fusion(j.at("fusion").get<std::string>());
    c.hidden = j.at("hidden").get<int64_t>();
    c.num_classes = j.at("num_classes").get<int64_t>();
    if (j.contains("loss")) c.loss_on_raw_logits = parse_raw_logits_loss(j.at("loss").get<std::string>(), where + ": loss");
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": bad head config (", e.what(), ")");
  }
  c.validate();
  return c;
}

void declare_head(const HeadConfig& cfg, ParamTable& table) {
  cfg.validate();
  auto weight = [&](const std::string& name, int64_t out, int64_t in) {
    table.add(name, Shape{out, in}, InitRule::normal(static_cast<float>(1.0 / std::sqrt(double(in)))), true, "head");
  };
  auto bias = [&](const std::string& name, int64_t n) { table.add(name, Shape{n}, InitRule::zeros(), false, "head"); };
  const int64_t d0 = cfg.widths[0];
  if (cfg.fusion == FeatureFusion::kGated) {
    const int64_t d1 = cfg.widths[1];
    weight("gate.weight", d0, d0 + d1);
    bias("gate.bias", d0);
    if (d1 != d0) weight("proj_b.weight", d0, d1);
  }
  int64_t width = cfg.fused_width();
  if (cfg.hidden > 0) {
    weight("hidden.weight", cfg.hidden, width);
    bias("hidden.bias", cfg.hidden);
    width = cfg.hidden;
  }
  weight("out.weight", cfg.num_classes, width);
  bias("out.bias", cfg.num_classes);
}

HeadPlan HeadPlan::make(const HeadConfig& cfg, const ParamTable& table) {
  HeadPlan p;
  p.cfg = cfg;
  auto off = [&](const char* name) { return table.contains(name) ? table.info(name).offset : int64_t{-1}; };
  p.gate_w = off("gate.weight");
  p.gate_b = off("gate.bias");
  p.proj_b = off("proj_b.weight");
  p.hidden_w = off("hidden.weight");
  p.hidden_b = off("hidden.bias");
  p.out_w = off("out.weight");
  p.out_b = off("out.bias");
  return p;
}

namespace {

// out [B, OC] = in [B, C] @ W^T + b.
template <typename T>
void linear(T* out, const T* in, const T* w, const T* b, int64_t B, int64_t C, int64_t OC) {
  Ops<T>::matmul(out, OC, in, C, w, B, C, OC);
  for (int64_t r = 0; r < B; ++r)
    for (int64_t o = 0; o < OC; ++o) out[r * OC + o] += b[o];
}

template <typename T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

}  // namespace

template <typename T>
LossStats head_forward(const HeadPlan& plan, const T* P, const std::vector<const T*>& feats, int64_t B,
                       const int32_t* labels, HeadActs<T>& a) {
  const HeadConfig& c = plan.cfg;
  HYMBA_CHECK(feats.size() == c.widths.size(), "head: expected ", c.widths.size(), " feature sets, got ",
              feats.size());
  const int64_t d0 = c.widths[0], F = c.fused_width(), C = c.num_classes;
  a.B = B;
  a.feats = feats;
  a.x.assign(static_cast<size_t>(B * F), T(0));
  if (c.fusion == FeatureFusion::kSingle) {
    std::copy(feats[0], feats[0] + B * d0, a.x.begin());
  } else {
    const int64_t d1 = c.widths[1], W = d0 + d1;
    a.cat.resize(static_cast<size_t>(B * W));
    for (int64_t r = 0; r < B; ++r) {
      std::copy(feats[0] + r * d0, feats[0] + (r + 1) * d0, a.cat.begin() + r * W);
      std::copy(feats[1] + r * d1, feats[1] + (r + 1) * d1, a.cat.begin() + r * W + d0);
    }
    if (c.fusion == FeatureFusion::kConcat) {
      a.x = a.cat;
    } else {
      const T* fb = feats[1];
      if (plan.proj_b >= 0) {
        a.fb.resize(static_cast<size_t>(B * d0));
        Ops<T>::matmul(a.fb.data(), d0, feats[1], d1, P + plan.proj_b, B, d1, d0);
        fb = a.fb.data();
      }
      a.gate.resize(static_cast<size_t>(B * d0));
      linear(a.gate.data(), a.cat.data(), P + plan.gate_w, P + plan.gate_b, B, W, d0);
      for (int64_t i = 0; i < B * d0; ++i) {
        const T g = sigmoid(a.gate[i]);
        a.gate[i] = g;
        a.x[i] = g * feats[0][i] + (T(1) - g) * fb[i];
      }
    }
  }
  const T* z = a.x.data();
  int64_t Z = F;
  if (c.hidden > 0) {
    a.z.resize(static_cast<size_t>(B * c.hidden));
    linear(a.z.data(), a.x.data(), P + plan.hidden_w, P + plan.hidden_b, B, F, c.hidden);
    for (T& v : a.z) v = std::tanh(v);
    z = a.z.data();
    Z = c.hidden;
  }
  a.logits.resize(static_cast<size_t>(B * C));
  linear(a.logits.data(), z, P + plan.out_w, P + plan.out_b, B, Z, C);
  if (labels == nullptr) return {};
  for (int64_t r = 0; r < B; ++r)
    HYMBA_CHECK(labels[r] >= 0 && labels[r] < C, "head: label ", labels[r], " outside [0, ", C, ")");
  LossStats s;
  if (c.loss_on_raw_logits) {
    // NLLLoss on raw logits (seed 004's variant): -logits[label], no softmax.
    for (int64_t r = 0; r < B; ++r) s.loss_sum -= static_cast<double>(a.logits[r * C + labels[r]]);
    s.scored = B;
  } else {
    s = Ops<T>::cross_entropy(a.logits.data(), labels, B, C, 0.0);
  }
  s.correct = 0;
  for (int64_t r = 0; r < B; ++r) {
    const T* row = a.logits.data() + r * C;
    s.correct += std::max_element(row, row + C) - row == labels[r];
  }
  return s;
}

void head_backward(const HeadPlan& plan, const float* P, float* G, const HeadActs<float>& a, const int32_t* labels,
                   float dloss, const std::vector<float*>& dfeats) {
  const HeadConfig& c = plan.cfg;
  const int64_t B = a.B, d0 = c.widths[0], F = c.fused_width(), C = c.num_classes;
  std::vector<float> dlogits(static_cast<size_t>(B * C), 0.0f);
  if (c.loss_on_raw_logits)
    for (int64_t r = 0; r < B; ++r) dlogits[r * C + labels[r]] = -dloss;
  else
    cpu::cross_entropy_backward(dlogits.data(), a.logits.data(), labels, B, C, 0.0f, dloss);

  std::vector<float> dx(static_cast<size_t>(B * F), 0.0f);
  if (c.hidden > 0) {
    const int64_t H = c.hidden;
    std::vector<float> dz(static_cast<size_t>(B * H), 0.0f);
    cpu::matmul_backward(dz.data(), G + plan.out_w, G + plan.out_b, dlogits.data(), a.z.data(), P + plan.out_w, B,
                         H, C);
    for (int64_t i = 0; i < B * H; ++i) dz[i] *= 1.0f - a.z[i] * a.z[i];  // tanh'
    cpu::matmul_backward(dx.data(), G + plan.hidden_w, G + plan.hidden_b, dz.data(), a.x.data(), P + plan.hidden_w,
                         B, F, H);
  } else {
    cpu::matmul_backward(dx.data(), G + plan.out_w, G + plan.out_b, dlogits.data(), a.x.data(), P + plan.out_w, B, F,
                         C);
  }

  for (size_t k = 0; k < dfeats.size(); ++k)
    if (dfeats[k]) std::fill(dfeats[k], dfeats[k] + B * c.widths[k], 0.0f);
  if (c.fusion == FeatureFusion::kSingle) {
    if (dfeats[0]) std::copy(dx.begin(), dx.end(), dfeats[0]);
    return;
  }
  const int64_t d1 = c.widths[1], W = d0 + d1;
  if (c.fusion == FeatureFusion::kConcat) {
    for (int64_t r = 0; r < B; ++r) {
      if (dfeats[0]) std::copy(dx.begin() + r * W, dx.begin() + r * W + d0, dfeats[0] + r * d0);
      if (dfeats[1]) std::copy(dx.begin() + r * W + d0, dx.begin() + (r + 1) * W, dfeats[1] + r * d1);
    }
    return;
  }
  // Gated: x = g * fa + (1 - g) * fb', g = sigmoid(W_g [fa; fb] + b_g).
  const float* fa = a.feats[0];
  const float* fb = plan.proj_b >= 0 ? a.fb.data() : a.feats[1];
  std::vector<float> dpre(static_cast<size_t>(B * d0)), dfb(static_cast<size_t>(B * d0));
  for (int64_t i = 0; i < B * d0; ++i) {
    const float g = a.gate[i];
    if (dfeats[0]) dfeats[0][i] += dx[i] * g;
    dfb[i] = dx[i] * (1.0f - g);
    dpre[i] = dx[i] * (fa[i] - fb[i]) * g * (1.0f - g);
  }
  std::vector<float> dcat(static_cast<size_t>(B * W), 0.0f);
  cpu::matmul_backward(dcat.data(), G + plan.gate_w, G + plan.gate_b, dpre.data(), a.cat.data(), P + plan.gate_w, B,
                       W, d0);
  for (int64_t r = 0; r < B; ++r) {
    if (dfeats[0])
      for (int64_t j = 0; j < d0; ++j) dfeats[0][r * d0 + j] += dcat[r * W + j];
    if (dfeats[1])
      for (int64_t j = 0; j < d1; ++j) dfeats[1][r * d1 + j] += dcat[r * W + d0 + j];
  }
  if (plan.proj_b >= 0) {
    // The weight gradient is needed even when backbone B is frozen.
    std::vector<float> dfb_in(static_cast<size_t>(B * d1), 0.0f);
    cpu::matmul_backward(dfb_in.data(), G + plan.proj_b, nullptr, dfb.data(), a.feats[1], P + plan.proj_b, B, d1, d0);
    if (dfeats[1])
      for (int64_t i = 0; i < B * d1; ++i) dfeats[1][i] += dfb_in[i];
  } else if (dfeats[1]) {
    for (int64_t i = 0; i < B * d0; ++i) dfeats[1][i] += dfb[i];
  }
}

template <typename T>
void pool_forward(T* feat, const T* hidden, int64_t B, int64_t S, int64_t M, int64_t d, const int64_t* lengths,
                  Pooling pooling) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[b];
    HYMBA_CHECK(n >= 1 && M + n <= S, "pooling: sequence ", b, " has ", n, " real tokens in ", S - M, " positions");
    const T* rows = hidden + (b * S + M) * d;
    T* out = feat + b * d;
    if (pooling == Pooling::kLast) {
      std::copy(rows + (n - 1) * d, rows + n * d, out);
      continue;
    }
    std::fill(out, out + d, T(0));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < d; ++j) out[j] += rows[t * d + j];
    for (int64_t j = 0; j < d; ++j) out[j] /= static_cast<T>(n);
  }
}

void pool_backward(float* dhidden, const float* dfeat, int64_t B, int64_t S, int64_t M, int64_t d,
                   const int64_t* lengths, Pooling pooling) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[b];
    float* rows = dhidden + (b * S + M) * d;
    const float* g = dfeat + b * d;
    if (pooling == Pooling::kLast) {
      for (int64_t j = 0; j < d; ++j) rows[(n - 1) * d + j] += g[j];
      continue;
    }
    const float inv = 1.0f / static_cast<float>(n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < d; ++j) rows[t * d + j] += g[j] * inv;
  }
}

template LossStats head_forward<float>(const HeadPlan&, const float*, const std::vector<const float*>&, int64_t,
                                       const int32_t*, HeadActs<float>&);
template LossStats head_forward<double>(const HeadPlan&, const double*, const std::vector<const double*>&, int64_t,
                                        const int32_t*, HeadActs<double>&);
template void pool_forward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, const int64_t*, Pooling);
template void pool_forward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, const int64_t*,
                                   Pooling);

}  // namespace hymba::classify
