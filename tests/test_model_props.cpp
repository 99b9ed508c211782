// Properties the model must have whatever its weights.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/reference/attention.h"
#include "model/layout.h"
#include "model/model.h"

namespace hymba {
namespace {

using nlohmann::json;

constexpr float kTol = 2e-5f;

json tiny(json over) {
  json j = {{"vocab_size", 13},        {"hidden_size", 16},      {"num_hidden_layers", 4},
            {"layer_types", "hybrid"}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"mamba_d_state", 4},      {"intermediate_size", 24}, {"initializer_range", 0.2}};
  for (auto it = over.begin(); it != over.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = static_cast<int32_t>(r.below(vocab));
  return ids;
}

std::vector<float> run(Model& m, const std::vector<int32_t>& ids, int64_t B, int64_t T) {
  m.forward(ids.data(), nullptr, B, T);
  return std::vector<float>(m.logits(), m.logits() + B * T * m.config().vocab_size);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

TEST(ModelProps, PermutingTheBatchPermutesOutputs) {
  const ModelConfig c = ModelConfig::from_json(tiny({{"global_attn_idx", {0, 3}}, {"sliding_window", 3},
                                                     {"kv_reuse_group", "auto"}, {"num_memory_tokens", 2}}));
  Model m(c, false);
  m.init(1);
  const int64_t B = 3, T = 9, V = c.vocab_size;
  auto ids = random_ids(B * T, V, 2);
  auto out = run(m, ids, B, T);
  const int perm[3] = {2, 0, 1};
  std::vector<int32_t> pids(B * T);
  for (int b = 0; b < B; ++b) std::copy_n(ids.begin() + perm[b] * T, T, pids.begin() + b * T);
  auto pout = run(m, pids, B, T);
  for (int b = 0; b < B; ++b)
    for (int64_t i = 0; i < T * V; ++i)
      ASSERT_NEAR(pout[b * T * V + i], out[perm[b] * T * V + i], kTol) << "sequence " << b;
}

TEST(ModelProps, WindowCoveringTheSequenceEqualsGlobal) {
  const int64_t B = 2, T = 10;
  json local = tiny({{"sliding_window", 64}, {"global_attn_idx", {0}}, {"num_memory_tokens", 3}});
  json global = tiny({{"sliding_window", 0}, {"num_memory_tokens", 3}});
  Model a(ModelConfig::from_json(local), false), b(ModelConfig::from_json(global), false);
  a.init(5);
  b.init(5);  // same names, same init
  auto ids = random_ids(B * T, 13, 3);
  EXPECT_LE(max_abs_diff(run(a, ids, B, T), run(b, ids, B, T)), kTol);
  // And a window smaller than the sequence does change the result.
  Model c(ModelConfig::from_json(tiny({{"sliding_window", 2}, {"global_attn_idx", {0}}, {"num_memory_tokens", 3}})),
          false);
  c.init(5);
  EXPECT_GT(max_abs_diff(run(c, ids, B, T), run(b, ids, B, T)), 1e-4f);
}

TEST(ModelProps, NoMetaTokensNoMetaParameter) {
  ParamTable with_meta, without;
  declare_parameters(ModelConfig::from_json(tiny({{"num_memory_tokens", 4}})), with_meta);
  declare_parameters(ModelConfig::from_json(tiny({{"num_memory_tokens", 0}})), without);
  EXPECT_TRUE(with_meta.contains("model.memory_tokens"));
  EXPECT_EQ(with_meta.info("model.memory_tokens").shape, (Shape{4, 16}));
  EXPECT_FALSE(without.contains("model.memory_tokens"));
  EXPECT_EQ(with_meta.num_params() - without.num_params(), 4 * 16);
}

TEST(ModelProps, ConsumerReadsItsProducersKeysAndValues) {
  for (const char* style : {"fused", "separate"}) {
    json j = tiny({{"global_attn_idx", {0, 3}}, {"sliding_window", 4}, {"kv_reuse_group", "auto"},
                   {"num_memory_tokens", 2}, {"proj_style", style},
                   {"fusion", std::string(style) == "fused" ? "norm_mean" : "mean"}});
    const ModelConfig c = ModelConfig::from_json(j);
    ASSERT_EQ(c.kv_producer(2), 1);
    // The consumer has no K/V weights of its own.
    ParamTable t;
    declare_parameters(c, t);
    const LayerDims consumer = layer_dims(c, 2), producer = layer_dims(c, 1);
    EXPECT_EQ(consumer.k_width, 0);
    EXPECT_GT(producer.k_width, 0);

    Model m(c, false);
    m.init(9);
    const int64_t B = 2, T = 7;
    auto ids = random_ids(B * T, 13, 4);
    m.forward(ids.data(), nullptr, B, T);
    const auto& acts = m.activations();
    const LayerPlan& lc = m.plan().layers[2];
    const LayerPlan& lpr = m.plan().layers[1];
    // Recompute the consumer's attention from its Q and the producer's K/V.
    const int64_t S = acts.S, R = acts.R, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
    const int64_t dqk = c.qk_head_dim, dv = c.v_head_dim;
    std::vector<float> q(R * Hq * dqk), k(R * Hkv * dqk), v(R * Hkv * dv), out(R * Hq * dv);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t i = 0; i < Hq * dqk; ++i) q[r * Hq * dqk + i] = acts.layers[2].proj[r * lc.proj_width + lc.q_col + i];
      for (int64_t i = 0; i < Hkv * dqk; ++i) k[r * Hkv * dqk + i] = acts.layers[1].proj[r * lpr.proj_width + lpr.k_col + i];
      for (int64_t i = 0; i < Hkv * dv; ++i) v[r * Hkv * dv + i] = acts.layers[1].proj[r * lpr.proj_width + lpr.v_col + i];
    }
    ref::AttnShape s;
    s.B = B;
    s.Tq = s.Tk = S;
    s.Hq = Hq;
    s.Hkv = Hkv;
    s.Dqk = dqk;
    s.Dv = dv;
    s.window = 4;
    s.num_meta = 2;
    ref::attention_forward(out.data(), static_cast<float*>(nullptr), q.data(), k.data(), v.data(), s);
    const std::vector<float> got(acts.layers[2].attn, acts.layers[2].attn + R * Hq * dv);
    EXPECT_LE(max_abs_diff(got, out), 1e-5f) << style;
  }
}

TEST(ModelProps, MetaTokensAreNotScoredButChangeOutputs) {
  const int64_t B = 1, T = 6;
  Model with(ModelConfig::from_json(tiny({{"num_memory_tokens", 3}})), true);
  with.init(2);
  auto ids = random_ids(B * T, 13, 5);
  auto targets = random_ids(B * T, 13, 6);
  LossStats s = with.forward(ids.data(), targets.data(), B, T);
  EXPECT_EQ(s.scored, B * T) << "only real tokens are scored";
  // Meta tokens receive gradient (they influence every later position).
  with.params().zero_grad();
  with.backward();
  Tensor g = with.params().grad("model.memory_tokens");
  double norm = 0;
  for (float x : std::vector<float>(g.begin(), g.end())) norm += x * x;
  EXPECT_GT(norm, 0.0);
}

TEST(ModelProps, SameSeedSameLossBitForBit) {
  const ModelConfig c = ModelConfig::from_json(tiny({{"sliding_window", 3}, {"global_attn_idx", {0}}}));
  auto once = [&] {
    Model m(c, true);
    m.init(11);
    auto ids = random_ids(2 * 8, 13, 7), targets = random_ids(2 * 8, 13, 8);
    LossStats s = m.forward(ids.data(), targets.data(), 2, 8);
    m.params().zero_grad();
    m.backward();
    Tensor g = m.params().grad("model.embed_tokens.weight");
    return std::make_pair(s.loss_sum, std::vector<float>(g.begin(), g.end()));
  };
  auto a = once(), b = once();
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
}

}  // namespace
}  // namespace hymba
