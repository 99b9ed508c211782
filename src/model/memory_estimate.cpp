#include "model/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/system_memory.h"
#include "kernels/cpu/selective_scan.h"
#include "model/layer_walk.h"
#include "model/layout.h"
#include "model/plan.h"

namespace hymba {

double MemoryEstimate::total() const {
  double sum = 0;
  for (const Part& p : parts) sum += p.bytes;
  return sum;
}

void MemoryEstimate::add(std::string what, double bytes, std::string lower) {
  parts.push_back({std::move(what), bytes, std::move(lower)});
}

void MemoryEstimate::add(const MemoryEstimate& other) {
  parts.insert(parts.end(), other.parts.begin(), other.parts.end());
}

void MemoryEstimate::require_available(const std::string& action) const {
  const double need = total();
  const int64_t have = available_memory_bytes();
  if (have < 0 || need <= static_cast<double>(have)) return;
  std::string detail;
  const Part* largest = nullptr;
  for (const Part& p : parts) {
    if (p.bytes <= 0) continue;
    detail += (detail.empty() ? "" : ", ") + p.what + " " + format_bytes(p.bytes);
    if (largest == nullptr || p.bytes > largest->bytes) largest = &p;
  }
  fail(action, " needs about ", format_bytes(need), " (", detail, ") but only ", format_bytes(static_cast<double>(have)),
       " is available; lower ", largest != nullptr ? largest->lower : std::string("the sizes"));
}

MemoryEstimate parameter_memory(const ParamTable& table, bool training) {
  // The largest group says which config field to lower.
  std::map<std::string, double> by_group;
  for (const ParamInfo& p : table.rows()) by_group[p.group] += static_cast<double>(p.shape.numel());
  std::string biggest;
  for (const auto& [group, n] : by_group)
    if (biggest.empty() || n > by_group[biggest]) biggest = group;
  const std::string lower = biggest == "embedding" ? "the config's vocab_size or hidden_size"
                            : biggest == "ffn"     ? "the config's intermediate_size, hidden_size or num_hidden_layers"
                                                   : "the config's hidden_size or num_hidden_layers";
  const double bytes = static_cast<double>(table.total_floats()) * sizeof(float);
  MemoryEstimate m;
  m.add("parameters", bytes, lower);
  if (training) m.add("gradients and AdamW moments", 3 * bytes, lower);
  return m;
}

double parameter_floats(const ModelConfig& cfg) {
  const double d = static_cast<double>(cfg.hidden_size), V = static_cast<double>(cfg.vocab_size);
  const double K = static_cast<double>(cfg.mamba_d_conv), N = static_cast<double>(cfg.mamba_d_state);
  const double R = static_cast<double>(cfg.dt_rank()), I = static_cast<double>(cfg.intermediate_size);
  const bool hf_mamba = uses_hf_mamba_names(cfg);
  double n = V * d + static_cast<double>(cfg.num_memory_tokens) * d;  // embeddings, meta tokens
  const double norm_floats = cfg.norm == NormKind::kLayerNorm ? 2 * d : d;  // weight (+ bias)
  if (cfg.position_embedding == PositionEmbedding::kLearned)
    n += static_cast<double>(cfg.max_position_embeddings) * d;  // learned positions
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerDims ld = layer_dims(cfg, l);
    const bool attn = cfg.has_attention(l), mamba = cfg.has_mamba(l), hybrid = attn && mamba;
    const bool fused = hybrid && cfg.proj_style == ProjStyle::kFused;
    const double di = static_cast<double>(ld.d_inner), ao = static_cast<double>(ld.attn_out);
    n += norm_floats;  // input norm
    if (fused) n += static_cast<double>(ld.in_proj_rows) * d;
    if (attn && !fused) n += static_cast<double>(ld.q_width + ld.k_width + ld.v_width) * d;
    if (mamba) {
      if (!fused) n += 2 * di * d;                                              // in_proj
      n += di * K + (cfg.mamba_conv_bias ? di : 0);                             // conv
      n += static_cast<double>(ld.x_proj_out) * di + di * R + di + di * N + di;  // x_proj, dt_proj, A_log, D
      if (cfg.mamba_inner_layernorms && !hf_mamba) n += R + 2 * N;
    }
    if (attn && cfg.attention_out_bias) n += d;  // o_proj bias
    if (attn && !fused && cfg.attention_qkv_bias) n += static_cast<double>(ld.q_width + ld.k_width + ld.v_width);
    if (hybrid) {
      switch (cfg.fusion) {
        case Fusion::kNormMean: n += ao + di + d * di; break;
        case Fusion::kConcat: n += d * (ao + di); break;
        case Fusion::kLearnedBeta: n += 2 * d; [[fallthrough]];
        case Fusion::kMean: n += d * ao + d * di; break;
      }
    } else if (attn) {
      n += d * ao;
    } else if (mamba) {
      n += d * di;
    }
    if (cfg.intermediate_size > 0 && !hf_mamba) {
      const bool gelu = cfg.mlp_activation != MlpActivation::kSwiGlu;  // up/down only, no gate
      n += norm_floats + (gelu ? 2 : 3) * I * d + (cfg.mlp_bias ? I + d : 0);
    }
    if (cfg.block_link == BlockLink::kGated && cfg.closes_linked_block(l) && !hf_mamba) n += d * d + d;
  }
  n += norm_floats;                          // final norm
  if (!cfg.tie_word_embeddings) n += V * d;  // lm_head
  return n;
}

MemoryEstimate parameter_memory(const ModelConfig& cfg, bool training) {
  const double d = static_cast<double>(cfg.hidden_size);
  const double embed = static_cast<double>(cfg.vocab_size) * d * (cfg.tie_word_embeddings ? 1 : 2);
  const double bytes = parameter_floats(cfg) * sizeof(float);
  // The embeddings, or the layers: which field to lower.
  const std::string lower = embed * sizeof(float) * 2 > bytes ? "the config's vocab_size or hidden_size"
                                                              : "the config's hidden_size or num_hidden_layers";
  MemoryEstimate m;
  m.add("parameters", bytes, lower);
  if (training) m.add("gradients and AdamW moments", 3 * bytes, lower);
  return m;
}

namespace {

// Floats of arena allocations, each rounded up to a 64-byte line as the arena does.
struct ArenaFloats {
  double n = 0;
  void alloc(double k) { n += std::ceil(std::max(k, 1.0) / 16.0) * 16.0; }
};

// The sizes every piece below reads.
struct RunShape {
  double d, V, M, S, R, BT, N, Rdt, I, Hq, B;
  bool training, dropout, layernorm, swiglu;
  RunShape(const ModelConfig& cfg, int64_t B_, int64_t T, bool train)
      : d(static_cast<double>(cfg.hidden_size)), V(static_cast<double>(cfg.vocab_size)),
        M(static_cast<double>(cfg.num_memory_tokens)), S(static_cast<double>(T) + M),
        R(static_cast<double>(B_) * S), BT(static_cast<double>(B_) * static_cast<double>(T)),
        N(static_cast<double>(cfg.mamba_d_state)), Rdt(static_cast<double>(cfg.dt_rank())),
        I(static_cast<double>(cfg.intermediate_size)), Hq(static_cast<double>(cfg.num_attention_heads)),
        B(static_cast<double>(B_)), training(train), dropout(train && cfg.dropout > 0),
        layernorm(cfg.norm == NormKind::kLayerNorm),  // a mean [R] beside each stream norm's rstd
        swiglu(cfg.mlp_activation == MlpActivation::kSwiGlu) {}  // gate | up [R, 2I]; GELU: up [R, I]
};

// The floats one forward stage allocates (model/forward.cpp).
void stage_forward_floats(LayerStage stage, const ModelConfig& cfg, const LayerPlan& lp, const RunShape& s,
                          ArenaFloats& f) {
  const double R = s.R, d = s.d, N = s.N, Rdt = s.Rdt, I = s.I;
  const double W = static_cast<double>(lp.proj_width), di = static_cast<double>(lp.dims.d_inner);
  const double Wa = static_cast<double>(lp.dims.attn_out), xw = static_cast<double>(lp.dims.x_proj_out);
  switch (stage) {
    case LayerStage::kInputProjection:
      f.alloc(R * d);
      f.alloc(R);
      if (s.layernorm) f.alloc(R);
      f.alloc(R * W);
      break;
    case LayerStage::kAttention:
      f.alloc(R * Wa);
      f.alloc(R * s.Hq);
      break;
    case LayerStage::kMamba:
      f.alloc(R * di);
      f.alloc(R * di);
      f.alloc(R * xw);
      if (lp.dt_norm >= 0) {
        f.alloc(R * std::max(Rdt, N));
        for (double width : {Rdt, N, N}) {
          f.alloc(R * width);
          f.alloc(R);
        }
      } else {
        f.alloc(R * Rdt);
      }
      f.alloc(R * di);  // delta
      f.alloc(R * di);  // y
      f.alloc(s.B * static_cast<double>(cpu::scan_num_chunks(static_cast<int64_t>(s.S))) * di * N);
      if (!s.training) f.alloc(s.B * di * N);  // inference keeps the final SSM state
      break;
    case LayerStage::kMixerOutput:
      f.alloc(R * d);  // o
      if (!lp.hybrid) break;
      switch (cfg.fusion) {
        case Fusion::kNormMean:
          for (double n : {R * Wa, R, R * di, R, R * di}) f.alloc(n);
          break;
        case Fusion::kConcat: f.alloc(R * (Wa + di)); break;
        case Fusion::kMean: f.alloc(R * d); f.alloc(R * d); break;
        case Fusion::kLearnedBeta:
          for (double n : {R * d, R * d, R * d, R, R}) f.alloc(n);
          break;
      }
      break;
    case LayerStage::kResidualFfn:
      if (s.dropout) f.alloc(R * d);
      f.alloc(R * d);  // x_mid
      if (lp.ffn_norm < 0) break;
      for (double n : {R * d, R}) f.alloc(n);
      if (s.layernorm) f.alloc(R);
      for (double n : {R * (s.swiglu ? 2 : 1) * I, R * I, R * d, R * d}) f.alloc(n);
      if (s.dropout) f.alloc(R * d);
      break;
    case LayerStage::kBlockLink: break;  // not counted: the link's output and gate, [R, d] each
  }
}

// The floats one stage's backward allocates as temporaries (model/backward.cpp).
void stage_backward_floats(LayerStage stage, const ModelConfig& cfg, const LayerPlan& lp, const RunShape& s,
                           ArenaFloats& f) {
  const double R = s.R, d = s.d, N = s.N, Rdt = s.Rdt, I = s.I;
  const double di = static_cast<double>(lp.dims.d_inner);
  const double Wa = static_cast<double>(lp.dims.attn_out), xw = static_cast<double>(lp.dims.x_proj_out);
  switch (stage) {
    case LayerStage::kResidualFfn:
      if (lp.ffn_norm >= 0) {
        if (s.dropout) f.alloc(R * d);
        for (double n : {R * I, R * d, R * (s.swiglu ? 2 : 1) * I}) f.alloc(n);
      }
      if (s.dropout) f.alloc(R * d);
      break;
    case LayerStage::kMixerOutput:  // the branch gradients, then the fusion's
      if (lp.attn) f.alloc(R * Wa);
      if (lp.mamba) f.alloc(R * di);
      if (!lp.hybrid) break;
      switch (cfg.fusion) {
        case Fusion::kNormMean: f.alloc(R * di); break;
        case Fusion::kConcat: f.alloc(R * (Wa + di)); break;
        case Fusion::kMean:
        case Fusion::kLearnedBeta: f.alloc(R * d); f.alloc(R * d); break;
      }
      break;
    case LayerStage::kMamba:
      for (double n : {R * di, R * di, R * xw}) f.alloc(n);
      if (lp.dt_norm >= 0) {
        f.alloc(R * N);
        f.alloc(R * N);
      }
      f.alloc(R * Rdt);
      if (lp.dt_norm >= 0) {
        f.alloc(R * std::max(Rdt, N));
        f.alloc(R * std::max(Rdt, N));
      }
      f.alloc(R * di);  // dxc
      break;
    case LayerStage::kInputProjection: f.alloc(R * d); break;  // dh
    case LayerStage::kAttention: break;  // writes into the projection gradient
    case LayerStage::kBlockLink: break;  // not counted: the skip and gate gradients, [R, d] each
  }
}

// One layer's forward activations: its stages' (model/layer_walk.h).
double layer_forward_floats(const ModelConfig& cfg, const LayerPlan& lp, const RunShape& s) {
  ArenaFloats f;
  for (const LayerStage stage : layer_stages(lp)) stage_forward_floats(stage, cfg, lp, s, f);
  return f.n;
}

// One layer's backward temporaries, without its projection gradient (which
// outlives the layer: KV consumers add into it).
double layer_backward_floats(const ModelConfig& cfg, const LayerPlan& lp, const RunShape& s) {
  ArenaFloats f;
  for (const LayerStage stage : layer_stages(lp)) stage_backward_floats(stage, cfg, lp, s, f);
  return f.n;
}

}  // namespace

double activation_bytes(const ModelConfig& cfg, int64_t B, int64_t T, bool training, bool recompute) {
  ParamTable table;  // declared only: shapes, no storage
  declare_parameters(cfg, table);
  const ModelPlan plan = make_plan(cfg, table);
  const RunShape s(cfg, B, T, training);
  recompute = recompute && training;
  // The main arena (everything, or with recompute what outlives a layer)
  // and, with recompute, the scratch's largest layer.
  ArenaFloats main;
  double scratch = 0;
  bool any_attention = false;
  for (const LayerPlan& lp : plan.layers) any_attention = any_attention || lp.attn;
  if (any_attention && cfg.rope) {  // the RoPE cos / sin tables
    main.alloc(s.S * static_cast<double>(cfg.qk_head_dim / 2));
    main.alloc(s.S * static_cast<double>(cfg.qk_head_dim / 2));
  }
  main.alloc(s.R * s.d);  // x0
  for (const LayerPlan& lp : plan.layers) {
    if (!recompute) {
      main.n += layer_forward_floats(cfg, lp, s);
      continue;
    }
    main.alloc(s.R * s.d);  // the kept output
    bool read_later = false;
    for (const LayerPlan& later : plan.layers)
      read_later = read_later || (later.index > lp.index && later.attn && later.producer_layer == lp.index);
    if (read_later) main.alloc(s.R * static_cast<double>(lp.proj_width));
    scratch = std::max(scratch, layer_forward_floats(cfg, lp, s) + layer_backward_floats(cfg, lp, s));
  }
  main.alloc(s.R * s.d);  // hf
  main.alloc(s.R);
  if (s.layernorm) main.alloc(s.R);
  if (s.M > 0) main.alloc(s.BT * s.d);
  main.alloc(s.BT * s.V);  // logits
  if (training) {
    main.alloc(s.BT * s.V);  // dlogits
    main.alloc(s.BT * s.d);
    if (s.M > 0) main.alloc(s.R * s.d);
    main.alloc(s.R * s.d);  // dx
    for (const LayerPlan& lp : plan.layers) {
      if (!recompute) main.n += layer_backward_floats(cfg, lp, s);
      main.alloc(s.R * static_cast<double>(lp.proj_width));  // this layer's projection gradient
    }
  }
  return (main.n + scratch) * sizeof(float);
}

MemoryEstimate model_run_memory(const ModelConfig& cfg, int64_t B, int64_t T, bool training,
                                const std::string& batch_flag, const std::string& len_flag, bool recompute) {
  ParamTable table;
  declare_parameters(cfg, table);
  MemoryEstimate m = parameter_memory(table, training);
  m.add("activations for " + batch_flag + " " + std::to_string(B) + " x " + len_flag + " " + std::to_string(T),
        activation_bytes(cfg, B, T, training, recompute), batch_flag + " or " + len_flag);
  return m;
}

}  // namespace hymba
