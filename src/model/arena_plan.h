// The arena's plan: what each piece of the graph takes from the activation
// arena, written once. model_forward, the layer pieces and the backward
// allocate through these functions, then compute into the buffers; the
// memory estimate (model/memory_estimate.cpp) runs the same functions on a
// SizingArena (core/sizing_arena.h), so it counts every buffer the arena
// holds and cannot drift from it. A is the arena: BasicArena<T>, or
// SizingArena<T> (every pointer then null). Sizes are in elements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "model/forward.h"
#include "model/layer_walk.h"

namespace hymba {

// Whether a float forward computes RoPE tables: some layer attends, with RoPE.
inline bool uses_rope_tables(const ModelPlan& plan) {
  bool any_attention = false;
  for (const LayerPlan& lp : plan.layers) any_attention = any_attention || lp.attn;
  return any_attention && plan.cfg.rope;
}

// Whether a later layer reads lp's K/V projections (KV sharing): a forward
// that releases its activations keeps them.
inline bool kv_read_later(const ModelPlan& plan, const LayerPlan& lp) {
  for (const LayerPlan& later : plan.layers)
    if (later.index > lp.index && later.attn && later.producer_layer == lp.index) return true;
  return false;
}

// ---- forward ----

// RoPE cos / sin of positions 0..S-1, [S, qk_head_dim / 2] each.
template <typename T, typename A>
void alloc_rope_tables(A& arena, const ModelConfig& c, Activations<T>& acts) {
  const int64_t half = c.qk_head_dim / 2;
  acts.rope_cos = arena.alloc_uninit(acts.S * half);
  acts.rope_sin = arena.alloc_uninit(acts.S * half);
}

// x0 [R, d]: embeddings with meta rows.
template <typename T, typename A>
void alloc_embeddings(A& arena, const ModelConfig& c, Activations<T>& acts) {
  acts.x0 = arena.alloc_uninit(acts.R * c.hidden_size);
}

// The input norm and the projection buffer [R, proj_width].
template <typename T, typename A>
void alloc_input_projection(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t R) {
  a.h = arena.alloc_uninit(R * c.hidden_size);
  a.rstd_in = arena.alloc_uninit(R);
  if (c.norm == NormKind::kLayerNorm) a.mean_in = arena.alloc_uninit(R);
  a.proj = arena.alloc_uninit(R * lp.proj_width);
}

// Full-sequence attention over B sequences of S rows: output and log-sum-exp.
template <typename T, typename A>
void alloc_attention(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t B, int64_t S) {
  a.attn = arena.alloc_uninit(B * S * lp.dims.attn_out);
  a.lse = arena.alloc_uninit(B * c.num_attention_heads * S);
}

// The Mamba branch's conv output and its SiLU [R, d_inner] each.
template <typename T, typename A>
void alloc_mamba_conv(A& arena, const LayerPlan& lp, LayerActs<T>& a, int64_t R) {
  a.xc = arena.alloc_uninit(R * lp.dims.d_inner);
  a.u = arena.alloc_uninit(R * lp.dims.d_inner);
}

// x_proj's output, the dt / B / C inputs (normed copies with inner norms)
// and dt_proj's. Returns the scratch the inner norms copy each raw slice
// into (null without inner norms).
template <typename T, typename A>
T* alloc_mamba_projections(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t R) {
  const int64_t N = c.mamba_d_state, Rdt = c.dt_rank();
  a.xdbl = arena.alloc_uninit(R * lp.dims.x_proj_out);
  T* raw = nullptr;
  if (lp.dt_norm >= 0) {
    raw = arena.alloc_uninit(R * std::max(Rdt, N));
    for (auto [normed, rstd, width] : {std::tuple{&a.dtn, &a.rstd_dt, Rdt}, std::tuple{&a.bn, &a.rstd_b, N},
                                       std::tuple{&a.cn, &a.rstd_c, N}}) {
      *normed = arena.alloc_uninit(R * width);
      *rstd = arena.alloc_uninit(R);
    }
  } else {
    a.dtn = arena.alloc_uninit(R * Rdt);
  }
  a.delta = arena.alloc_uninit(R * lp.dims.d_inner);
  return raw;
}

// The full-sequence scan's output and chunk states, and (keep_final_state,
// float only) the state after the last row.
template <typename T, typename A>
void alloc_mamba_scan(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t B, int64_t S,
                      bool keep_final_state) {
  const int64_t di = lp.dims.d_inner, N = c.mamba_d_state;
  a.y = arena.alloc_uninit(B * S * di);
  a.chunk_states = arena.alloc(B * cpu::scan_num_chunks(S) * di * N);
  if (keep_final_state) a.h_last = arena.alloc(B * di * N);
}

// The mixer output o [R, d] and the fusion's buffers. Returns the learned-
// beta fusion's normed Mamba branch (null for every other fusion).
template <typename T, typename A>
T* alloc_mixer_output(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t R) {
  const int64_t d = c.hidden_size, Wa = lp.dims.attn_out, di = lp.dims.d_inner;
  a.o = arena.alloc_uninit(R * d);
  if (!lp.hybrid) return nullptr;
  switch (c.fusion) {
    case Fusion::kNormMean:
      a.na = arena.alloc_uninit(R * Wa);
      a.rstd_na = arena.alloc_uninit(R);
      a.nm = arena.alloc_uninit(R * di);
      a.rstd_nm = arena.alloc_uninit(R);
      a.mix = arena.alloc_uninit(R * di);
      return nullptr;
    case Fusion::kConcat: a.cat = arena.alloc_uninit(R * (Wa + di)); return nullptr;
    case Fusion::kMean:
    case Fusion::kLearnedBeta: break;
  }
  a.ao = arena.alloc_uninit(R * d);
  a.mo = arena.alloc_uninit(R * d);
  if (c.fusion == Fusion::kMean) return nullptr;
  T* nb = arena.alloc_uninit(R * d);
  a.rstd_ao = arena.alloc_uninit(R);
  a.rstd_mo = arena.alloc_uninit(R);
  return nb;
}

// The residual sums, the FFN's buffers and (dropout) both dropout masks;
// without an FFN x_out is x_mid.
template <typename T, typename A>
void alloc_residual_ffn(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerActs<T>& a, int64_t R,
                        bool dropout) {
  const int64_t d = c.hidden_size, I = c.intermediate_size;
  if (dropout) a.mask1 = arena.alloc_uninit(R * d);
  a.x_mid = arena.alloc_uninit(R * d);
  if (lp.ffn_norm < 0) {
    a.x_out = a.x_mid;
    return;
  }
  a.h2 = arena.alloc_uninit(R * d);
  a.rstd2 = arena.alloc_uninit(R);
  if (c.norm == NormKind::kLayerNorm) a.mean2 = arena.alloc_uninit(R);
  a.gu = arena.alloc_uninit(R * (c.mlp_activation == MlpActivation::kSwiGlu ? 2 * I : I));
  a.act = arena.alloc_uninit(R * I);
  a.f = arena.alloc_uninit(R * d);
  if (dropout) a.mask2 = arena.alloc_uninit(R * d);
  a.x_out = arena.alloc_uninit(R * d);
}

// A block link's output (x_out moves to block_out) and the gated link's gate.
template <typename T, typename A>
void alloc_block_link(A& arena, const ModelConfig& c, LayerActs<T>& a, int64_t R) {
  a.block_out = a.x_out;
  a.x_out = arena.alloc_uninit(R * c.hidden_size);
  if (c.block_link != BlockLink::kResidual) a.link_gate = arena.alloc_uninit(R * c.hidden_size);
}

// What the full forward's stage `stage` of layer lp allocates, its
// sequence mixers included (model_forward's attention and Mamba).
template <typename T, typename A>
void alloc_forward_stage(A& arena, const ModelConfig& c, const LayerPlan& lp, LayerStage stage, LayerActs<T>& a,
                         int64_t B, int64_t S, bool dropout, bool keep_final_state) {
  const int64_t R = B * S;
  switch (stage) {
    case LayerStage::kInputProjection: alloc_input_projection(arena, c, lp, a, R); break;
    case LayerStage::kAttention: alloc_attention(arena, c, lp, a, B, S); break;
    case LayerStage::kMamba:
      alloc_mamba_conv(arena, lp, a, R);
      alloc_mamba_projections(arena, c, lp, a, R);
      alloc_mamba_scan(arena, c, lp, a, B, S, keep_final_state);
      break;
    case LayerStage::kMixerOutput: alloc_mixer_output(arena, c, lp, a, R); break;
    case LayerStage::kResidualFfn: alloc_residual_ffn(arena, c, lp, a, R, dropout); break;
    case LayerStage::kBlockLink: alloc_block_link(arena, c, a, R); break;
  }
}

// What a forward that releases its activations keeps of layer lp in the
// main arena: its output and, when a later layer reads them, its projections.
template <typename T>
struct KeptLayer {
  T* x_out = nullptr;
  T* proj = nullptr;
};
template <typename T, typename A>
KeptLayer<T> alloc_kept_layer(A& arena, const ModelPlan& plan, const LayerPlan& lp, int64_t R) {
  KeptLayer<T> k;
  k.x_out = arena.alloc_uninit(R * plan.cfg.hidden_size);
  if (kv_read_later(plan, lp)) k.proj = arena.alloc_uninit(R * lp.proj_width);
  return k;
}

// The final norm's output [R, d] and statistics.
template <typename T, typename A>
void alloc_final_norm(A& arena, const ModelConfig& c, Activations<T>& acts) {
  acts.hf = arena.alloc_uninit(acts.R * c.hidden_size);
  acts.rstd_f = arena.alloc_uninit(acts.R);
  acts.mean_f = c.norm == NormKind::kLayerNorm ? arena.alloc_uninit(acts.R) : nullptr;
}

// The LM head's input (hf's token rows: hf itself without meta tokens) and the logits.
template <typename T, typename A>
void alloc_logits(A& arena, const ModelConfig& c, Activations<T>& acts) {
  const int64_t BT = acts.B * acts.T_;
  acts.hf_tok = acts.M == 0 ? acts.hf : arena.alloc_uninit(BT * c.hidden_size);
  acts.logits = arena.alloc_uninit(BT * c.vocab_size);
}

}  // namespace hymba
