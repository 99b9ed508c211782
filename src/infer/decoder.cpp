#include "infer/decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/parallel.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/attention_step.h"
#include "kernels/cpu/conv_step.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/ssm_step.h"

namespace hymba::infer {

namespace {
// The format the decoder runs in: a model holding blocks runs them whatever
// --weights says when it says f32 (there are no float values for them);
// another block format would have to requantize them, which is refused.
WeightFormat effective_format(const Model& model, WeightFormat asked) {
  const std::optional<BlockFormat> held = model.held_format();
  if (!held) return asked;
  const WeightFormat own = weight_format_of(*held);
  HYMBA_CHECK(asked == WeightFormat::kF32 || asked == own, "--weights ", to_string(asked),
              ": the checkpoint holds its weights in ", to_string(own), " blocks; leave --weights out or give ",
              to_string(own));
  return own;
}
}  // namespace

Decoder::Decoder(Model& model, WeightFormat weights)
    : model_(model),
      linears_(effective_format(model, weights)),
      lin_([this](float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
                  int64_t OC) { linears_.linear(out, ld_out, in, ld_in, w, rows, C, OC); }) {
  const ModelPlan& plan = model_.plan();
  // A mask that reads later tokens cannot be decoded (the tokens it would
  // read do not exist yet), nor can a K/V group of two windows (one cache
  // window per owner): decoding would not be the model that trained.
  if (const std::string why = plan.cfg.decode_refusal(); !why.empty()) fail("generation refused: ", why);
  const float* P = model_.params().values_block();
  for (const auto& [name, held] : model_.held()) {
    const int64_t offset = model_.params().info(name).offset;
    if (offset == plan.embed) held_embedding_ = &held;
    // An embedding held for lookups is a product's weight only as a tied head.
    if (offset != plan.embed || plan.lm_head == plan.embed) linears_.adopt(P + offset, held);
  }
  embedding_is_packed_ = held_embedding_ != nullptr && plan.lm_head == plan.embed &&
                         held_embedding_->format != BlockFormat::kBF16;
  // A fault on a file maps the cached pages around it (whole folios), so
  // repacking one matrix brings back pages of others already repacked, and
  // the load's checks left an untied embedding's pages: none is needed now.
  for (const auto& [name, held] : model_.held())
    if (held.mapped && held.format != BlockFormat::kBF16) release_mapped_pages(held.blocks, held.bytes());
  neg_exp_a_.resize(plan.layers.size());
  for (const LayerPlan& lp : plan.layers) {
    if (!lp.mamba) continue;
    const int64_t n = lp.dims.d_inner * plan.cfg.mamba_d_state;
    std::vector<float>& A = neg_exp_a_[static_cast<size_t>(lp.index)];
    A.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) A[i] = -std::exp(P[lp.a_log + i]);
  }
}

void Decoder::embed_tokens(float* x, const int32_t* ids, int64_t R) const {
  const ModelConfig& c = model_.config();
  // A tied head's packed copy has the embedding's values: its lookups read
  // no page of the file, whose blocks then need not be resident at all.
  if (embedding_is_packed_ && linears_.held_rows(x, ids, R, model_.params().values_block() + model_.plan().embed))
    return;
  if (held_embedding_ == nullptr)
    cpu::embedding_forward(x, ids, model_.params().values_block() + model_.plan().embed, R, c.vocab_size,
                           c.hidden_size);
  else if (held_embedding_->format == BlockFormat::kQ4)
    cpu::embedding_forward_q4(x, ids, held_embedding_->q4(), R, c.vocab_size, c.hidden_size);
  else if (held_embedding_->format == BlockFormat::kQ8)
    cpu::embedding_forward_q8(x, ids, held_embedding_->q8(), R, c.vocab_size, c.hidden_size);
  else
    fail("decoder: an embedding held in ", to_string(held_embedding_->format), " is not supported");
}

void Decoder::drop_file_pages() const {
  model_.params().drop_file_pages();
  if (held_embedding_ != nullptr && held_embedding_->mapped && !embedding_is_packed_)
    release_mapped_pages(held_embedding_->blocks, held_embedding_->bytes());
}

int decode_threads(const Model& model, int64_t rows) {
  // Lower than training's threshold (threads_for_param_rows, 256M): with the
  // lane-order block kernels a 125M model's step is bandwidth-bound enough
  // that two threads pay (hymba-125m q8 decode 52-61 against 38-45 tok/s,
  // f32 18-19 against 12-15, quiet 2-core machine), while a 30M model's
  // still runs faster on one.
  constexpr int64_t kSerialParamRows = int64_t{64} << 20;
  return model.params().num_params() * rows < kSerialParamRows ? 1 : num_threads();
}

void Decoder::step(std::span<SequenceCache* const> caches, std::span<const int32_t> tokens, float* logits) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  const float* P = model_.params().values_block();
  const auto R = static_cast<int64_t>(caches.size());
  HYMBA_CHECK(R >= 1 && tokens.size() == caches.size(), "step: ", tokens.size(), " tokens for ", R, " sequences");
  std::set<const SequenceCache*> distinct(caches.begin(), caches.end());
  HYMBA_CHECK(static_cast<int64_t>(distinct.size()) == R, "step: a sequence appears twice in one step");
  const int most = decode_threads(model_, R);
  StepThreads* chooser = nullptr;
  int use_threads = most;
  if (forced_step_threads_ > 0) {
    use_threads = std::min(forced_step_threads_, num_threads());
  } else if (R <= kTimedRows && most > 1) {
    chooser = &step_threads_.try_emplace(R, most).first->second;
    use_threads = chooser->next();
  }
  const ThreadLimit threads(use_threads);
  // Several threads: they spin between the step's few hundred short
  // products instead of sleeping (core/parallel.h).
  const SpinTeamScope team(use_threads);
  // A step's products run in the format at any number of sequences (the
  // float32 weights serve only long prefill chunks): a sequence's logits
  // then do not depend on how many others share its step, and a batch of 16
  // does not read the float32 weights (or the 205 MB float32 head of
  // hymba-1.5b, which a held checkpoint keeps out of memory).
  struct FormatRows {
    DecoderLinears& linears;
    bool was;
    explicit FormatRows(DecoderLinears& l) : linears(l), was(l.quantized_rows()) { l.quantized_rows(true); }
    ~FormatRows() { linears.quantized_rows(was); }
  } format_rows(linears_);
  const auto started = std::chrono::steady_clock::now();
  const size_t n = caches.size();
  positions_.resize(n);
  for (size_t b = 0; b < n; ++b) {
    const SequenceCache& sc = *caches[b];
    HYMBA_CHECK(sc.tokens() >= 1, "step: sequence ", b, " has not been prefilled");
    HYMBA_CHECK(sc.tokens() < sc.max_tokens(), "step: sequence ", b, " is full (", sc.max_tokens(), " tokens)");
    positions_[b] = sc.next_position();
  }
  // Rows for this step's token, before any cache pointer is taken.
  for (SequenceCache* sc : caches) sc->reserve(sc->tokens() + 1);

  arena_.reset();
  const int64_t d = c.hidden_size, V = c.vocab_size;
  float* x = arena_.alloc(static_cast<size_t>(R * d));
  embed_tokens(x, tokens.data(), R);
  if (plan.positions >= 0) {
    // Learned positions: the row at the token's absolute position (meta tokens took 0..M-1).
    for (size_t b = 0; b < n; ++b)
      HYMBA_CHECK(positions_[b] < c.max_position_embeddings, "generate: position ", positions_[b],
                  " is beyond the model's learned positions (max_position_embeddings ", c.max_position_embeddings,
                  ")");
    cpu::position_embedding_forward(x, P + plan.positions, positions_.data(), R, c.max_position_embeddings, d);
  }
  k_ptrs_.resize(n);
  v_ptrs_.resize(n);
  n_cached_.resize(n);
  state_ptrs_.resize(n);
  new_k_.assign(plan.layers.size(), nullptr);
  new_v_.assign(plan.layers.size(), nullptr);
  // arena_ keeps each producer's new key and value rows, which its
  // consumers and commit_kv read.
  x = walk_layers(
      x, R, arena_, step_layer_arena_,
      [&](const LayerPlan& lp, LayerActs<float>& a) { step_attention(caches, lp, a); },
      [&](const LayerPlan& lp, LayerActs<float>& a) { step_mamba(caches, lp, a); });

  float* hf = arena_.alloc(static_cast<size_t>(R * d));
  stream_norm<float>(c, hf, nullptr, nullptr, x, P, plan.final_norm, plan.final_norm_b, R, d);
  linears_.head(logits, hf, P + plan.lm_head, R, d, V);
  // Only now do producers store the new token: their consumers ran against
  // the cache as it was, plus the current row, like the producer itself.
  commit_kv(caches);
  for (SequenceCache* sc : caches) sc->advance();
  // The embedding's lookups fault in their neighbours too (core/params.h).
  if (++steps_since_drop_ >= kDropFilePagesEvery) {
    drop_file_pages();
    steps_since_drop_ = 0;
  }
  if (chooser != nullptr)
    chooser->record(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

float* Decoder::walk_layers(float* x, int64_t R, Arena& kept, Arena& layer_arena, const MixerFn<float>& attention,
                            const MixerFn<float>& mamba) {
  const ModelPlan& plan = model_.plan();
  const int64_t d = plan.cfg.hidden_size;
  acts_.assign(plan.layers.size(), LayerActs<float>{});
  const ForwardOptions inference;  // no dropout
  const LayerWalker<float> walker{plan, model_.params().values_block(), inference, layer_arena, R, lin_, attention,
                                  mamba};
  // A layer's activations go with the layer (layer_arena is reset for the
  // next): kept holds only the residual stream, in two buffers taken in
  // turn, and the input of a linked block's first layer. Keeping every
  // layer's would cost layers x rows x the layer's width (GBs for a 1.5B
  // model's chunk; 118 MiB for its 16-row step).
  std::vector<const float*> block_in(plan.layers.size(), nullptr);
  for (const LayerPlan& lp : plan.layers)
    if (lp.block_first >= 0) block_in[static_cast<size_t>(lp.block_first)] = x;  // marks a block's first layer
  float* stream[2] = {x, kept.alloc_uninit(static_cast<size_t>(R * d))};
  int turn = 0;
  for (const LayerPlan& lp : plan.layers) {
    layer_arena.reset();
    LayerActs<float>& a = acts_[static_cast<size_t>(lp.index)];
    a.x_in = x;
    if (block_in[static_cast<size_t>(lp.index)] != nullptr) {
      float* copy = kept.alloc_uninit(static_cast<size_t>(R * d));
      std::copy_n(x, R * d, copy);
      block_in[static_cast<size_t>(lp.index)] = copy;
    }
    walk_layer(walker, lp, a, lp.block_first >= 0 ? block_in[static_cast<size_t>(lp.block_first)] : nullptr);
    turn ^= 1;
    x = stream[turn];
    std::copy_n(a.x_out, R * d, x);
    a = LayerActs<float>{};  // its buffers go with the next reset
  }
  return x;
}

// A decode step's attention for every sequence: RoPE, the producer's new key
// and value rows, and attention over the producer's cache plus those rows.
void Decoder::step_attention(std::span<SequenceCache* const> caches, const LayerPlan& lp, LayerActs<float>& a) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  const auto R = static_cast<int64_t>(caches.size());
  const size_t n = caches.size();
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t k_width = Hkv * c.qk_head_dim, v_width = Hkv * c.v_head_dim;
  const int64_t W = lp.proj_width;
  if (c.rope) {
    const auto base = static_cast<float>(c.rope_base());
    cpu::rope_forward(a.proj + lp.q_col, W, R, 1, Hq, c.qk_head_dim, positions_.data(), base);
    if (lp.producer) cpu::rope_forward(a.proj + lp.k_col, W, R, 1, Hkv, c.qk_head_dim, positions_.data(), base);
  }
  scale_queries(c, a.proj + lp.q_col, W, R, Hq * c.qk_head_dim);
  if (lp.producer) {
    float* k = arena_.alloc_uninit(static_cast<size_t>(R * k_width));
    float* v = arena_.alloc_uninit(static_cast<size_t>(R * v_width));
    for (int64_t b = 0; b < R; ++b) {
      std::copy_n(a.proj + b * W + lp.k_col, k_width, k + b * k_width);
      std::copy_n(a.proj + b * W + lp.v_col, v_width, v + b * v_width);
    }
    new_k_[static_cast<size_t>(lp.index)] = k;
    new_v_[static_cast<size_t>(lp.index)] = v;
  }
  // Keys and values: the producer's cache (as it was before this step)
  // plus the producer's row for the current token.
  for (size_t b = 0; b < n; ++b) {
    const KvLayerCache& kv = caches[b]->kv(lp.producer_layer);
    k_ptrs_[b] = kv.k();
    v_ptrs_[b] = kv.v();
    n_cached_[b] = kv.rows(caches[b]->tokens());
  }
  cpu::AttnStepArgs args;
  args.B = R;
  args.Hq = Hq;
  args.Hkv = Hkv;
  args.Dqk = c.qk_head_dim;
  args.Dv = c.v_head_dim;
  args.q = a.proj + lp.q_col;
  args.ld_q = W;
  args.k_new = new_k_[static_cast<size_t>(lp.producer_layer)];
  args.ld_k_new = k_width;
  args.v_new = new_v_[static_cast<size_t>(lp.producer_layer)];
  args.ld_v_new = v_width;
  args.k_cache = k_ptrs_.data();
  args.v_cache = v_ptrs_.data();
  args.n_cached = n_cached_.data();
  a.attn = step_layer_arena_.alloc(static_cast<size_t>(R * lp.dims.attn_out));
  cpu::attention_step(a.attn, lp.dims.attn_out, args);
}

// A decode step's Mamba branch for every sequence: the causal conv and the
// scan each advance their cached state by one token.
void Decoder::step_mamba(std::span<SequenceCache* const> caches, const LayerPlan& lp, LayerActs<float>& a) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  const float* P = model_.params().values_block();
  const auto R = static_cast<int64_t>(caches.size());
  const size_t n = caches.size();
  const int64_t W = lp.proj_width, di = lp.dims.d_inner;
  for (size_t b = 0; b < n; ++b) state_ptrs_[b] = caches[b]->mamba(lp.index).conv.data();
  a.xc = step_layer_arena_.alloc(static_cast<size_t>(R * di));
  cpu::conv_step(a.xc, a.proj + lp.x_col, W, state_ptrs_.data(), P + lp.conv_w,
                 lp.conv_b >= 0 ? P + lp.conv_b : nullptr, R, di, c.mamba_d_conv);
  a.u = step_layer_arena_.alloc(static_cast<size_t>(R * di));
  cpu::silu_forward(a.u, a.xc, R * di);
  layer_mamba_projections(plan, lp, P, step_layer_arena_, a, R, lin_);
  // The scan's operands exactly as the full forward wires them.
  const ScanParams<float> sp = layer_scan_params(plan, lp, P, a, R, 1);
  cpu::SsmStepArgs args;
  args.B = R;
  args.D = di;
  args.N = c.mamba_d_state;
  args.u = sp.u;
  args.delta = sp.delta;
  args.delta_bias = sp.delta_bias;
  args.A = neg_exp_a_[static_cast<size_t>(lp.index)].data();
  args.Bm = sp.Bm;
  args.ld_B = sp.ld_B;
  args.Cm = sp.Cm;
  args.ld_C = sp.ld_C;
  args.Dskip = sp.Dskip;
  args.z = sp.z;
  args.ld_z = sp.ld_z;
  for (size_t b = 0; b < n; ++b) state_ptrs_[b] = caches[b]->mamba(lp.index).ssm.data();
  a.y = step_layer_arena_.alloc(static_cast<size_t>(R * di));
  cpu::ssm_step(a.y, state_ptrs_.data(), args);
}

int Decoder::step_threads(int64_t rows) const {
  if (forced_step_threads_ > 0) return std::min(forced_step_threads_, num_threads());
  const int most = decode_threads(model_, rows);
  if (rows > kTimedRows || most == 1) return most;
  const auto it = step_threads_.find(rows);
  return it == step_threads_.end() ? 0 : it->second.chosen();
}

void Decoder::commit_kv(std::span<SequenceCache* const> caches) {
  for (const LayerPlan& lp : model_.plan().layers) {
    if (!lp.attn || !lp.producer) continue;
    const float* k = new_k_[static_cast<size_t>(lp.index)];
    const float* v = new_v_[static_cast<size_t>(lp.index)];
    for (size_t b = 0; b < caches.size(); ++b) {
      KvLayerCache& kv = caches[b]->kv(lp.index);
      const int64_t slot = kv.slot_of_token(caches[b]->tokens());
      if (slot < 0) continue;
      const auto row = static_cast<int64_t>(b);
      std::memcpy(kv.k_row(slot), k + row * kv.k_width(), sizeof(float) * kv.k_width());
      std::memcpy(kv.v_row(slot), v + row * kv.v_width(), sizeof(float) * kv.v_width());
    }
  }
}

}  // namespace hymba::infer
