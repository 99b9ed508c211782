#include "model/memory_estimate.h"

#include <map>
#include <utility>

#include "core/error.h"
#include "core/sizing_arena.h"
#include "core/system_memory.h"
#include "model/arena_plan.h"
#include "model/arena_plan_backward.h"
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

using Sizing = SizingArena<float>;

// model_forward's two arenas: the main one, and the per-layer scratch of a
// forward with recompute.
struct RunArenas {
  Sizing main, scratch;
};

// One layer's full forward (its block link included), as model_forward runs
// it: training forwards with dropout, inference ones keeping the final SSM
// state (the decoder's prefill).
void size_layer_forward(Sizing& arena, const ModelPlan& plan, const LayerPlan& lp, const Activations<float>& acts,
                        bool training) {
  const ModelConfig& c = plan.cfg;
  LayerActs<float> a;  // every pointer stays null: sizes only
  for (const LayerStage stage : layer_stages(lp))
    alloc_forward_stage(arena, c, lp, stage, a, acts.B, acts.S, training && c.dropout > 0, !training);
}

// model_forward's allocations: with recompute each layer runs in the
// scratch, rewound after it, and keeps its output (and read-later K/V) in
// the main arena.
void size_forward(const ModelPlan& plan, Activations<float>& acts, bool training, bool recompute, RunArenas& ar) {
  const ModelConfig& c = plan.cfg;
  if (uses_rope_tables(plan)) alloc_rope_tables(ar.main, c, acts);
  alloc_embeddings(ar.main, c, acts);
  for (const LayerPlan& lp : plan.layers) {
    size_layer_forward(recompute ? ar.scratch : ar.main, plan, lp, acts, training);
    if (!recompute) continue;
    alloc_kept_layer<float>(ar.main, plan, lp, acts.R);
    ar.scratch.reset();
  }
  alloc_final_norm(ar.main, c, acts);
  alloc_logits(ar.main, c, acts);
}

// model_backward's (and, with recompute, model_backward_recompute's): each
// layer's temporaries in the scratch, after its forward run again there.
void size_backward(const ModelPlan& plan, const Activations<float>& acts, bool recompute, RunArenas& ar) {
  const ModelConfig& c = plan.cfg;
  alloc_lm_head_grads(ar.main, c, acts.B * acts.T_);
  alloc_meta_row_grad(ar.main, c, acts.R);
  alloc_stream_grad(ar.main, c, acts.R);
  for (auto it = plan.layers.rbegin(); it != plan.layers.rend(); ++it) {
    Sizing& work = recompute ? ar.scratch : ar.main;
    if (recompute) size_layer_forward(ar.scratch, plan, *it, acts, true);
    if (it->block_first >= 0) alloc_block_link_grads(ar.main, work, c, acts.R);
    alloc_layer_grads(work, c, *it, acts.R, c.dropout > 0);
    alloc_proj_grad(ar.main, *it, acts.R);
    if (recompute) ar.scratch.reset();
  }
}

// Beyond this many rows the arena plan's int64 sizes could wrap; no machine
// holds a run that size, so a lower bound serves the refusal.
constexpr double kMaxSizedRows = 1ull << 40;

}  // namespace

double activation_bytes(const ModelConfig& cfg, int64_t B, int64_t T, bool training, bool recompute) {
  const double M = static_cast<double>(cfg.num_memory_tokens), d = static_cast<double>(cfg.hidden_size);
  const double rows = static_cast<double>(B) * (static_cast<double>(T) + M);
  if (rows > kMaxSizedRows) {  // the logits (and their gradient), and the residual stream per layer
    const double tokens = static_cast<double>(B) * static_cast<double>(T);
    return (tokens * static_cast<double>(cfg.vocab_size) * (training ? 2 : 1) +
            rows * d * static_cast<double>(cfg.num_hidden_layers + 1)) * sizeof(float);
  }
  ParamTable table;  // declared only: shapes, no storage
  declare_parameters(cfg, table);
  const ModelPlan plan = make_plan(cfg, table);
  recompute = recompute && training;
  Activations<float> acts;
  acts.B = B;
  acts.T_ = T;
  acts.M = cfg.num_memory_tokens;
  acts.S = T + acts.M;
  acts.R = B * acts.S;
  RunArenas ar;
  size_forward(plan, acts, training, recompute, ar);
  if (training) size_backward(plan, acts, recompute, ar);
  return (ar.main.peak() + ar.scratch.peak()) * sizeof(float);
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
