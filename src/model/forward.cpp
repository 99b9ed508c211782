#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "model/arena_plan.h"
#include "model/layer_walk.h"

namespace hymba {

namespace {

template <typename T>
void copy_cols(T* dst, int64_t ld_dst, const T* src, int64_t ld_src, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > 16384)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] = src[r * ld_src + c];
}

// out = a + b, elementwise.
// rows of x [R, n] += bias [n]
template <typename T>
void add_bias(T* x, const T* bias, int64_t R, int64_t n) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < n; ++c) x[r * n + c] += bias[c];
}

// columns [0, n) of rows of x with row stride ld, [R, ld] += bias [n]
template <typename T>
void add_bias_strided(T* x, int64_t ld, const T* bias, int64_t R, int64_t n) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < n; ++c) x[r * ld + c] += bias[c];
}

template <typename T>
void add(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// Dropout multipliers (0 or 1/(1-p)) from a stream unique to (layer, site).
template <typename T>
void fill_dropout_mask(T* mask, const Rng& rng, int64_t layer, int site, int64_t n, double p) {
  Rng r = rng.split(static_cast<uint64_t>(layer * 4 + site));
  const T keep = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) mask[i] = r.uniform() >= p ? keep : T(0);
}

}  // namespace

template <typename T>
ScanParams<T> layer_scan_params(const ModelPlan& plan, const LayerPlan& lp, const T* P, const LayerActs<T>& a,
                                int64_t B, int64_t S) {
  const int64_t N = plan.cfg.mamba_d_state, Rdt = plan.cfg.dt_rank(), xw = lp.dims.x_proj_out;
  ScanParams<T> sp;
  sp.B = B;
  sp.T_ = S;
  sp.D = lp.dims.d_inner;
  sp.N = N;
  sp.u = a.u;
  sp.delta = a.delta;
  sp.delta_bias = P + lp.dt_b;
  sp.A_log = P + lp.a_log;
  // With inner norms B and C are normed copies; otherwise slices of x_proj's output.
  sp.Bm = a.bn ? a.bn : a.xdbl + Rdt;
  sp.ld_B = a.bn ? N : xw;
  sp.Cm = a.cn ? a.cn : a.xdbl + Rdt + N;
  sp.ld_C = a.cn ? N : xw;
  sp.Dskip = P + lp.d_skip;
  sp.z = a.proj + lp.z_col;
  sp.ld_z = lp.proj_width;
  return sp;
}

namespace {

template <typename T>
void mamba_forward(const ModelPlan& plan, const LayerPlan& lp, const T* P, const ForwardOptions& opt,
                   BasicArena<T>& arena, LayerActs<T>& a, int64_t B, int64_t S) {
  using O = Ops<T>;
  const ModelConfig& c = plan.cfg;
  const int64_t R = B * S, di = lp.dims.d_inner, W = lp.proj_width;
  constexpr bool kFloat = std::is_same_v<T, float>;  // only the float scan hands out its final state
  alloc_mamba_conv(arena, lp, a, R);
  O::conv1d(a.xc, a.proj + lp.x_col, W, P + lp.conv_w, lp.conv_b >= 0 ? P + lp.conv_b : nullptr, B, S, di,
            c.mamba_d_conv);
  O::silu(a.u, a.xc, R * di);
  layer_mamba_projections(plan, lp, P, arena, a, R);
  const ScanParams<T> sp = layer_scan_params(plan, lp, P, a, B, S);
  alloc_mamba_scan(arena, c, lp, a, B, S, kFloat && opt.keep_final_ssm_state);
  if constexpr (kFloat) {
    if (opt.keep_final_ssm_state) {
      cpu::selective_scan_forward(a.y, a.chunk_states, a.h_last, O::scan_args(sp));
      return;
    }
  }
  O::scan(a.y, a.chunk_states, sp);
}

// The attention-dropout seed of a layer: a stream unique to (layer, site 2),
// as the residual dropout's sites 0 and 1; 0 (no dropout) when not training.
uint64_t attention_dropout_seed(const ModelConfig& c, const ForwardOptions& opt, int64_t layer) {
  if (opt.dropout_rng == nullptr || c.attention_dropout <= 0) return 0;
  return opt.dropout_rng->split(static_cast<uint64_t>(layer * 4 + 2)).next_u64() | 1;  // never 0
}

template <typename T>
void attention_forward(const ModelPlan& plan, const LayerPlan& lp, const ForwardOptions& opt,
                       const Activations<T>& acts, BasicArena<T>& arena, LayerActs<T>& a) {
  const ModelConfig& c = plan.cfg;
  const int64_t R = acts.R, W = lp.proj_width, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t dqk = c.qk_head_dim, dv = c.v_head_dim;
  // RoPE rotates Q here and K in the producer (consumers reuse rotated K).
  auto rope = [&](T* x, int64_t H) {
    if (!c.rope) return;
    if constexpr (std::is_same_v<T, float>)
      cpu::rope_forward_table(x, W, acts.B, acts.S, H, dqk, acts.rope_cos, acts.rope_sin);
    else
      Ops<T>::rope(x, W, acts.B, acts.S, H, dqk, c.rope_base());
  };
  // K's heads follow Q's in proj (k_col = q_col + Hq * dqk): one pass for both.
  rope(a.proj + lp.q_col, lp.producer ? Hq + Hkv : Hq);
  scale_queries(c, a.proj + lp.q_col, W, R, Hq * dqk);
  const LayerPlan& pp = plan.layers[static_cast<size_t>(lp.producer_layer)];
  const T* kv_proj = acts.layers[static_cast<size_t>(lp.producer_layer)].proj;

  AttnParams<T> ap;
  ap.B = acts.B;
  ap.T_ = acts.S;
  ap.Hq = Hq;
  ap.Hkv = Hkv;
  ap.Dqk = dqk;
  ap.Dv = dv;
  ap.window = lp.window;
  ap.num_meta = acts.M;
  ap.window_symmetric = c.sliding_window_symmetric;
  ap.meta_sees_all = c.meta_tokens_see_all;
  a.attn_dropout_seed = attention_dropout_seed(c, opt, lp.index);
  ap.dropout = a.attn_dropout_seed != 0 ? static_cast<float>(c.attention_dropout) : 0.0f;
  ap.dropout_seed = a.attn_dropout_seed;
  ap.q = a.proj + lp.q_col;
  ap.ld_q = W;
  ap.k = kv_proj + pp.k_col;
  ap.ld_k = pp.proj_width;
  ap.v = kv_proj + pp.v_col;
  ap.ld_v = pp.proj_width;
  alloc_attention(arena, c, lp, a, acts.B, acts.S);
  Ops<T>::attention(a.attn, lp.dims.attn_out, a.lse, ap);
}

// Layer lp over the whole sequence, its block link included.
template <typename T>
void layer_forward(const ModelPlan& plan, const LayerPlan& lp, const T* P, const ForwardOptions& opt,
                   BasicArena<T>& arena, Activations<T>& acts, T* x_in) {
  LayerActs<T>& a = acts.layers[static_cast<size_t>(lp.index)];
  a.x_in = x_in;
  const LayerWalker<T> walker{
      plan, P, opt, arena, acts.R, nullptr,
      [&](const LayerPlan& l, LayerActs<T>& la) { attention_forward(plan, l, opt, acts, arena, la); },
      [&](const LayerPlan& l, LayerActs<T>& la) { mamba_forward(plan, l, P, opt, arena, la, acts.B, acts.S); }};
  const T* block_in = lp.block_first >= 0 ? acts.layers[static_cast<size_t>(lp.block_first)].x_in : nullptr;
  walk_layer(walker, lp, a, block_in);
}

}  // namespace

template <typename T>
void scale_queries(const ModelConfig& c, T* q, int64_t ld_q, int64_t rows, int64_t width) {
  const T s = static_cast<T>(c.query_prescale());
  if (s == T(1)) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) q[r * ld_q + i] *= s;
}

template <typename T>
void stream_norm(const ModelConfig& c, T* out, T* mean, T* rstd, const T* x, const T* P, int64_t w, int64_t b,
                 int64_t R, int64_t d) {
  if (c.norm == NormKind::kLayerNorm)
    Ops<T>::layernorm(out, mean, rstd, x, P + w, b >= 0 ? P + b : nullptr, R, d, c.norm_eps());
  else
    Ops<T>::rmsnorm(out, rstd, x, P + w, R, d, c.norm_eps());
}

template <typename T>
void layer_input_projection(const ModelPlan& plan, const LayerPlan& lp, const T* P, BasicArena<T>& arena,
                            LayerActs<T>& a, int64_t R, LinearFn<T> linear) {
  using O = Ops<T>;
  const LinearFn<T> mm = linear ? linear : LinearFn<T>(&O::matmul);
  const ModelConfig& c = plan.cfg;
  const int64_t d = c.hidden_size;
  alloc_input_projection(arena, c, lp, a, R);
  stream_norm(c, a.h, a.mean_in, a.rstd_in, a.x_in, P, lp.input_norm, lp.input_norm_b, R, d);

  // Projections into one buffer [Q | K | V | x | z].
  const int64_t W = lp.proj_width;
  if (lp.fused) {
    mm(a.proj, W, a.h, d, P + lp.in_proj, R, d, W);
  } else {
    if (lp.qkv_stacked) {
      mm(a.proj + lp.q_col, W, a.h, d, P + lp.q_proj, R, d, lp.dims.q_width + lp.dims.k_width + lp.dims.v_width);
    } else if (lp.attn) {
      mm(a.proj + lp.q_col, W, a.h, d, P + lp.q_proj, R, d, lp.dims.q_width);
      if (lp.producer) {
        mm(a.proj + lp.k_col, W, a.h, d, P + lp.k_proj, R, d, lp.dims.k_width);
        mm(a.proj + lp.v_col, W, a.h, d, P + lp.v_proj, R, d, lp.dims.v_width);
      }
    }
    if (lp.mamba) mm(a.proj + lp.x_col, W, a.h, d, P + lp.mamba_in_proj, R, d, 2 * lp.dims.d_inner);
    // attention_qkv_bias: before RoPE and the query scaling, as GPT-2's c_attn.
    if (lp.q_proj_b >= 0) add_bias_strided(a.proj + lp.q_col, W, P + lp.q_proj_b, R, lp.dims.q_width);
    if (lp.k_proj_b >= 0) add_bias_strided(a.proj + lp.k_col, W, P + lp.k_proj_b, R, lp.dims.k_width);
    if (lp.v_proj_b >= 0) add_bias_strided(a.proj + lp.v_col, W, P + lp.v_proj_b, R, lp.dims.v_width);
  }
}

template <typename T>
void layer_mamba_projections(const ModelPlan& plan, const LayerPlan& lp, const T* P, BasicArena<T>& arena,
                             LayerActs<T>& a, int64_t R, LinearFn<T> linear) {
  using O = Ops<T>;
  const LinearFn<T> mm = linear ? linear : LinearFn<T>(&O::matmul);
  const ModelConfig& c = plan.cfg;
  const int64_t di = lp.dims.d_inner, N = c.mamba_d_state, Rdt = c.dt_rank();
  const int64_t xw = lp.dims.x_proj_out;
  T* raw = alloc_mamba_projections(arena, c, lp, a, R);
  mm(a.xdbl, xw, a.u, di, P + lp.x_proj, R, di, xw);

  if (lp.dt_norm >= 0) {
    // Official inner RMSNorms on dt, B and C (rows are slices of xdbl).
    struct Slice {
      int64_t col, width, norm;
      T* normed;
      T* rstd;
    };
    for (const Slice& s : {Slice{0, Rdt, lp.dt_norm, a.dtn, a.rstd_dt}, Slice{Rdt, N, lp.b_norm, a.bn, a.rstd_b},
                           Slice{Rdt + N, N, lp.c_norm, a.cn, a.rstd_c}}) {
      copy_cols(raw, s.width, a.xdbl + s.col, xw, R, s.width);
      O::rmsnorm(s.normed, s.rstd, raw, P + s.norm, R, s.width, c.rms_norm_eps);
    }
  } else {
    copy_cols(a.dtn, Rdt, a.xdbl, xw, R, Rdt);
  }
  mm(a.delta, di, a.dtn, Rdt, P + lp.dt_w, R, Rdt, di);
}

// Combines the branch outputs into a.o [R, d].
template <typename T>
void layer_mixer_output(const ModelPlan& plan, const LayerPlan& lp, const T* P, BasicArena<T>& arena,
                        LayerActs<T>& a, int64_t R, LinearFn<T> linear) {
  using O = Ops<T>;
  const LinearFn<T> mm = linear ? linear : LinearFn<T>(&O::matmul);
  const ModelConfig& c = plan.cfg;
  const int64_t d = c.hidden_size, Wa = lp.dims.attn_out, di = lp.dims.d_inner;
  T* nb = alloc_mixer_output(arena, c, lp, a, R);  // learned beta's normed Mamba branch
  if (!lp.hybrid) {
    if (lp.attn) {
      mm(a.o, d, a.attn, Wa, P + lp.o_proj, R, Wa, d);
      if (lp.o_proj_b >= 0) add_bias(a.o, P + lp.o_proj_b, R, d);
    } else {
      mm(a.o, d, a.y, di, P + lp.mamba_out_proj, R, di, d);
    }
    return;
  }
  switch (c.fusion) {
    case Fusion::kNormMean: {
      O::rmsnorm(a.na, a.rstd_na, a.attn, P + lp.attn_fnorm, R, Wa, c.rms_norm_eps);
      O::rmsnorm(a.nm, a.rstd_nm, a.y, P + lp.mamba_fnorm, R, di, c.rms_norm_eps);
      for (int64_t i = 0; i < R * di; ++i) a.mix[i] = (a.na[i] + a.nm[i]) * T(0.5);
      mm(a.o, d, a.mix, di, P + lp.fused_out, R, di, d);
      break;
    }
    case Fusion::kConcat: {
      copy_cols(a.cat, Wa + di, a.attn, Wa, R, Wa);
      copy_cols(a.cat + Wa, Wa + di, a.y, di, R, di);
      mm(a.o, d, a.cat, Wa + di, P + lp.fused_out, R, Wa + di, d);
      break;
    }
    case Fusion::kMean:
    case Fusion::kLearnedBeta: {
      mm(a.ao, d, a.attn, Wa, P + lp.o_proj, R, Wa, d);
      if (lp.o_proj_b >= 0) add_bias(a.ao, P + lp.o_proj_b, R, d);
      mm(a.mo, d, a.y, di, P + lp.mamba_out_proj, R, di, d);
      if (c.fusion == Fusion::kMean) {
        for (int64_t i = 0; i < R * d; ++i) a.o[i] = (a.ao[i] + a.mo[i]) * T(0.5);
      } else {
        // beta_a * norm(ao) + beta_m * norm(mo): the betas are the norm weights.
        O::rmsnorm(a.o, a.rstd_ao, a.ao, P + lp.beta_a, R, d, c.rms_norm_eps);
        O::rmsnorm(nb, a.rstd_mo, a.mo, P + lp.beta_m, R, d, c.rms_norm_eps);
        for (int64_t i = 0; i < R * d; ++i) a.o[i] += nb[i];
      }
      break;
    }
  }
}

template <typename T>
void layer_residual_ffn(const ModelPlan& plan, const LayerPlan& lp, const T* P, const ForwardOptions& opt,
                        BasicArena<T>& arena, LayerActs<T>& a, int64_t R, LinearFn<T> linear) {
  using O = Ops<T>;
  const LinearFn<T> mm = linear ? linear : LinearFn<T>(&O::matmul);
  const ModelConfig& c = plan.cfg;
  const int64_t d = c.hidden_size;
  const bool dropout = opt.dropout_rng != nullptr && c.dropout > 0;
  alloc_residual_ffn(arena, c, lp, a, R, dropout);
  if (dropout) {
    fill_dropout_mask(a.mask1, *opt.dropout_rng, lp.index, 0, R * d, c.dropout);
    for (int64_t i = 0; i < R * d; ++i) a.o[i] *= a.mask1[i];
  }
  add(a.x_mid, a.x_in, a.o, R * d);
  if (lp.ffn_norm < 0) return;  // x_out is x_mid

  const int64_t I = c.intermediate_size;
  stream_norm(c, a.h2, a.mean2, a.rstd2, a.x_mid, P, lp.ffn_norm, lp.ffn_norm_b, R, d);
  if (c.mlp_activation == MlpActivation::kSwiGlu) {
    if (lp.gate_up_stacked) {
      mm(a.gu, 2 * I, a.h2, d, P + lp.ffn_gate, R, d, 2 * I);
    } else {
      mm(a.gu, 2 * I, a.h2, d, P + lp.ffn_gate, R, d, I);
      mm(a.gu + I, 2 * I, a.h2, d, P + lp.ffn_up, R, d, I);
    }
    O::swiglu(a.act, a.gu, a.gu + I, R, I, 2 * I);
  } else {
    // GELU MLP: up (+ bias), GELU, down (+ bias).
    mm(a.gu, I, a.h2, d, P + lp.ffn_up, R, d, I);
    if (lp.ffn_up_b >= 0) add_bias(a.gu, P + lp.ffn_up_b, R, I);
    O::gelu(a.act, a.gu, R * I, c.mlp_activation == MlpActivation::kGeluErf);
  }
  mm(a.f, d, a.act, I, P + lp.ffn_down, R, I, d);
  if (lp.ffn_down_b >= 0) add_bias(a.f, P + lp.ffn_down_b, R, d);
  if (dropout) {
    fill_dropout_mask(a.mask2, *opt.dropout_rng, lp.index, 1, R * d, c.dropout);
    for (int64_t i = 0; i < R * d; ++i) a.f[i] *= a.mask2[i];
  }
  add(a.x_out, a.x_mid, a.f, R * d);
}

template <typename T>
void layer_block_link(const ModelPlan& plan, const LayerPlan& lp, const T* P, BasicArena<T>& arena, LayerActs<T>& a,
                      const T* block_in, int64_t R, LinearFn<T> linear) {
  const LinearFn<T> mm = linear ? linear : LinearFn<T>(&Ops<T>::matmul);
  const int64_t d = plan.cfg.hidden_size, n = R * d;
  alloc_block_link(arena, plan.cfg, a, R);
  const T* y = a.block_out;
  if (plan.cfg.block_link == BlockLink::kResidual) {
    add(a.x_out, y, block_in, n);
    return;
  }
  mm(a.link_gate, d, block_in, d, P + lp.link_w, R, d, d);
  const T* bias = P + lp.link_b;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < d; ++c) {
      const int64_t i = r * d + c;
      const T g = T(1) / (T(1) + std::exp(-(a.link_gate[i] + bias[c])));
      a.link_gate[i] = g;
      a.x_out[i] = g * y[i] + (T(1) - g) * block_in[i];
    }
}

LayerStages layer_stages(const LayerPlan& lp) {
  LayerStages s;
  auto add = [&](LayerStage stage) { s.list[static_cast<size_t>(s.count++)] = stage; };
  add(LayerStage::kInputProjection);
  if (lp.attn) add(LayerStage::kAttention);
  if (lp.mamba) add(LayerStage::kMamba);
  add(LayerStage::kMixerOutput);
  add(LayerStage::kResidualFfn);
  if (lp.block_first >= 0) add(LayerStage::kBlockLink);
  return s;
}

template <typename T>
void walk_layer(const LayerWalker<T>& w, const LayerPlan& lp, LayerActs<T>& a, const T* block_in) {
  for (const LayerStage stage : layer_stages(lp)) {
    switch (stage) {
      case LayerStage::kInputProjection:
        layer_input_projection(w.plan, lp, w.params, w.arena, a, w.rows, w.linear);
        break;
      case LayerStage::kAttention: w.attention(lp, a); break;
      case LayerStage::kMamba: w.mamba(lp, a); break;
      case LayerStage::kMixerOutput: layer_mixer_output(w.plan, lp, w.params, w.arena, a, w.rows, w.linear); break;
      case LayerStage::kResidualFfn:
        layer_residual_ffn(w.plan, lp, w.params, w.opt, w.arena, a, w.rows, w.linear);
        break;
      case LayerStage::kBlockLink:
        layer_block_link(w.plan, lp, w.params, w.arena, a, block_in, w.rows, w.linear);
        break;
    }
  }
}

namespace {

// After layer lp ran in the scratch arena of a forward that releases its
// activations: keeps its output, its input (a block link reads its block's
// first input; it is the previous layer's kept output) and, for a KV
// producer whose K/V a later layer reads, its projections; everything else
// goes with the scratch.
template <typename T>
void keep_layer(const ModelPlan& plan, const LayerPlan& lp, BasicArena<T>& arena, LayerActs<T>& a, int64_t R) {
  const KeptLayer<T> k = alloc_kept_layer<T>(arena, plan, lp, R);
  std::copy(a.x_out, a.x_out + R * plan.cfg.hidden_size, k.x_out);
  if (k.proj != nullptr) std::copy(a.proj, a.proj + R * lp.proj_width, k.proj);
  T* x_in = a.x_in;
  a = LayerActs<T>{};
  a.x_in = x_in;
  a.x_out = k.x_out;
  a.proj = k.proj;
}

}  // namespace

template <typename T>
LossStats model_forward(const ModelPlan& plan, const T* P, const int32_t* ids, const int32_t* targets, int64_t B,
                        int64_t T_, const ForwardOptions& opt, BasicArena<T>& arena, Activations<T>& acts,
                        BasicArena<T>* scratch) {
  const ModelConfig& c = plan.cfg;
  HYMBA_CHECK(B >= 1 && T_ >= 1, "forward: empty batch (B=", B, ", T=", T_, ")");
  const bool release = opt.release_activations || opt.recompute;
  HYMBA_CHECK(!opt.release_activations || opt.hidden_only, "forward: release_activations needs hidden_only");
  HYMBA_CHECK(!release || scratch != nullptr, "forward: release_activations and recompute need a scratch arena");
  const int64_t d = c.hidden_size, M = c.num_memory_tokens, S = M + T_, R = B * S, V = c.vocab_size;
  acts.B = B;
  acts.T_ = T_;
  acts.M = M;
  acts.S = S;
  acts.R = R;
  acts.ids.assign(ids, ids + B * T_);
  acts.has_targets = targets != nullptr;
  if (targets) acts.targets.assign(targets, targets + B * T_);
  acts.layers.assign(static_cast<size_t>(c.num_hidden_layers), LayerActs<T>{});
  acts.rope_cos = acts.rope_sin = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (uses_rope_tables(plan)) {
      alloc_rope_tables(arena, c, acts);
      cpu::rope_table(acts.rope_cos, acts.rope_sin, S, c.qk_head_dim, static_cast<float>(c.rope_base()));
    }
  }

  // Embeddings, with the meta tokens as the first M rows of every sequence;
  // learned positions add row s of their table to sequence row s (meta rows included).
  if (plan.positions >= 0)
    HYMBA_CHECK(S <= c.max_position_embeddings, "forward: ", M > 0 ? std::to_string(M) + " meta + " : std::string(),
                T_, " tokens need ", S, " positions, beyond max_position_embeddings (", c.max_position_embeddings, ")");
  alloc_embeddings(arena, c, acts);
  for (int64_t b = 0; b < B; ++b) {
    T* row0 = acts.x0 + b * S * d;
    if (M > 0) for (int64_t i = 0; i < M * d; ++i) row0[i] = P[plan.memory + i];
    Ops<T>::embedding(row0 + M * d, ids + b * T_, P + plan.embed, T_, V, d);
    if (plan.positions >= 0) Ops<T>::positions(row0, P + plan.positions, S, c.max_position_embeddings, d);
  }

  T* x = acts.x0;
  for (const LayerPlan& lp : plan.layers) {
    LayerActs<T>& a = acts.layers[static_cast<size_t>(lp.index)];
    BasicArena<T>& layer_arena = release ? *scratch : arena;
    layer_forward(plan, lp, P, opt, layer_arena, acts, x);
    if (release) {
      keep_layer(plan, lp, arena, a, R);
      scratch->reset();
    }
    x = a.x_out;
  }

  alloc_final_norm(arena, c, acts);
  stream_norm(c, acts.hf, acts.mean_f, acts.rstd_f, x, P, plan.final_norm, plan.final_norm_b, R, d);
  if (opt.hidden_only) {
    HYMBA_CHECK(targets == nullptr, "forward: hidden_only takes no targets");
    acts.hf_tok = acts.logits = nullptr;
    return {};
  }
  // Meta rows are never scored: only token rows reach the LM head.
  alloc_logits(arena, c, acts);
  if (M > 0)
    for (int64_t b = 0; b < B; ++b) copy_cols(acts.hf_tok + b * T_ * d, d, acts.hf + (b * S + M) * d, d, T_, d);
  Ops<T>::matmul(acts.logits, V, acts.hf_tok, d, P + plan.lm_head, B * T_, d, V);
  if (targets == nullptr) return {};
  return Ops<T>::cross_entropy(acts.logits, targets, B * T_, V, opt.label_smoothing);
}

template <typename T>
void recompute_layer(const ModelPlan& plan, const LayerPlan& lp, const T* P, const ForwardOptions& opt,
                     BasicArena<T>& arena, Activations<T>& acts) {
  LayerActs<T>& a = acts.layers[static_cast<size_t>(lp.index)];
  HYMBA_CHECK(a.x_in != nullptr, "recompute: layer ", lp.index, " kept no input");
  layer_forward(plan, lp, P, opt, arena, acts, a.x_in);
}

template void walk_layer<float>(const LayerWalker<float>&, const LayerPlan&, LayerActs<float>&, const float*);
template void walk_layer<double>(const LayerWalker<double>&, const LayerPlan&, LayerActs<double>&, const double*);
template void recompute_layer<float>(const ModelPlan&, const LayerPlan&, const float*, const ForwardOptions&,
                                     BasicArena<float>&, Activations<float>&);

template ScanParams<float> layer_scan_params<float>(const ModelPlan&, const LayerPlan&, const float*,
                                                   const LayerActs<float>&, int64_t, int64_t);
template ScanParams<double> layer_scan_params<double>(const ModelPlan&, const LayerPlan&, const double*,
                                                     const LayerActs<double>&, int64_t, int64_t);
template LossStats model_forward<float>(const ModelPlan&, const float*, const int32_t*, const int32_t*, int64_t,
                                        int64_t, const ForwardOptions&, BasicArena<float>&, Activations<float>&,
                                        BasicArena<float>*);
template LossStats model_forward<double>(const ModelPlan&, const double*, const int32_t*, const int32_t*, int64_t,
                                         int64_t, const ForwardOptions&, BasicArena<double>&, Activations<double>&,
                                         BasicArena<double>*);

#define HYMBA_INSTANTIATE_LAYER_PIECES(T)                                                                       \
  template void scale_queries<T>(const ModelConfig&, T*, int64_t, int64_t, int64_t);                              \
  template void stream_norm<T>(const ModelConfig&, T*, T*, T*, const T*, const T*, int64_t, int64_t, int64_t,      \
                               int64_t);                                                                         \
  template void layer_input_projection<T>(const ModelPlan&, const LayerPlan&, const T*, BasicArena<T>&,            \
                                          LayerActs<T>&, int64_t, LinearFn<T>);                                  \
  template void layer_mamba_projections<T>(const ModelPlan&, const LayerPlan&, const T*, BasicArena<T>&,           \
                                           LayerActs<T>&, int64_t, LinearFn<T>);                                 \
  template void layer_mixer_output<T>(const ModelPlan&, const LayerPlan&, const T*, BasicArena<T>&, LayerActs<T>&, \
                                      int64_t, LinearFn<T>);                                                     \
  template void layer_residual_ffn<T>(const ModelPlan&, const LayerPlan&, const T*, const ForwardOptions&,         \
                                      BasicArena<T>&, LayerActs<T>&, int64_t, LinearFn<T>);                      \
  template void layer_block_link<T>(const ModelPlan&, const LayerPlan&, const T*, BasicArena<T>&, LayerActs<T>&,   \
                                    const T*, int64_t, LinearFn<T>);
HYMBA_INSTANTIATE_LAYER_PIECES(float)
HYMBA_INSTANTIATE_LAYER_PIECES(double)
#undef HYMBA_INSTANTIATE_LAYER_PIECES

}  // namespace hymba
