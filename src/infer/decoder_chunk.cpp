// Prefill by chunks: the meta prefix once per decoder, then the prompt's
// tokens C rows at a time, each chunk continuing from the sequence's cache.
// Row-wise pieces are the model graph's; attention, conv1d and the scan are
// the full-sequence kernels, given the cache as their past.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/threading.h"
#include "infer/decoder.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/selective_scan.h"
#include "kernels/cpu/activations.h"
#include "model/ops.h"

namespace hymba::infer {

void Decoder::set_prefill_chunk(int64_t positions) {
  HYMBA_CHECK(positions >= 1, "prefill chunk must be >= 1 position, got ", positions);
  prefill_chunk_ = positions;
}

const SequenceCache& Decoder::meta_prefix() {
  if (!meta_prefix_) {
    SequenceCache prefix(config(), 1);
    if (prefix.num_meta() > 0) {
      const ThreadLimit threads(decode_threads(model_, prefix.num_meta()));
      run_chunk(prefix, nullptr, prefix.num_meta(), nullptr, true);
    }
    meta_prefix_.emplace(std::move(prefix));
  }
  return *meta_prefix_;
}

void Decoder::start(SequenceCache& cache) { cache.start_from(meta_prefix()); }

std::vector<float> Decoder::prefill(SequenceCache& cache, std::span<const int32_t> prompt,
                                    std::vector<float>* all_logits) {
  HYMBA_CHECK(!prompt.empty(), "prefill: the prompt is empty");
  HYMBA_CHECK(static_cast<int64_t>(prompt.size()) <= cache.max_tokens(), "prefill: a prompt of ", prompt.size(),
              " tokens does not fit a cache sized for ", cache.max_tokens());
  start(cache);
  return extend(cache, prompt, all_logits);
}

std::vector<float> Decoder::extend(SequenceCache& cache, std::span<const int32_t> tokens,
                                   std::vector<float>* all_logits) {
  const auto T = static_cast<int64_t>(tokens.size());
  HYMBA_CHECK(T >= 1, "extend: no tokens");
  HYMBA_CHECK(cache.tokens() + T <= cache.max_tokens(), "extend: ", cache.tokens(), " + ", T,
              " tokens do not fit a cache sized for ", cache.max_tokens());
  const int64_t V = vocab_size();
  if (all_logits != nullptr) all_logits->resize(static_cast<size_t>(T * V));
  std::vector<float> last(static_cast<size_t>(V));
  for (int64_t t0 = 0; t0 < T; t0 += prefill_chunk_) {
    const int64_t C = std::min(prefill_chunk_, T - t0);
    const bool final_chunk = t0 + C == T;
    const ThreadLimit threads(decode_threads(model_, C));
    if (all_logits != nullptr) {
      run_chunk(cache, tokens.data() + t0, C, all_logits->data() + t0 * V, false);
    } else {
      // Only the last row of the last chunk is scored.
      run_chunk(cache, tokens.data() + t0, C, final_chunk ? last.data() : nullptr, true);
    }
  }
  if (all_logits != nullptr) std::copy_n(all_logits->data() + (T - 1) * V, V, last.data());
  drop_file_pages();  // the embedding rows this prompt read
  return last;
}

void Decoder::run_chunk(SequenceCache& cache, const int32_t* ids, int64_t C, float* logits, bool last_only) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  const float* P = model_.params().values_block();
  const bool meta = ids == nullptr;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  const int64_t first_position = meta ? 0 : cache.next_position();
  if (!meta) cache.reserve(cache.tokens() + C);  // rows for the chunk's tokens
  chunk_positions_.resize(static_cast<size_t>(C));
  for (int64_t i = 0; i < C; ++i) chunk_positions_[static_cast<size_t>(i)] = first_position + i;

  chunk_positions_run_ += C;
  chunk_arena_.reset();
  float* x = chunk_arena_.alloc_uninit(static_cast<size_t>(C * d));
  if (meta) {
    std::copy_n(P + plan.memory, C * d, x);
  } else {
    embed_tokens(x, ids, C);
  }
  if (plan.positions >= 0) {
    HYMBA_CHECK(first_position + C <= c.max_position_embeddings, "generate: position ", first_position + C - 1,
                " is beyond the model's learned positions (max_position_embeddings ", c.max_position_embeddings, ")");
    cpu::position_embedding_forward(x, P + plan.positions, chunk_positions_.data(), C, c.max_position_embeddings, d);
  }
  chunk_k_.resize(plan.layers.size());
  chunk_v_.resize(plan.layers.size());
  x = walk_layers(
      x, C, chunk_arena_, layer_arena_,
      [&](const LayerPlan& lp, LayerActs<float>&) { chunk_attention(cache, lp, C, meta); },
      [&](const LayerPlan& lp, LayerActs<float>&) { chunk_mamba(cache, lp, C); });

  // Windowed producers store the chunk's keys and values once every
  // consumer has read them (global ones wrote them in place already): the
  // chunk's rows are the last C of the producer's [meta | past | chunk] rows.
  const int64_t t0 = cache.tokens();
  for (const LayerPlan& lp : plan.layers) {
    if (!lp.attn || !lp.producer || cache.kv(lp.index).global()) continue;
    KvLayerCache& kv = cache.kv(lp.index);
    const std::vector<float>& kbuf = chunk_k_[static_cast<size_t>(lp.index)];
    const std::vector<float>& vbuf = chunk_v_[static_cast<size_t>(lp.index)];
    const int64_t kw = kv.k_width(), vw = kv.v_width();
    const int64_t first = static_cast<int64_t>(kbuf.size()) / kw - C;
    for (int64_t i = 0; i < C; ++i) {
      // Meta rows take slots 0..M-1; a window keeps only its last tokens (later rows overwrite the ring).
      const int64_t slot = meta ? i : kv.slot_of_token(t0 + i);
      if (slot < 0) continue;
      std::memcpy(kv.k_row(slot), kbuf.data() + (first + i) * kw, sizeof(float) * kw);
      std::memcpy(kv.v_row(slot), vbuf.data() + (first + i) * vw, sizeof(float) * vw);
    }
  }
  if (!meta) cache.set_tokens(t0 + C);

  if (logits == nullptr) return;
  const int64_t rows = last_only ? 1 : C;
  const float* x_scored = x + (C - rows) * d;
  float* hf = chunk_arena_.alloc_uninit(static_cast<size_t>(rows * d));
  stream_norm<float>(c, hf, nullptr, nullptr, x_scored, P, plan.final_norm, plan.final_norm_b, rows, d);
  linears_.head(logits, hf, P + plan.lm_head, rows, d, V);
}

// The chunk's queries against [meta | the cached tokens a query can see |
// the chunk itself]. Keys are laid out in that order, so the kernel's mask
// (causal, window, meta always visible) holds with the chunk's first query
// at offset M + past: distances between token keys are token distances.
void Decoder::chunk_attention(SequenceCache& cache, const LayerPlan& lp, int64_t C, bool meta) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  LayerActs<float>& a = acts_[static_cast<size_t>(lp.index)];
  const int64_t W = lp.proj_width, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  if (c.rope) {
    const auto base = static_cast<float>(c.rope_base());
    // C rows of one token each, row i at chunk_positions_[i].
    cpu::rope_forward(a.proj + lp.q_col, W, C, 1, Hq, c.qk_head_dim, chunk_positions_.data(), base);
    if (lp.producer) cpu::rope_forward(a.proj + lp.k_col, W, C, 1, Hkv, c.qk_head_dim, chunk_positions_.data(), base);
  }
  scale_queries(c, a.proj + lp.q_col, W, C, Hq * c.qk_head_dim);

  // A global producer's cache holds [meta | every token] in order: the
  // chunk's rows go straight after them and attention reads the cache in
  // place. A window's ring is copied out oldest first, with the chunk after.
  const auto pl = static_cast<size_t>(lp.producer_layer);
  KvLayerCache& kv = cache.kv(lp.producer_layer);
  const int64_t M = cache.num_meta(), kw = kv.k_width(), vw = kv.v_width();
  const int64_t past = meta ? 0 : kv.rows(cache.tokens()) - M;
  const int64_t prefix = meta ? 0 : M + past;  // rows before the chunk's own
  const float* keys = nullptr;
  const float* values = nullptr;
  if (kv.global()) {
    if (lp.producer)
      for (int64_t i = 0; i < C; ++i) {
        std::copy_n(a.proj + i * W + lp.k_col, kw, kv.k_row(prefix + i));
        std::copy_n(a.proj + i * W + lp.v_col, vw, kv.v_row(prefix + i));
      }
    keys = kv.k();
    values = kv.v();
  } else {
    std::vector<float>& kbuf = chunk_k_[pl];
    std::vector<float>& vbuf = chunk_v_[pl];
    if (lp.producer) {
      kbuf.resize(static_cast<size_t>((prefix + C) * kw));
      vbuf.resize(static_cast<size_t>((prefix + C) * vw));
      if (!meta) {
        std::copy_n(kv.k(), M * kw, kbuf.data());
        std::copy_n(kv.v(), M * vw, vbuf.data());
        const int64_t t_end = cache.tokens();
        for (int64_t t = t_end - past, row = M; t < t_end; ++t, ++row) {
          const int64_t slot = kv.slot_of_token(t);
          std::copy_n(kv.k() + slot * kw, kw, kbuf.data() + row * kw);
          std::copy_n(kv.v() + slot * vw, vw, vbuf.data() + row * vw);
        }
      }
      for (int64_t i = 0; i < C; ++i) {
        std::copy_n(a.proj + i * W + lp.k_col, kw, kbuf.data() + (prefix + i) * kw);
        std::copy_n(a.proj + i * W + lp.v_col, vw, vbuf.data() + (prefix + i) * vw);
      }
    }
    keys = kbuf.data();
    values = vbuf.data();
  }
  cpu::AttnArgs args;
  args.B = 1;
  args.Tq = C;
  args.Tk = prefix + C;
  args.q_offset = prefix;
  args.Hq = Hq;
  args.Hkv = Hkv;
  args.Dqk = c.qk_head_dim;
  args.Dv = c.v_head_dim;
  args.q = a.proj + lp.q_col;
  args.ld_q = W;
  args.k = keys;
  args.ld_k = kw;
  args.v = values;
  args.ld_v = vw;
  args.window = lp.window;
  args.num_meta = M;
  a.attn = layer_arena_.alloc_uninit(static_cast<size_t>(C * lp.dims.attn_out));
  cpu::attention_forward(a.attn, lp.dims.attn_out, nullptr, args);
}

// conv1d over [the cached last K-1 inputs | the chunk's inputs], then the
// scan from the cached SSM state; both states move to the chunk's end.
void Decoder::chunk_mamba(SequenceCache& cache, const LayerPlan& lp, int64_t C) {
  const ModelPlan& plan = model_.plan();
  const ModelConfig& c = plan.cfg;
  const float* P = model_.params().values_block();
  LayerActs<float>& a = acts_[static_cast<size_t>(lp.index)];
  MambaLayerCache& mc = cache.mamba(lp.index);
  const int64_t di = lp.dims.d_inner, K = c.mamba_d_conv, W = lp.proj_width, H = K - 1;
  float* xin = layer_arena_.alloc_uninit(static_cast<size_t>((H + C) * di));
  for (int64_t k = 0; k < H; ++k)
    for (int64_t ch = 0; ch < di; ++ch) xin[k * di + ch] = mc.conv[static_cast<size_t>(ch * H + k)];
  for (int64_t i = 0; i < C; ++i) std::copy_n(a.proj + i * W + lp.x_col, di, xin + (H + i) * di);
  float* conv_out = layer_arena_.alloc_uninit(static_cast<size_t>((H + C) * di));
  cpu::conv1d_causal_forward(conv_out, xin, di, P + lp.conv_w, lp.conv_b >= 0 ? P + lp.conv_b : nullptr, 1, H + C,
                             di, K);
  a.xc = conv_out + H * di;  // the first H rows only carried the state in
  for (int64_t k = 0; k < H; ++k)
    for (int64_t ch = 0; ch < di; ++ch) mc.conv[static_cast<size_t>(ch * H + k)] = xin[(C + k) * di + ch];

  a.u = layer_arena_.alloc_uninit(static_cast<size_t>(C * di));
  cpu::silu_forward(a.u, a.xc, C * di);
  layer_mamba_projections(plan, lp, P, layer_arena_, a, C, lin_);
  cpu::ScanArgs sa = Ops<float>::scan_args(layer_scan_params(plan, lp, P, a, 1, C));
  sa.h0 = mc.ssm.data();
  a.y = layer_arena_.alloc_uninit(static_cast<size_t>(C * di));
  float* h_last = layer_arena_.alloc_uninit(mc.ssm.size());
  cpu::selective_scan_forward(a.y, nullptr, h_last, sa);
  std::copy_n(h_last, mc.ssm.size(), mc.ssm.begin());
}

}  // namespace hymba::infer
