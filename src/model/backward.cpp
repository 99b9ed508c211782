#include "model/backward.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/selective_scan.h"
#include "model/arena_plan_backward.h"

namespace hymba {

namespace {

using Acts = Activations<float>;
using LActs = LayerActs<float>;

// Adds a column slice: dst[r, c] += src[r, c].
void add_cols(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > 16384)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] += src[r * ld_src + c];
}

void copy_cols(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > 16384)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] = src[r * ld_src + c];
}

// Gradient of y = x * mask: dy itself when there is no mask (no copy; the
// callers only read it before dy changes), else `out` (the plan allocates it
// exactly when there is a mask).
const float* through_mask(float* out, const float* dy, const float* mask, int64_t n) {
  if (mask == nullptr) return dy;
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) out[i] = dy[i] * mask[i];
  return out;
}

// g[c] += sum over rows of d[r * ld + c], c < n (a bias gradient). Each
// column has one owner and rows add in order: deterministic at any thread count.
void column_sums(float* g, const float* d, int64_t ld, int64_t R, int64_t n) {
#pragma omp parallel for schedule(static) if (R * n > 16384)
  for (int64_t c = 0; c < n; ++c) {
    float s = 0.0f;
    for (int64_t r = 0; r < R; ++r) s += d[r * ld + c];
    g[c] += s;
  }
}

class Backward {
 public:
  Backward(const ModelPlan& plan, const float* P, float* G, const Acts& acts, Arena& arena)
      : plan_(plan), c_(plan.cfg), P_(P), G_(G), acts_(acts), arena_(arena), work_(&arena),
        dproj_(static_cast<size_t>(plan.cfg.num_hidden_layers), nullptr) {}

  // After a forward with opt.recompute: each layer is run forward again into
  // `scratch` before going back through it, and its scratch (activations and
  // the backward's temporaries) is released after it.
  void recompute_into(Acts& acts, const ForwardOptions& opt, Arena& scratch) {
    recompute_acts_ = &acts;
    recompute_opt_ = &opt;
    scratch_ = &scratch;
  }

  void run(float dloss, double label_smoothing) {
    const int64_t d = c_.hidden_size, BT = acts_.B * acts_.T_, V = c_.vocab_size;
    const LmHeadGrads g = alloc_lm_head_grads(arena_, c_, BT);
    float* dlogits = g.dlogits;
    cpu::cross_entropy_backward(dlogits, acts_.logits, acts_.targets.data(), BT, V,
                                static_cast<float>(label_smoothing), dloss);
    float* dhf_tok = g.dhf_tok;
    cpu::matmul_backward(dhf_tok, d, G_ + plan_.lm_head, nullptr, dlogits, V, acts_.hf_tok, d, P_ + plan_.lm_head, BT,
                         d, V, /*overwrite_dinp=*/true);
    from_token_hidden(dhf_tok);
  }

  // From the gradient of the final-norm output's token rows [B*T, d].
  void from_token_hidden(const float* dhf_tok) {
    const int64_t d = c_.hidden_size, M = acts_.M, S = acts_.S, R = acts_.R, B = acts_.B, T = acts_.T_;
    const float* dhf = dhf_tok;  // without meta rows the token rows are all the rows
    if (float* padded = alloc_meta_row_grad(arena_, c_, R)) {  // meta rows stay zero: they are never scored
      for (int64_t b = 0; b < B; ++b) copy_cols(padded + (b * S + M) * d, d, dhf_tok + b * T * d, d, T, d);
      dhf = padded;
    }

    from_hidden(dhf);
  }

  // Everything below the final norm's output, from its gradient dhf [R, d].
  void from_hidden(const float* dhf) {
    const int64_t d = c_.hidden_size, M = acts_.M, S = acts_.S, R = acts_.R, B = acts_.B, T = acts_.T_;
    const int64_t V = c_.vocab_size;
    // dx: gradient of the residual stream, walked back layer by layer.
    float* dx = alloc_stream_grad(arena_, c_, R);
    const float* x_last = acts_.layers.back().x_out;
    norm_backward(dx, plan_.final_norm, plan_.final_norm_b, dhf, x_last, acts_.mean_f, acts_.rstd_f);
    // A linked block's skip gradient (to its input) waits until the walk
    // reaches the block's first layer; blocks do not nest.
    const float* dskip = nullptr;
    int64_t skip_to = -1;
    for (auto it = plan_.layers.rbegin(); it != plan_.layers.rend(); ++it) {
      const LActs kept = enter(*it);
      if (it->block_first >= 0) {
        dskip = block_link(*it, dx);
        skip_to = it->block_first;
      }
      layer(*it, dx);
      leave(*it, kept);
      if (it->index == skip_to) {
        for (int64_t i = 0; i < R * d; ++i) dx[i] += dskip[i];
        skip_to = -1;
      }
    }

    for (int64_t b = 0; b < B; ++b) {
      const float* rows = dx + b * S * d;
      if (M > 0)
        for (int64_t i = 0; i < M * d; ++i) G_[plan_.memory + i] += rows[i];
      cpu::embedding_backward(G_ + plan_.embed, rows + M * d, acts_.ids.data() + b * T, T, V, d);
      if (plan_.positions >= 0)
        cpu::position_embedding_backward(G_ + plan_.positions, rows, nullptr, S, c_.max_position_embeddings, d);
    }
  }

 private:
  // With recompute: the layer's activations again, in the scratch arena,
  // which also takes the layer's backward temporaries. Returns what the
  // forward kept, for leave() to put back.
  LActs enter(const LayerPlan& lp) {
    if (recompute_acts_ == nullptr) return {};
    const LActs kept = recompute_acts_->layers[static_cast<size_t>(lp.index)];
    recompute_layer(plan_, lp, P_, *recompute_opt_, *scratch_, *recompute_acts_);
    work_ = scratch_;
    return kept;
  }

  void leave(const LayerPlan& lp, const LActs& kept) {
    if (recompute_acts_ == nullptr) return;
    recompute_acts_->layers[static_cast<size_t>(lp.index)] = kept;
    scratch_->reset();
    work_ = &arena_;
  }

  // Back through a residual-stream norm (weight offset w, bias offset b or
  // -1): dx += d(norm(x)) / dx, and the weight and bias gradients.
  void norm_backward(float* dx, int64_t w, int64_t b, const float* dout, const float* x, const float* mean,
                     const float* rstd) {
    const int64_t R = acts_.R, d = c_.hidden_size;
    if (c_.norm == NormKind::kLayerNorm)
      cpu::layernorm_backward(dx, G_ + w, b >= 0 ? G_ + b : nullptr, dout, x, P_ + w, mean, rstd, R, d);
    else
      cpu::rmsnorm_backward(dx, G_ + w, dout, x, P_ + w, rstd, R, d);
  }

  // The projection-gradient buffer of a layer; consumers add into their
  // producer's K/V columns, so it is created by whoever touches it first.
  float* dproj(int64_t layer) {
    float*& p = dproj_[static_cast<size_t>(layer)];
    if (p == nullptr) p = alloc_proj_grad(arena_, plan_.layers[static_cast<size_t>(layer)], acts_.R);
    return p;
  }

  void layer(const LayerPlan& lp, float* dx) {
    const int64_t R = acts_.R, d = c_.hidden_size;
    const LActs& a = acts_.layers[static_cast<size_t>(lp.index)];
    const LayerGrads g = alloc_layer_grads(*work_, c_, lp, R, a.mask1 != nullptr);
    if (lp.ffn_norm >= 0) ffn(lp, a, g.ffn, dx);  // dx becomes d(x_mid)

    const float* d_o = through_mask(g.mixer.d_o, dx, a.mask1, R * d);
    mixer_output(lp, a, g.mixer, d_o);

    float* dp = dproj(lp.index);
    if (lp.mamba) mamba(lp, a, g.mamba, g.mixer.dy, dp);
    if (lp.attn) attention(lp, a, g.mixer.dattn, dp);

    // dh from the input projections: the first GEMM overwrites the fresh
    // buffer, any others add to it.
    float* dh = g.dh;
    const int64_t W = lp.proj_width;
    bool fresh = true;
    auto project_back = [&](int64_t weight, int64_t col, int64_t width) {
      cpu::matmul_backward(dh, d, G_ + weight, nullptr, dp + col, W, a.h, d, P_ + weight, R, d, width, fresh);
      fresh = false;
    };
    if (lp.fused) {
      project_back(lp.in_proj, 0, W);
    } else {
      if (lp.qkv_stacked) {
        project_back(lp.q_proj, lp.q_col, lp.dims.q_width + lp.dims.k_width + lp.dims.v_width);
      } else if (lp.attn) {
        project_back(lp.q_proj, lp.q_col, lp.dims.q_width);
        if (lp.producer) {
          project_back(lp.k_proj, lp.k_col, lp.dims.k_width);
          project_back(lp.v_proj, lp.v_col, lp.dims.v_width);
        }
      }
      if (lp.mamba) project_back(lp.mamba_in_proj, lp.x_col, 2 * lp.dims.d_inner);
      // q/k/v biases: column sums of their slices of d(proj).
      if (lp.q_proj_b >= 0) column_sums(G_ + lp.q_proj_b, dp + lp.q_col, W, R, lp.dims.q_width);
      if (lp.k_proj_b >= 0) column_sums(G_ + lp.k_proj_b, dp + lp.k_col, W, R, lp.dims.k_width);
      if (lp.v_proj_b >= 0) column_sums(G_ + lp.v_proj_b, dp + lp.v_col, W, R, lp.dims.v_width);
    }
    norm_backward(dx, lp.input_norm, lp.input_norm_b, dh, a.x_in, a.mean_in, a.rstd_in);
  }

  // Back through a block link: dx (d of the linked output) becomes d of the
  // block output in place; returns d of the block input through the link.
  const float* block_link(const LayerPlan& lp, float* dx) {
    const int64_t R = acts_.R, d = c_.hidden_size, n = R * d;
    const LActs& a = acts_.layers[static_cast<size_t>(lp.index)];
    const BlockLinkGrads lg = alloc_block_link_grads(arena_, *work_, c_, R);
    float* dskip = lg.dskip;
    if (c_.block_link == BlockLink::kResidual) {
      std::copy(dx, dx + n, dskip);
      return dskip;
    }
    const float* x = acts_.layers[static_cast<size_t>(lp.block_first)].x_in;
    const float* g = a.link_gate;
    float* dpre = lg.dpre;  // d of the gate's pre-activation
    for (int64_t i = 0; i < n; ++i) {
      dpre[i] = dx[i] * (a.block_out[i] - x[i]) * g[i] * (1.0f - g[i]);
      dskip[i] = dx[i] * (1.0f - g[i]);
      dx[i] *= g[i];
    }
    cpu::matmul_backward(dskip, d, G_ + lp.link_w, G_ + lp.link_b, dpre, d, x, d, P_ + lp.link_w, R, d, d);
    return dskip;
  }

  void ffn(const LayerPlan& lp, const LActs& a, const FfnGrads& g, float* dx) {
    const int64_t R = acts_.R, d = c_.hidden_size, I = c_.intermediate_size;
    const float* df = through_mask(g.df, dx, a.mask2, R * d);
    float* dact = g.dact;
    cpu::matmul_backward(dact, I, G_ + lp.ffn_down, lp.ffn_down_b >= 0 ? G_ + lp.ffn_down_b : nullptr, df, d, a.act,
                         I, P_ + lp.ffn_down, R, I, d, /*overwrite_dinp=*/true);
    float* dh2 = g.dh2;
    if (c_.mlp_activation != MlpActivation::kSwiGlu) {
      // GELU MLP: a.gu holds the up projection (with its bias) GELU read.
      float* dup = g.dup;
      if (c_.mlp_activation == MlpActivation::kGeluErf) cpu::gelu_erf_backward(dup, dact, a.gu, R * I);
      else cpu::gelu_tanh_backward(dup, dact, a.gu, R * I);
      cpu::matmul_backward(dh2, d, G_ + lp.ffn_up, lp.ffn_up_b >= 0 ? G_ + lp.ffn_up_b : nullptr, dup, I, a.h2, d,
                           P_ + lp.ffn_up, R, d, I, /*overwrite_dinp=*/true);
      norm_backward(dx, lp.ffn_norm, lp.ffn_norm_b, dh2, a.x_mid, a.mean2, a.rstd2);
      return;
    }
    float* dgu = g.dgu;
    cpu::swiglu_backward(dgu, dgu + I, dact, a.gu, a.gu + I, R, I, 2 * I, /*accumulate=*/false);
    if (lp.gate_up_stacked) {
      cpu::matmul_backward(dh2, d, G_ + lp.ffn_gate, nullptr, dgu, 2 * I, a.h2, d, P_ + lp.ffn_gate, R, d, 2 * I,
                           /*overwrite_dinp=*/true);
    } else {
      cpu::matmul_backward(dh2, d, G_ + lp.ffn_gate, nullptr, dgu, 2 * I, a.h2, d, P_ + lp.ffn_gate, R, d, I,
                           /*overwrite_dinp=*/true);
      cpu::matmul_backward(dh2, d, G_ + lp.ffn_up, nullptr, dgu + I, 2 * I, a.h2, d, P_ + lp.ffn_up, R, d, I);
    }
    norm_backward(dx, lp.ffn_norm, lp.ffn_norm_b, dh2, a.x_mid, a.mean2, a.rstd2);
  }

  float* o_bias_grad(const LayerPlan& lp) const { return lp.o_proj_b >= 0 ? G_ + lp.o_proj_b : nullptr; }

  // From d(o) to the branch outputs' gradients g.dattn / g.dy (only the
  // norm_mean fusion adds into them; every other path writes them whole).
  void mixer_output(const LayerPlan& lp, const LActs& a, const MixerGrads& g, const float* d_o) {
    const int64_t R = acts_.R, d = c_.hidden_size, Wa = lp.dims.attn_out, di = lp.dims.d_inner;
    float* dattn = g.dattn, *dy = g.dy;
    if (!lp.hybrid) {
      if (lp.attn)
        cpu::matmul_backward(dattn, Wa, G_ + lp.o_proj, o_bias_grad(lp), d_o, d, a.attn, Wa, P_ + lp.o_proj, R, Wa, d, true);
      else
        cpu::matmul_backward(dy, di, G_ + lp.mamba_out_proj, nullptr, d_o, d, a.y, di, P_ + lp.mamba_out_proj, R, di,
                             d, true);
      return;
    }
    switch (c_.fusion) {
      case Fusion::kNormMean: {
        float* dmix = g.dmix;
        cpu::matmul_backward(dmix, di, G_ + lp.fused_out, nullptr, d_o, d, a.mix, di, P_ + lp.fused_out, R, di, d,
                             true);
        for (int64_t i = 0; i < R * di; ++i) dmix[i] *= 0.5f;
        cpu::rmsnorm_backward(dattn, G_ + lp.attn_fnorm, dmix, a.attn, P_ + lp.attn_fnorm, a.rstd_na, R, Wa);
        cpu::rmsnorm_backward(dy, G_ + lp.mamba_fnorm, dmix, a.y, P_ + lp.mamba_fnorm, a.rstd_nm, R, di);
        break;
      }
      case Fusion::kConcat: {
        float* dcat = g.dcat;
        cpu::matmul_backward(dcat, Wa + di, G_ + lp.fused_out, nullptr, d_o, d, a.cat, Wa + di, P_ + lp.fused_out, R,
                             Wa + di, d, true);
        copy_cols(dattn, Wa, dcat, Wa + di, R, Wa);
        copy_cols(dy, di, dcat + Wa, Wa + di, R, di);
        break;
      }
      case Fusion::kMean:
      case Fusion::kLearnedBeta: {
        float* dao = g.dao, *dmo = g.dmo;
        if (c_.fusion == Fusion::kMean) {
          for (int64_t i = 0; i < R * d; ++i) dao[i] = dmo[i] = 0.5f * d_o[i];
        } else {
          cpu::rmsnorm_backward(dao, G_ + lp.beta_a, d_o, a.ao, P_ + lp.beta_a, a.rstd_ao, R, d);
          cpu::rmsnorm_backward(dmo, G_ + lp.beta_m, d_o, a.mo, P_ + lp.beta_m, a.rstd_mo, R, d);
        }
        cpu::matmul_backward(dattn, Wa, G_ + lp.o_proj, o_bias_grad(lp), dao, d, a.attn, Wa, P_ + lp.o_proj, R, Wa, d, true);
        cpu::matmul_backward(dy, di, G_ + lp.mamba_out_proj, nullptr, dmo, d, a.y, di, P_ + lp.mamba_out_proj, R, di,
                             d, true);
        break;
      }
    }
  }

  void attention(const LayerPlan& lp, const LActs& a, const float* dattn, float* dp) {
    const int64_t W = lp.proj_width, Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads;
    const int64_t dqk = c_.qk_head_dim, dv = c_.v_head_dim, Wa = lp.dims.attn_out;
    const LayerPlan& pp = plan_.layers[static_cast<size_t>(lp.producer_layer)];
    const float* kv = acts_.layers[static_cast<size_t>(lp.producer_layer)].proj;
    float* dkv = dproj(lp.producer_layer);
    cpu::AttnArgs args;
    args.B = acts_.B;
    args.Tq = args.Tk = acts_.S;
    args.Hq = Hq;
    args.Hkv = Hkv;
    args.Dqk = dqk;
    args.Dv = dv;
    args.q = a.proj + lp.q_col;
    args.ld_q = W;
    args.k = kv + pp.k_col;
    args.ld_k = pp.proj_width;
    args.v = kv + pp.v_col;
    args.ld_v = pp.proj_width;
    args.window = lp.window;
    args.num_meta = acts_.M;
    args.window_symmetric = c_.sliding_window_symmetric;
    args.meta_sees_all = c_.meta_tokens_see_all;
    // The forward's dropout mask, drawn again from the seed it kept.
    args.dropout = a.attn_dropout_seed != 0 ? static_cast<float>(c_.attention_dropout) : 0.0f;
    args.dropout_seed = a.attn_dropout_seed;
    cpu::attention_backward(dp + lp.q_col, W, dkv + pp.k_col, pp.proj_width, dkv + pp.v_col, pp.proj_width, dattn, Wa,
                            a.attn, Wa, a.lse, args);
    // The forward scaled Q after RoPE: its gradient takes the same factor first.
    scale_queries(c_, dp + lp.q_col, W, acts_.R, Hq * dqk);
    // Consumers come later in the stack, so by now they have all added into
    // this producer's dK: un-rotate it once, with dQ (K's heads follow Q's).
    if (c_.rope)
      cpu::rope_backward_table(dp + lp.q_col, W, acts_.B, acts_.S, lp.producer ? Hq + Hkv : Hq, dqk, acts_.rope_cos,
                               acts_.rope_sin);
  }

  void mamba(const LayerPlan& lp, const LActs& a, const MambaGrads& mg, const float* dy, float* dp) {
    const int64_t R = acts_.R, di = lp.dims.d_inner, N = c_.mamba_d_state, Rdt = c_.dt_rank();
    const int64_t xw = lp.dims.x_proj_out, W = lp.proj_width;
    const bool norms = lp.dt_norm >= 0;
    float* du = mg.du, *ddelta = mg.ddelta, *dxdbl = mg.dxdbl, *dbn = mg.dbn, *dcn = mg.dcn;

    const ScanParams<float> sp = layer_scan_params(plan_, lp, P_, a, acts_.B, acts_.S);
    cpu::ScanGrads g;
    g.du = du;
    g.ld_du = di;
    g.ddelta = ddelta;
    g.ld_ddelta = di;
    g.ddelta_bias = G_ + lp.dt_b;
    g.dA_log = G_ + lp.a_log;
    g.dB = norms ? dbn : dxdbl + Rdt;
    g.ld_dB = norms ? N : xw;
    g.dC = norms ? dcn : dxdbl + Rdt + N;
    g.ld_dC = norms ? N : xw;
    g.dDskip = G_ + lp.d_skip;
    g.dz = dp + lp.z_col;
    g.ld_dz = W;
    cpu::selective_scan_backward(g, dy, a.chunk_states, Ops<float>::scan_args(sp));

    float* ddt = mg.ddt;
    cpu::matmul_backward(ddt, Rdt, G_ + lp.dt_w, nullptr, ddelta, di, a.dtn, Rdt, P_ + lp.dt_w, R, Rdt, di);
    if (norms) {
      // Inner norms: back through RMSNorm onto the raw x_proj slices.
      float* raw = mg.raw, *draw = mg.draw;
      struct Slice {
        int64_t col, width, norm;
        const float* rstd;
        const float* dnormed;
      };
      for (const Slice& s : {Slice{0, Rdt, lp.dt_norm, a.rstd_dt, ddt}, Slice{Rdt, N, lp.b_norm, a.rstd_b, dbn},
                             Slice{Rdt + N, N, lp.c_norm, a.rstd_c, dcn}}) {
        copy_cols(raw, s.width, a.xdbl + s.col, xw, R, s.width);
        std::fill(draw, draw + R * s.width, 0.0f);
        cpu::rmsnorm_backward(draw, G_ + s.norm, s.dnormed, raw, P_ + s.norm, s.rstd, R, s.width);
        add_cols(dxdbl + s.col, xw, draw, s.width, R, s.width);
      }
    } else {
      add_cols(dxdbl, xw, ddt, Rdt, R, Rdt);
    }
    cpu::matmul_backward(du, di, G_ + lp.x_proj, nullptr, dxdbl, xw, a.u, di, P_ + lp.x_proj, R, di, xw);
    float* dxc = mg.dxc;
    cpu::silu_backward(dxc, du, a.xc, R * di);
    cpu::conv1d_causal_backward(dp + lp.x_col, W, G_ + lp.conv_w, lp.conv_b >= 0 ? G_ + lp.conv_b : nullptr, dxc,
                                a.proj + lp.x_col, W, P_ + lp.conv_w, acts_.B, acts_.S, di, c_.mamba_d_conv);
  }

  const ModelPlan& plan_;
  const ModelConfig& c_;
  const float* P_;
  float* G_;
  const Acts& acts_;
  Arena& arena_;   // what outlives a layer: d(x), d(proj) of KV producers, a block's skip gradient
  Arena* work_;    // a layer's temporaries: arena_, or the scratch with recompute
  Acts* recompute_acts_ = nullptr;
  const ForwardOptions* recompute_opt_ = nullptr;
  Arena* scratch_ = nullptr;
  std::vector<float*> dproj_;
};

}  // namespace

void model_backward(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts, float dloss,
                    double label_smoothing, Arena& arena) {
  HYMBA_CHECK(acts.has_targets, "backward: the last forward had no targets");
  Backward(plan, P, G, acts, arena).run(dloss, label_smoothing);
}

void model_backward_recompute(const ModelPlan& plan, const float* P, float* G, Activations<float>& acts,
                              float dloss, double label_smoothing, const ForwardOptions& opt, Arena& arena,
                              Arena& scratch) {
  HYMBA_CHECK(acts.has_targets, "backward: the last forward had no targets");
  HYMBA_CHECK(opt.recompute, "backward: the last forward kept its activations (no recompute)");
  Backward b(plan, P, G, acts, arena);
  b.recompute_into(acts, opt, scratch);
  b.run(dloss, label_smoothing);
}

namespace {

// A backward from the hidden states needs a forward that kept its activations.
void check_kept_activations(const Activations<float>& acts) {
  HYMBA_CHECK(acts.hf != nullptr, "backward: no forward to go back through");
  HYMBA_CHECK(acts.layers.empty() || acts.layers.front().h != nullptr,
              "backward: the last forward released its activations (release_activations)");
}

}  // namespace

void model_backward_from_hidden(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts,
                                const float* dhf, Arena& arena) {
  check_kept_activations(acts);
  Backward(plan, P, G, acts, arena).from_hidden(dhf);
}

void model_backward_from_token_hidden(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts,
                                      const float* dhf_tok, Arena& arena) {
  check_kept_activations(acts);
  Backward(plan, P, G, acts, arena).from_token_hidden(dhf_tok);
}

}  // namespace hymba
