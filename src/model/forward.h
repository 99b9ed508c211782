// The model's forward pass, written once for float (fast kernels) and double
// (reference kernels). It keeps every activation the backward pass needs.
// Layout: each sequence is [meta tokens | tokens], S = M + T positions, and
// R = B * S rows; meta rows pass through every layer and are dropped before
// the LM head.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "model/ops.h"
#include "model/plan.h"

namespace hymba {

template <typename T>
struct LayerActs {
  T* x_in = nullptr;     // [R, d] residual stream entering the layer
  T* h = nullptr;        // [R, d] input_layernorm(x_in)
  T* rstd_in = nullptr;  // [R]
  T* mean_in = nullptr;  // [R] (norm "layernorm" only)
  T* proj = nullptr;     // [R, proj_width] Q|K|V|x|z (Q, K rotated in place)
  T* attn = nullptr;     // [R, attn_out]
  T* lse = nullptr;      // [B, Hq, S]
  uint64_t attn_dropout_seed = 0;  // attention dropout's mask seed (0: no dropout)
  T* xc = nullptr;       // [R, di] conv output (pre-SiLU)
  T* u = nullptr;        // [R, di] SiLU(conv)
  T* xdbl = nullptr;     // [R, dt_rank + 2N] x_proj output
  T* dtn = nullptr;      // [R, dt_rank] dt input to dt_proj (normed when inner norms are on)
  T* bn = nullptr;       // [R, N] B (normed copy when inner norms are on, else null: read from xdbl)
  T* cn = nullptr;       // [R, N]
  T* rstd_dt = nullptr, *rstd_b = nullptr, *rstd_c = nullptr;
  T* delta = nullptr;    // [R, di] dt_proj output before bias/softplus
  T* y = nullptr;        // [R, di] scan output (gated)
  T* chunk_states = nullptr;
  T* h_last = nullptr;   // [B, di, N] SSM state after the last row (ForwardOptions::keep_final_ssm_state)
  // fusion
  T* na = nullptr, *rstd_na = nullptr, *nm = nullptr, *rstd_nm = nullptr, *mix = nullptr;  // norm_mean
  T* cat = nullptr;                                                                         // concat
  T* ao = nullptr, *mo = nullptr, *rstd_ao = nullptr, *rstd_mo = nullptr;                   // mean / beta
  T* o = nullptr;        // [R, d] mixer output (after dropout)
  T* mask1 = nullptr;    // dropout multipliers or null
  T* x_mid = nullptr;    // [R, d] x_in + o
  T* h2 = nullptr, *rstd2 = nullptr, *mean2 = nullptr;  // FFN input norm
  T* gu = nullptr;       // [R, 2I] gate | up (SwiGLU); [R, I] up with its bias (GELU MLP)
  T* act = nullptr;      // [R, I]
  T* f = nullptr;        // [R, d]
  T* mask2 = nullptr;
  T* x_out = nullptr;    // [R, d]
  // On a layer closing a linked sequential block (x_out is then the linked output):
  T* block_out = nullptr;  // [R, d] the block's output before the link
  T* link_gate = nullptr;  // [R, d] gated link: sigmoid(W x_block_in + b)
};

template <typename T>
struct Activations {
  int64_t B = 0, T_ = 0, M = 0, S = 0, R = 0;
  std::vector<int32_t> ids, targets;  // [B, T]
  bool has_targets = false;
  T* x0 = nullptr;      // [R, d] embeddings with meta rows
  // RoPE cos/sin of positions 0..S-1, [S, qk_head_dim / 2] each: computed once
  // per forward for every layer's Q and K, forward and backward (float only;
  // the float64 reference rotates from scratch).
  T* rope_cos = nullptr, *rope_sin = nullptr;
  std::vector<LayerActs<T>> layers;
  T* hf = nullptr, *rstd_f = nullptr, *mean_f = nullptr;  // [R, d] final norm
  T* hf_tok = nullptr;  // [B*T, d] token rows of hf (hf itself without meta tokens)
  T* logits = nullptr;  // [B*T, V]
};

struct ForwardOptions {
  double label_smoothing = 0.0;
  const Rng* dropout_rng = nullptr;  // non-null: training with dropout (cfg.dropout > 0)
  // Also keep each Mamba layer's final SSM state in LayerActs::h_last (float
  // only): the decoder's prefill starts generation from it.
  bool keep_final_ssm_state = false;
  // Stop after the final norm (acts.hf; no LM head, no logits, no loss): the
  // features a sequence classifier pools. Targets must then be null.
  bool hidden_only = false;
  // With hidden_only and a scratch arena given to model_forward: each layer
  // runs in the scratch arena, which is rewound after it; only its output
  // (and the K/V projections later KV-sharing layers read) is kept. Peak
  // activation memory is then about one layer's, for inference that needs no
  // backward (frozen backbones); acts.layers hold only x_out and proj.
  bool release_activations = false;
  // Training with recomputed activations (`train --recompute`): as with
  // release_activations, each layer runs in the scratch arena and only its
  // input, output and read-later K/V projections are kept; the backward pass
  // runs each layer's forward again (recompute_layer) just before going back
  // through it. Peak activation memory is then the kept inputs plus about one
  // layer's activations, for about one more forward's time. The gradients are
  // bit-identical: every kernel, dropout mask included, is deterministic.
  bool recompute = false;
};

// out[rows, OC] = in[rows, C] @ w[OC, C]^T with row strides. The layer pieces
// below take one so the decoder can run them with a matrix-vector product for
// single rows (or with quantized weights); empty means Ops<T>::matmul.
template <typename T>
using LinearFn = std::function<void(T* out, int64_t ld_out, const T* in, int64_t ld_in, const T* w, int64_t rows,
                                    int64_t C, int64_t OC)>;

// The residual-stream norm the config picks (input, FFN and final norms):
// RMSNorm with weight `w`, or LayerNorm with weight `w` and bias `b` (offsets
// into params; b may be -1). mean and rstd may be null when not training;
// mean is written only by LayerNorm.
template <typename T>
void stream_norm(const ModelConfig& c, T* out, T* mean, T* rstd, const T* x, const T* params, int64_t w, int64_t b,
                 int64_t R, int64_t d);

// Q [rows, width] (row stride ld_q) times cfg.query_prescale(), after RoPE:
// the attention kernels always divide by sqrt(qk_head_dim), so attention_scale
// "none" pre-multiplies Q by it rather than teaching every kernel a new scale.
template <typename T>
void scale_queries(const ModelConfig& c, T* q, int64_t ld_q, int64_t rows, int64_t width);

// One layer's row-wise pieces over R rows, as model_forward runs them; the
// decoder runs them on one row per sequence. Sequence mixing (attention, conv,
// scan) sits between them and is the caller's.
// input_layernorm(a.x_in) and the projections into a.proj [Q | K | V | x | z] (RoPE not applied).
template <typename T>
void layer_input_projection(const ModelPlan& plan, const LayerPlan& lp, const T* params, BasicArena<T>& arena,
                            LayerActs<T>& a, int64_t R, LinearFn<T> linear = nullptr);
// From a.u: x_proj, the inner norms and dt_proj (a.xdbl, a.dtn, a.bn, a.cn, a.delta).
template <typename T>
void layer_mamba_projections(const ModelPlan& plan, const LayerPlan& lp, const T* params, BasicArena<T>& arena,
                             LayerActs<T>& a, int64_t R, LinearFn<T> linear = nullptr);
// The branch outputs (a.attn, a.y) fused into a.o [R, d].
template <typename T>
void layer_mixer_output(const ModelPlan& plan, const LayerPlan& lp, const T* params, BasicArena<T>& arena,
                        LayerActs<T>& a, int64_t R, LinearFn<T> linear = nullptr);
// Residual add (with dropout when opt asks), then the FFN: a.x_mid, a.x_out.
template <typename T>
void layer_residual_ffn(const ModelPlan& plan, const LayerPlan& lp, const T* params, const ForwardOptions& opt,
                        BasicArena<T>& arena, LayerActs<T>& a, int64_t R, LinearFn<T> linear = nullptr);

// On a layer closing a linked block (lp.block_first >= 0): joins a.x_out with
// the block input `block_in` by the config's link; a.x_out becomes the result.
template <typename T>
void layer_block_link(const ModelPlan& plan, const LayerPlan& lp, const T* params, BasicArena<T>& arena,
                      LayerActs<T>& a, const T* block_in, int64_t R, LinearFn<T> linear = nullptr);

// The selective-scan inputs of a layer, as the forward built them.
template <typename T>
ScanParams<T> layer_scan_params(const ModelPlan& plan, const LayerPlan& lp, const T* params, const LayerActs<T>& a,
                                int64_t B, int64_t S);

// Runs layer lp's forward again from its kept input, after a forward with
// opt.recompute, into arena (the block link too, on a layer closing one):
// acts.layers[lp.index] then holds every activation a plain forward keeps.
template <typename T>
void recompute_layer(const ModelPlan& plan, const LayerPlan& lp, const T* params, const ForwardOptions& opt,
                     BasicArena<T>& arena, Activations<T>& acts);

// Runs the model on ids [B, T] (targets may be null). `params` is the value
// block of the parameter table (as T). Activations are allocated from arena,
// which the caller resets between steps.
template <typename T>
LossStats model_forward(const ModelPlan& plan, const T* params, const int32_t* ids, const int32_t* targets,
                        int64_t B, int64_t T_, const ForwardOptions& opt, BasicArena<T>& arena, Activations<T>& acts,
                        BasicArena<T>* scratch = nullptr);

}  // namespace hymba
