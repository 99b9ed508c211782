// What one sequence carries between decoding steps, in float32:
//   - per KV-producer attention layer: K (RoPE applied at the true position)
//     and V rows. Global layers keep the meta prefix plus every token;
//     sliding-window layers keep the meta prefix plus a ring of the last
//     window - 1 tokens (the token being decoded is the window's last key).
//     Consumer layers read their producer's rows.
//   - per Mamba layer: the conv state [d_inner, d_conv - 1] (the last
//     d_conv - 1 conv inputs, oldest first) and the SSM state [d_inner, d_state].
// A cache is sized for a maximum number of tokens, but global layers
// allocate their token rows as tokens arrive (reserve(): in pages, growing
// by half of what they hold), so a request for a million tokens that stops
// after ten holds ten tokens' pages, not a million's. Sliding-window rings
// and Mamba states are small and allocated whole. Full to max_tokens, the
// sizes match summary.h's kv_positions() and mamba_state_elements().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned.h"

#include "model/config.h"

namespace hymba::infer {

// K/V rows of one producer layer. Row (slot) layout: [meta | token slots].
class KvLayerCache {
 public:
  KvLayerCache() = default;
  // window 0: global (one slot per token up to max_tokens, allocated by reserve()).
  KvLayerCache(int64_t num_meta, int64_t window, int64_t max_tokens, int64_t k_width, int64_t v_width);

  // Token rows allocated at a time, at least: a page holds 256 tokens.
  static constexpr int64_t kPageTokens = 256;
  // Makes room for `tokens` tokens (a global layer grows; a ring has room).
  // Row pointers taken before a call that grows are no longer valid.
  void reserve(int64_t tokens);
  int64_t allocated_token_slots() const { return token_slots_; }

  // A global layer keeps every token in order, at slot meta + t.
  bool global() const { return global_; }
  // Rows holding keys once `tokens` tokens have been stored.
  int64_t rows(int64_t tokens) const { return meta_ + (tokens < token_slots_ ? tokens : token_slots_); }
  // Slot of token t (0-based among tokens); -1 when a window of 1 keeps no past token.
  int64_t slot_of_token(int64_t t) const;

  // Copies the meta rows of `prefix` (a cache of the same layer).
  void copy_meta_rows(const KvLayerCache& prefix);

  float* k_row(int64_t slot) { return k_.data() + slot * k_width_; }
  float* v_row(int64_t slot) { return v_.data() + slot * v_width_; }
  const float* k() const { return k_.data(); }
  const float* v() const { return v_.data(); }
  int64_t k_width() const { return k_width_; }
  int64_t v_width() const { return v_width_; }
  size_t bytes() const { return (k_.capacity() + v_.capacity()) * sizeof(float); }

 private:
  int64_t meta_ = 0;
  bool global_ = true;
  int64_t ring_ = 0;         // window - 1 for sliding-window layers, 0 for global
  int64_t token_slots_ = 0;  // token rows allocated
  int64_t max_slots_ = 0;    // token rows at max_tokens
  int64_t k_width_ = 0, v_width_ = 0;
  std::vector<float, CacheLineAllocator<float>> k_, v_;  // rows of 64 floats or more start on a cache line
};

struct MambaLayerCache {
  std::vector<float> conv;  // [d_inner, d_conv - 1]
  std::vector<float> ssm;   // [d_inner, d_state]
  size_t bytes() const { return (conv.capacity() + ssm.capacity()) * sizeof(float); }
};

class SequenceCache {
 public:
  // Room for max_tokens tokens (prompt + generated), meta tokens aside.
  SequenceCache(const ModelConfig& cfg, int64_t max_tokens);

  int64_t tokens() const { return tokens_; }  // tokens stored so far
  int64_t max_tokens() const { return max_tokens_; }
  int64_t num_meta() const { return num_meta_; }
  // RoPE position of the next token: meta tokens come first.
  int64_t next_position() const { return num_meta_ + tokens_; }

  KvLayerCache& kv(int64_t layer) { return kv_[static_cast<size_t>(layer)]; }
  const KvLayerCache& kv(int64_t layer) const { return kv_[static_cast<size_t>(layer)]; }
  MambaLayerCache& mamba(int64_t layer) { return mamba_[static_cast<size_t>(layer)]; }
  const MambaLayerCache& mamba(int64_t layer) const { return mamba_[static_cast<size_t>(layer)]; }

  // Bytes allocated now (global layers grow with the tokens reserved).
  size_t kv_bytes() const;
  size_t mamba_bytes() const;
  size_t bytes() const { return kv_bytes() + mamba_bytes(); }

  // Empties the sequence: no tokens, zero Mamba state (K/V rows are simply
  // overwritten as tokens arrive).
  void clear();
  // Empties the sequence and takes the meta rows and Mamba states of
  // `prefix` (a cache of the same model holding the meta tokens only).
  void start_from(const SequenceCache& prefix);
  void set_tokens(int64_t n);
  void advance() { set_tokens(tokens_ + 1); }
  // Room for `tokens` tokens in every layer (at most max_tokens); the
  // decoder calls it before it writes rows.
  void reserve(int64_t tokens);

 private:
  int64_t num_meta_ = 0, max_tokens_ = 0, tokens_ = 0;
  std::vector<KvLayerCache> kv_;        // per layer; empty for non-producers
  std::vector<MambaLayerCache> mamba_;  // per layer; empty without Mamba
};

// The bytes summary.h's formula gives for a cache of max_tokens tokens (fp32):
// what a SequenceCache holds once it is full.
int64_t expected_cache_bytes(const ModelConfig& cfg, int64_t max_tokens);

}  // namespace hymba::infer
