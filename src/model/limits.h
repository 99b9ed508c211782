// Bounds on the dimensions of any model the engine builds or loads.
#pragma once

#include <cstdint>

namespace hymba {

// Bounds on model dimensions (docs/security.md). Far above any published
// model (the largest have ~100 layers, hidden 16k-25k, vocabularies of 256k),
// and low enough that products of a few of them cannot overflow 64 bits, so a
// hostile config is refused by name before anything is sized from it. The
// memory a model needs is checked against the machine separately.
inline constexpr int64_t kMaxLayers = 4096;            // num_hidden_layers, block_layers
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;  // vocab_size
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden_size, intermediate_size, head dims, dt_rank
inline constexpr int64_t kMaxHeads = int64_t{1} << 14;  // num_attention_heads, num_key_value_heads
inline constexpr int64_t kMaxMambaState = 4096;        // mamba_d_state
inline constexpr int64_t kMaxConvWidth = 1024;         // mamba_d_conv
inline constexpr int64_t kMaxExpand = 256;             // mamba_expand
inline constexpr int64_t kMaxMemoryTokens = int64_t{1} << 16;  // num_memory_tokens
inline constexpr int64_t kMaxPositions = int64_t{1} << 40;     // sliding_window, (orig_)max_position_embeddings

}  // namespace hymba
