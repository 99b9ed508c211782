#include <gtest/gtest.h>

#include <cmath>

#include "train/optimizer.h"

namespace hymba {
namespace {

TEST(AdamW, MatchesTheTextbookUpdateAndSkipsDecayWhereFlagged) {
  ParamTable t;
  t.add("w", {5}, InitRule::normal(1.0f), true);
  t.add("norm", {3}, InitRule::normal(1.0f), false);
  t.allocate(true, true);
  t.init(Rng(4));
  AdamWConfig cfg;
  cfg.weight_decay = 0.2;
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.9;
  cfg.eps = 1e-6;
  // Reference: PyTorch's AdamW in double.
  std::vector<double> w(t.value("w").begin(), t.value("w").end()), n(t.value("norm").begin(), t.value("norm").end());
  std::vector<double> mw(5), vw(5), mn(3), vn(3);
  Rng gr(9);
  for (int step = 1; step <= 4; ++step) {
    const double lr = 0.01 * step;
    std::vector<double> gw(5), gn(3);
    for (int i = 0; i < 5; ++i) t.grad("w").data[i] = static_cast<float>(gw[i] = gr.normal());
    for (int i = 0; i < 3; ++i) t.grad("norm").data[i] = static_cast<float>(gn[i] = gr.normal());
    adamw_step(t, cfg, lr, step);
    auto ref = [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<double>& g,
                   bool decay) {
      for (size_t i = 0; i < p.size(); ++i) {
        if (decay) p[i] *= 1 - lr * cfg.weight_decay;
        m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g[i];
        v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g[i] * g[i];
        const double mh = m[i] / (1 - std::pow(cfg.beta1, step)), vh = v[i] / (1 - std::pow(cfg.beta2, step));
        p[i] -= lr * mh / (std::sqrt(vh) + cfg.eps);
      }
    };
    ref(w, mw, vw, gw, true);
    ref(n, mn, vn, gn, false);
  }
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(t.value("w").data[i], w[i], 1e-5);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(t.value("norm").data[i], n[i], 1e-5);
}

// weight_decay_scope "all" (seed 001's AdamW over model.parameters()) decays
// the rows flagged as not decayed too; with zero gradients a step is the
// decay alone (m = v = 0).
TEST(AdamW, DecayAllDecaysEveryRow) {
  for (const bool all : {false, true}) {
    ParamTable t;
    t.add("w", {4}, InitRule::constant(2.0f), true);
    t.add("norm", {2}, InitRule::constant(2.0f), false);
    t.allocate(true, true);
    t.init(Rng(1));
    AdamWConfig cfg;
    cfg.weight_decay = 0.5;
    cfg.decay_all = all;
    adamw_step(t, cfg, 0.1, 1);
    for (float v : t.value("w")) EXPECT_FLOAT_EQ(v, 2.0f * 0.95f);
    for (float v : t.value("norm")) EXPECT_FLOAT_EQ(v, all ? 2.0f * 0.95f : 2.0f) << "decay_all " << all;
  }
}

TEST(GradClip, ScalesToTheMaxNormAndReportsTheOriginal) {
  ParamTable t;
  t.add("a", {2}, InitRule::zeros());
  t.add("b", {1}, InitRule::zeros());
  t.allocate(true, false);
  t.grad("a").data[0] = 3;
  t.grad("a").data[1] = 4;
  t.grad("b").data[0] = 12;  // norm 13
  EXPECT_NEAR(clip_grad_norm(t, 1.3), 13.0, 1e-9);
  EXPECT_NEAR(grad_global_norm(t), 1.3, 1e-4);
  EXPECT_NEAR(t.grad("a").data[0], 0.3, 1e-5);
  // Under the limit nothing changes; 0 disables clipping.
  EXPECT_NEAR(clip_grad_norm(t, 5.0), 1.3, 1e-4);
  EXPECT_NEAR(t.grad("b").data[0], 1.2, 1e-5);
  EXPECT_NEAR(clip_grad_norm(t, 0.0), 1.3, 1e-4);
}

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  LrSchedule s;
  s.peak = 1.0;
  s.floor = 0.1;
  s.warmup = 10;
  s.total = 110;
  EXPECT_NEAR(s.at(0), 0.1, 1e-12);
  EXPECT_NEAR(s.at(9), 1.0, 1e-12);
  EXPECT_NEAR(s.at(10), 1.0, 1e-12);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);  // half way down the cosine
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  for (int64_t i = 11; i < 110; ++i) EXPECT_LE(s.at(i), s.at(i - 1));
}

}  // namespace
}  // namespace hymba
