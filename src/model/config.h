// Model configuration: one struct reaching every architecture the seeds and
// the Hymba paper compare (pure attention, pure Mamba, hybrid heads), read
// from JSON with field names close to the official HF Hymba config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba {

enum class MixerKind { kAttention, kMamba, kHybrid };
// fused: one in_proj gives Q,K,V,x,z (official). separate: q/k/v projections
// beside an HF-style Mamba in_proj giving x,z (seed 001 "mine", seed 002).
enum class ProjStyle { kFused, kSeparate };
// norm_mean: out_proj((norm_a(a) + norm_m(m)) / 2)                 (official)
// learned_beta: beta_a * norm(o_a(a)) + beta_m * norm(o_m(m))      (seed 001)
// mean: (o_a(a) + o_m(m)) / 2                                      (seed 002)
// concat: o([a | m])                                               (seed 002)
enum class Fusion { kNormMean, kLearnedBeta, kMean, kConcat };
// Sequential hybrids (seed 004): what joins a block's output y to its input x.
// null: y (a plain stack); residual: y + x; gated: g*y + (1-g)*x with
// g = sigmoid(W x + b) per channel (a highway gate).
enum class BlockLink { kNull, kResidual, kGated };
// How fresh parameters are drawn; model/layout.cpp gives every tensor its rule.
// normal: N(0, initializer_range), residual output projections / sqrt(2 x layers) (GPT-2 / HF);
// torch: PyTorch's module defaults (nn.Linear U(+-1/sqrt(fan_in)), nn.Embedding N(0, 1));
// mamba_ssm: MambaLMHeadModel's _init_weights (embeddings N(0, initializer_range), Linear
// biases 0, output projections U(+-1/sqrt(fan_in)) / sqrt(residuals per layer x layers)).
enum class InitScheme { kNormal, kTorch, kMambaSsm };
// The residual-stream norms (input, FFN and final): RMSNorm (Llama / Hymba) or
// LayerNorm with weight and bias (GPT-2 / GPT-Neo).
enum class NormKind { kRmsNorm, kLayerNorm };
// The FFN: SwiGLU (gate, up, down) or a GELU MLP (up, GELU, down): gelu is the
// tanh approximation GPT-2 / GPT-Neo use (HF "gelu_new"), gelu_erf the exact one.
enum class MlpActivation { kSwiGlu, kGelu, kGeluErf };
// Positions: rotary on Q/K, a learned absolute table added to the embeddings
// (GPT-2 / GPT-Neo "wpe"), or none.
enum class PositionEmbedding { kRope, kLearned, kNone };
// Attention logits: q.k / sqrt(qk_head_dim) (the usual scaling), or q.k
// unscaled (GPT-Neo, whose published weights were trained that way).
enum class AttentionScale { kInvSqrtD, kNone };
inline constexpr const char* kInitSchemeNames = "normal, torch, mamba_ssm";

const char* to_string(MixerKind k);
const char* to_string(ProjStyle s);
const char* to_string(Fusion f);
const char* to_string(BlockLink l);
const char* to_string(InitScheme s);
const char* to_string(NormKind k);
const char* to_string(MlpActivation a);
const char* to_string(PositionEmbedding p);
const char* to_string(AttentionScale s);
// False when `name` is not one of kInitSchemeNames (callers name the field or flag).
bool parse_init_scheme(const std::string& name, InitScheme& out);

struct ModelConfig {
  // --- global
  int64_t vocab_size = 256;
  int64_t hidden_size = 128;        // d_model
  int64_t num_hidden_layers = 2;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  double dropout = 0.0;             // residual-branch dropout during training
  double initializer_range = 0.02;  // std of normal init (normal: all dense tensors; mamba_ssm: embeddings)
  InitScheme init_scheme = InitScheme::kNormal;
  NormKind norm = NormKind::kRmsNorm;  // input, FFN and final norms (fusion / inner norms stay RMSNorm)
  double layer_norm_eps = 1e-5;        // eps of the LayerNorms (norm "layernorm")
  double norm_eps() const { return norm == NormKind::kLayerNorm ? layer_norm_eps : rms_norm_eps; }
  // Per-layer mixer; one entry per layer after parsing (JSON accepts one string for all).
  std::vector<MixerKind> layer_types;

  // --- attention
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 4;
  int64_t qk_head_dim = 0;  // 0: derived (hidden / heads, or from the ratio)
  int64_t v_head_dim = 0;   // 0: derived (= qk_head_dim; fused norm_mean: d_inner / heads)
  double rope_theta = 10000.0;
  // rope false: no rotary embedding at all. rope_type "ntk": the released
  // Hymba's fixed NTK scaling, base = rope_theta * (2 * max_position_embeddings
  // / orig_max_position_embeddings - 1)^(D / (D - 2)) with D = qk_head_dim.
  // position_embedding: rope (rope = true), learned or none (rope = false);
  // kept in step with `rope` by from_json. learned: a [max_position_embeddings,
  // d] table, row s added to sequence row s (meta tokens take rows 0..M-1).
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  bool rope = true;
  bool rope_ntk = false;                     // JSON rope_type: "default" | "ntk"
  int64_t max_position_embeddings = 0;       // ntk, and the learned table's rows
  int64_t orig_max_position_embeddings = 0;  // ntk only
  std::vector<int64_t> global_attn_idx;  // layers with full causal attention
  int64_t sliding_window = 0;            // window of the other attention layers (0: all global)
  // false: a query sees W keys (q - k < W). true: W + 1 keys (q - k <= W), the
  // released Hymba's full forward. Prefill and cached decode agree under both.
  bool sliding_window_inclusive = false;
  int64_t num_memory_tokens = 0;         // meta tokens prepended to every sequence
  // Two masks that let a query read later tokens, to reproduce seeds that
  // trained with them; off by default, refused for generation (future_leak()).
  // sliding_window_symmetric: a local query also sees the W - 1 keys after it
  // (|q - k| < W), the mask seed 000's local rows point to.
  bool sliding_window_symmetric = false;
  // meta_tokens_see_all: meta-token queries see the whole sequence (seed
  // 002's mask, whose meta rows are all zeros), and later tokens read them.
  bool meta_tokens_see_all = false;
  // Dropout on the attention probabilities while training (seed 001's
  // official rows' attention_dropout); evaluation and decoding skip it.
  double attention_dropout = 0.0;
  // A bias on each attention output projection o_proj (GPT-Neo's out_proj);
  // needs every attention layer to own an o_proj (hybrids: fusion mean or learned_beta).
  bool attention_out_bias = false;
  // Biases on the q/k/v projections (GPT-2's c_attn bias): q_proj.bias, and
  // k_proj.bias / v_proj.bias on layers that produce K/V; needs separate
  // q/k/v weights (attention layers, or hybrids with proj_style separate).
  bool attention_qkv_bias = false;
  AttentionScale attention_scale = AttentionScale::kInvSqrtD;
  // What the graph multiplies Q by before the attention kernels, which always
  // divide by sqrt(qk_head_dim): 1, or sqrt(qk_head_dim) to undo it.
  double query_prescale() const;
  bool kv_reuse_auto = false;            // "auto": consecutive pairs of local layers
  // "all_pairs": layers (0, 1), (2, 3), ... of attention paired whether
  // global or local, as seed 002's owner map; a pair of two windows trains
  // (each layer keeps its own mask over the shared K/V) but does not decode.
  bool kv_reuse_all_pairs = false;
  std::vector<std::vector<int64_t>> kv_reuse_group;

  // --- Mamba
  int64_t mamba_d_state = 16;
  int64_t mamba_d_conv = 4;
  int64_t mamba_expand = 2;
  int64_t mamba_dt_rank = 0;  // 0: "auto" = ceil(hidden / 16)
  bool mamba_conv_bias = true;
  bool mamba_inner_layernorms = false;  // RMSNorm on dt, B, C (official)
  double mamba_dt_min = 0.001, mamba_dt_max = 0.1;

  // --- hybrid
  ProjStyle proj_style = ProjStyle::kFused;
  Fusion fusion = Fusion::kNormMean;
  // Attention:Mamba channel ratio (seed 002's dims_from_ratio). Empty: the
  // attention width comes from heads x head dims and Mamba's from hidden_size.
  std::vector<double> attn_mamba_ratio;

  // --- FFN
  int64_t intermediate_size = 0;  // FFN width; 0 = no FFN
  MlpActivation mlp_activation = MlpActivation::kSwiGlu;
  bool mlp_bias = false;  // biases on the GELU MLP's up and down projections

  // --- sequential blocks (seed 004): consecutive groups of block_layers
  // layers, each closed by block_link. 0: no blocks.
  int64_t block_layers = 0;
  BlockLink block_link = BlockLink::kNull;
  // Whether `layer` closes a block with a residual or gated link.
  bool closes_linked_block(int64_t layer) const {
    return block_layers > 0 && block_link != BlockLink::kNull && (layer + 1) % block_layers == 0;
  }

  // Parses JSON; unknown fields, wrong types and broken rules are errors that
  // name the field. `source` names the file for messages.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source = "config");
  nlohmann::json to_json() const;
  // Checks every rule; throws hymba::Error naming the field.
  void validate() const;
  // Fills derived values (head dims, dt_rank, kv groups for "auto").
  void resolve();

  // ---- derived facts (valid after resolve())
  bool has_attention(int64_t layer) const;
  bool has_mamba(int64_t layer) const;
  bool is_global(int64_t layer) const;
  // Index of the layer whose K/V this layer reads (itself when it produces).
  int64_t kv_producer(int64_t layer) const;
  bool is_kv_producer(int64_t layer) const { return kv_producer(layer) == layer; }
  int64_t window_of(int64_t layer) const;  // keys a query sees (0 = global)
  // The field of a mask that reads later tokens and acts on some layer
  // (sliding_window_symmetric, meta_tokens_see_all), or nullptr.
  const char* future_leak() const;
  // Why the cached decoder cannot run this model (a leak, or a K/V group of
  // layers with different windows), in one line; empty when it can.
  std::string decode_refusal() const;
  double rope_base() const;                // rope_theta, NTK-scaled when rope_ntk
  int64_t attn_dim_in() const;             // width of the attention branch input (d_model)
  int64_t attn_out_width() const { return num_attention_heads * v_head_dim; }
  int64_t mamba_width() const;             // Mamba branch model width (hidden, or ratio share)
  int64_t d_inner() const { return mamba_expand * mamba_width(); }
  int64_t dt_rank() const { return mamba_dt_rank; }

 private:
  std::vector<int64_t> producer_;  // filled by resolve()
};

}  // namespace hymba
