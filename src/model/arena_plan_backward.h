// The arena's plan for the backward pass (model/backward.cpp): the buffers
// each piece of it takes, written once for the backward and the memory
// estimate (see model/arena_plan.h). `kept` is the arena of what outlives a
// layer; `work` that of a layer's temporaries (the same arena, or the
// scratch with recompute). A is Arena or SizingArena<float>.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/forward.h"

namespace hymba {

// d(logits) [B*T, V] (zeroed: cross_entropy_backward writes scored rows only)
// and d(hf_tok) [B*T, d].
struct LmHeadGrads {
  float* dlogits = nullptr;
  float* dhf_tok = nullptr;
};
template <typename A>
LmHeadGrads alloc_lm_head_grads(A& kept, const ModelConfig& c, int64_t BT) {
  LmHeadGrads g;
  g.dlogits = kept.alloc(BT * c.vocab_size);
  g.dhf_tok = kept.alloc_uninit(BT * c.hidden_size);
  return g;
}

// d(hf) [R, d] with zero meta rows, when there are meta rows (else null:
// the token rows are all the rows).
template <typename A>
float* alloc_meta_row_grad(A& kept, const ModelConfig& c, int64_t R) {
  return c.num_memory_tokens > 0 ? kept.alloc(R * c.hidden_size) : nullptr;
}

// d(x) [R, d]: the residual stream's gradient, walked back layer by layer.
template <typename A>
float* alloc_stream_grad(A& kept, const ModelConfig& c, int64_t R) {
  return kept.alloc(R * c.hidden_size);
}

// d(proj) [R, proj_width] of a layer: KV consumers add into their producer's.
template <typename A>
float* alloc_proj_grad(A& kept, const LayerPlan& lp, int64_t R) {
  return kept.alloc(R * lp.proj_width);
}

// A block link's skip gradient to the block's input (kept until the walk
// reaches it) and, gated, the gradient of the gate's pre-activation.
struct BlockLinkGrads {
  float* dskip = nullptr;
  float* dpre = nullptr;
};
template <typename A>
BlockLinkGrads alloc_block_link_grads(A& kept, A& work, const ModelConfig& c, int64_t R) {
  BlockLinkGrads g;
  g.dskip = kept.alloc_uninit(R * c.hidden_size);
  if (c.block_link != BlockLink::kResidual) g.dpre = work.alloc_uninit(R * c.hidden_size);
  return g;
}

// The FFN's: d(f) through the dropout mask (null without one), d(act),
// d(h2), and d(up) (GELU MLP) or d(gate | up) (SwiGLU).
struct FfnGrads {
  float* df = nullptr, *dact = nullptr, *dh2 = nullptr, *dup = nullptr, *dgu = nullptr;
};
template <typename A>
FfnGrads alloc_ffn_grads(A& work, const ModelConfig& c, int64_t R, bool masked) {
  const int64_t d = c.hidden_size, I = c.intermediate_size;
  FfnGrads g;
  if (masked) g.df = work.alloc_uninit(R * d);
  g.dact = work.alloc_uninit(R * I);
  g.dh2 = work.alloc_uninit(R * d);
  if (c.mlp_activation != MlpActivation::kSwiGlu)
    g.dup = work.alloc(R * I);
  else
    g.dgu = work.alloc_uninit(R * 2 * I);
  return g;
}

// The mixer output's: d(o) through the dropout mask (null without one), the
// branch gradients d(attn) / d(y) (zeroed where the norm_mean fusion adds
// into them) and the fusion's.
struct MixerGrads {
  float* d_o = nullptr, *dattn = nullptr, *dy = nullptr;
  float* dmix = nullptr, *dcat = nullptr, *dao = nullptr, *dmo = nullptr;
};
template <typename A>
MixerGrads alloc_mixer_grads(A& work, const ModelConfig& c, const LayerPlan& lp, int64_t R, bool masked) {
  const int64_t d = c.hidden_size, Wa = lp.dims.attn_out, di = lp.dims.d_inner;
  MixerGrads g;
  if (masked) g.d_o = work.alloc_uninit(R * d);
  const bool accumulated = lp.hybrid && c.fusion == Fusion::kNormMean;
  auto branch_grad = [&](int64_t n) { return accumulated ? work.alloc(n) : work.alloc_uninit(n); };
  if (lp.attn) g.dattn = branch_grad(R * Wa);
  if (lp.mamba) g.dy = branch_grad(R * di);
  if (!lp.hybrid) return g;
  switch (c.fusion) {
    case Fusion::kNormMean: g.dmix = work.alloc_uninit(R * di); break;
    case Fusion::kConcat: g.dcat = work.alloc_uninit(R * (Wa + di)); break;
    case Fusion::kMean:
    case Fusion::kLearnedBeta:
      g.dao = work.alloc(R * d);
      g.dmo = work.alloc(R * d);
      break;
  }
  return g;
}

// The Mamba branch's, all zeroed (the scan and GEMM backwards add into
// them): d(u), d(delta), d(x_proj out), d(B) / d(C) of the inner norms,
// d(dt), the inner norms' raw slice and its gradient, d(conv out).
struct MambaGrads {
  float* du = nullptr, *ddelta = nullptr, *dxdbl = nullptr, *dbn = nullptr, *dcn = nullptr;
  float* ddt = nullptr, *raw = nullptr, *draw = nullptr, *dxc = nullptr;
};
template <typename A>
MambaGrads alloc_mamba_grads(A& work, const ModelConfig& c, const LayerPlan& lp, int64_t R) {
  const int64_t di = lp.dims.d_inner, N = c.mamba_d_state, Rdt = c.dt_rank();
  const bool norms = lp.dt_norm >= 0;
  MambaGrads g;
  g.du = work.alloc(R * di);
  g.ddelta = work.alloc(R * di);
  g.dxdbl = work.alloc(R * lp.dims.x_proj_out);
  if (norms) {
    g.dbn = work.alloc(R * N);
    g.dcn = work.alloc(R * N);
  }
  g.ddt = work.alloc(R * Rdt);
  if (norms) {
    g.raw = work.alloc(R * std::max(Rdt, N));
    g.draw = work.alloc(R * std::max(Rdt, N));
  }
  g.dxc = work.alloc(R * di);
  return g;
}

// Every temporary of one layer's backward; dh is d(h), the input norm's output.
struct LayerGrads {
  FfnGrads ffn;
  MixerGrads mixer;
  MambaGrads mamba;
  float* dh = nullptr;
};
template <typename A>
LayerGrads alloc_layer_grads(A& work, const ModelConfig& c, const LayerPlan& lp, int64_t R, bool masked) {
  LayerGrads g;
  if (lp.ffn_norm >= 0) g.ffn = alloc_ffn_grads(work, c, R, masked);
  g.mixer = alloc_mixer_grads(work, c, lp, R, masked);
  if (lp.mamba) g.mamba = alloc_mamba_grads(work, c, lp, R);
  g.dh = work.alloc_uninit(R * c.hidden_size);
  return g;
}

}  // namespace hymba
