#include "infer/cache.h"

#include <algorithm>

#include "core/error.h"
#include "model/summary.h"

namespace hymba::infer {

KvLayerCache::KvLayerCache(int64_t num_meta, int64_t window, int64_t max_tokens, int64_t k_width, int64_t v_width)
    : meta_(num_meta), global_(window <= 0), ring_(window > 0 ? window - 1 : 0), k_width_(k_width), v_width_(v_width) {
  // A window of w shows the current token and the w - 1 before it; fewer
  // slots suffice when the sequence can never hold that many tokens.
  max_slots_ = window > 0 ? std::min(max_tokens, ring_) : max_tokens;
  token_slots_ = global_ ? 0 : max_slots_;  // a global layer's rows come with reserve()
  const auto rows = static_cast<size_t>(meta_ + token_slots_);
  k_.assign(rows * static_cast<size_t>(k_width_), 0.0f);
  v_.assign(rows * static_cast<size_t>(v_width_), 0.0f);
}

void KvLayerCache::reserve(int64_t tokens) {
  if (!global_ || tokens <= token_slots_) return;
  HYMBA_CHECK(tokens <= max_slots_, "cache: ", tokens, " tokens do not fit a cache sized for ", max_slots_);
  // Half again of what is held, in whole pages: copies stay linear in the
  // tokens generated, and the waste at most a third of the rows.
  const int64_t grown = std::max(tokens, token_slots_ + token_slots_ / 2);
  const int64_t slots = std::min(max_slots_, (grown + kPageTokens - 1) / kPageTokens * kPageTokens);
  const auto grow = [&](std::vector<float, CacheLineAllocator<float>>& rows, int64_t width) {
    std::vector<float, CacheLineAllocator<float>> bigger;
    bigger.reserve(static_cast<size_t>((meta_ + slots) * width));  // exactly: bytes() reports capacity
    bigger.assign(rows.begin(), rows.end());
    bigger.resize(static_cast<size_t>((meta_ + slots) * width), 0.0f);
    rows.swap(bigger);
  };
  grow(k_, k_width_);
  grow(v_, v_width_);
  token_slots_ = slots;
}

int64_t KvLayerCache::slot_of_token(int64_t t) const {
  if (ring_ > 0) return meta_ + t % ring_;
  if (!global_) return -1;  // a window of 1 keeps no past token
  HYMBA_CHECK(t < token_slots_, "cache: token ", t, " has no row (", token_slots_, " reserved)");
  return meta_ + t;
}

void KvLayerCache::copy_meta_rows(const KvLayerCache& prefix) {
  HYMBA_CHECK(prefix.meta_ == meta_ && prefix.k_width_ == k_width_ && prefix.v_width_ == v_width_,
              "cache: the meta prefix belongs to another model");
  std::copy_n(prefix.k_.begin(), meta_ * k_width_, k_.begin());
  std::copy_n(prefix.v_.begin(), meta_ * v_width_, v_.begin());
}

SequenceCache::SequenceCache(const ModelConfig& cfg, int64_t max_tokens)
    : num_meta_(cfg.num_memory_tokens), max_tokens_(max_tokens) {
  HYMBA_CHECK(max_tokens >= 1, "cache: max_tokens must be >= 1 (got ", max_tokens, ")");
  const auto L = static_cast<size_t>(cfg.num_hidden_layers);
  kv_.resize(L);
  mamba_.resize(L);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    if (cfg.has_attention(l) && cfg.is_kv_producer(l))
      kv_[static_cast<size_t>(l)] =
          KvLayerCache(num_meta_, cfg.window_of(l), max_tokens, cfg.num_key_value_heads * cfg.qk_head_dim,
                       cfg.num_key_value_heads * cfg.v_head_dim);
    if (cfg.has_mamba(l)) {
      MambaLayerCache& m = mamba_[static_cast<size_t>(l)];
      m.conv.assign(static_cast<size_t>(cfg.d_inner() * (cfg.mamba_d_conv - 1)), 0.0f);
      m.ssm.assign(static_cast<size_t>(cfg.d_inner() * cfg.mamba_d_state), 0.0f);
    }
  }
}

size_t SequenceCache::kv_bytes() const {
  size_t n = 0;
  for (const KvLayerCache& c : kv_) n += c.bytes();
  return n;
}

size_t SequenceCache::mamba_bytes() const {
  size_t n = 0;
  for (const MambaLayerCache& m : mamba_) n += m.bytes();
  return n;
}

void SequenceCache::clear() {
  tokens_ = 0;
  for (MambaLayerCache& m : mamba_) {
    std::fill(m.conv.begin(), m.conv.end(), 0.0f);
    std::fill(m.ssm.begin(), m.ssm.end(), 0.0f);
  }
}

void SequenceCache::start_from(const SequenceCache& prefix) {
  HYMBA_CHECK(prefix.kv_.size() == kv_.size() && prefix.num_meta_ == num_meta_ && prefix.tokens_ == 0,
              "cache: the meta prefix belongs to another model");
  tokens_ = 0;
  for (size_t l = 0; l < kv_.size(); ++l) {
    if (kv_[l].k_width() > 0) kv_[l].copy_meta_rows(prefix.kv_[l]);
    mamba_[l].conv = prefix.mamba_[l].conv;
    mamba_[l].ssm = prefix.mamba_[l].ssm;
  }
}

void SequenceCache::reserve(int64_t tokens) {
  HYMBA_CHECK(tokens <= max_tokens_, "cache: ", tokens, " tokens do not fit a cache sized for ", max_tokens_);
  for (KvLayerCache& c : kv_)
    if (c.k_width() > 0) c.reserve(tokens);  // layers that produce no K/V have no cache
}

void SequenceCache::set_tokens(int64_t n) {
  HYMBA_CHECK(n >= 0 && n <= max_tokens_, "cache: ", n, " tokens do not fit a cache sized for ", max_tokens_);
  tokens_ = n;
}

int64_t expected_cache_bytes(const ModelConfig& cfg, int64_t max_tokens) {
  const int64_t per_position = cfg.num_key_value_heads * (cfg.qk_head_dim + cfg.v_head_dim);
  int64_t elements = 0;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l)
    elements += kv_positions(cfg, l, max_tokens) * per_position + mamba_state_elements(cfg, l);
  return elements * static_cast<int64_t>(sizeof(float));
}

}  // namespace hymba::infer
