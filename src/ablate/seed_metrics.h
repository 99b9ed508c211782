// Figures defined as the seed notebooks define them, computed from a model
// config alone. They sit beside the engine's own figures in the reports
// (docs/ablation.md, "Seed definitions"), which measure the same things
// differently:
//
//  - KV reduction (seed 000 / seed 001's get_kv_sharing_info): layers with
//    attention / layers that own a K/V cache. Context, sliding windows and
//    meta tokens play no part. The engine's figure is the cache of the same
//    model without sharing or SWA over this one's, at a stated context.
//  - Cache (MB) (seed 002's estimate_kv_cache_bytes): 2 (K and V) x KV heads x
//    context x head dim x 2 bytes x owners, where every layer caches the whole
//    context (no window, no meta tokens) and a model with KV sharing pairs ALL
//    consecutive layers (0,1), (2,3), ..., global ones included.
//  - Attn:Mamba and attention share from the configured branch widths (seed
//    002's ParamRatio and AttnShare), not from counted parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace hymba::ablate {

// Seed 001's get_kv_sharing_info / get_attention_pattern_info, as its
// notebook prints them: global and local attention layers, the KV reuse
// groups, the layers that compute K/V (producers) and those that reuse a
// producer's (consumers), and seed 000's reduction (layers / producers).
struct KvSharingInfo {
  std::vector<int64_t> global, local, producers, consumers;
  std::vector<std::vector<int64_t>> groups;
  double reduction = 1.0;
};
KvSharingInfo kv_sharing_info(const ModelConfig& cfg);  // cfg resolved
// The printout's lines for one model ("" without attention layers).
std::string kv_sharing_text(const KvSharingInfo& info);

// Seed 002's context: its cache figure is at its training length.
inline constexpr int64_t kSeed002CacheContext = 512;

// Layers with attention / layers that own a K/V cache; 1 for a model without
// attention (seed 000 prints 1.00x for its Mamba-only row).
double seed000_kv_reduction(const ModelConfig& cfg);

// K/V owners as seed 002 counts them: every attention layer, or with KV
// sharing (any kv_reuse_group) ceil(attention layers / 2), consecutive layers
// paired regardless of global/local.
int64_t seed002_kv_owners(const ModelConfig& cfg);
// Seed 002's Cache(MB) at `context` tokens, fp16, MiB (2^20 bytes).
double seed002_cache_mb(const ModelConfig& cfg, int64_t context = kSeed002CacheContext);

// Branch widths as configured: attention = heads x qk head dim (0 without
// attention layers), Mamba = the Mamba branch's input width (0 without Mamba).
struct ConfiguredDims {
  int64_t attn = 0, mamba = 0;
  std::string ratio;  // "1:8.48" (a configured attn_mamba_ratio), "1:1", "0:1", "1:0"
  double attention_share = 0.0;  // attn / (attn + mamba)
};
ConfiguredDims configured_dims(const ModelConfig& cfg);

// Seed 000's "time per 100 tokens" in seconds from decode tokens per second
// (0 when no rate was measured).
double seconds_per_100_tokens(double decode_tokens_per_s);

}  // namespace hymba::ablate
