#include "ablate/seed_metrics.h"

#include <cstdio>

namespace hymba::ablate {

namespace {

int64_t attention_layers(const ModelConfig& cfg) {
  int64_t n = 0;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) n += cfg.has_attention(l) ? 1 : 0;
  return n;
}

std::string ratio_text(double a, double m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g:%g", a, m);
  return buf;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

KvSharingInfo kv_sharing_info(const ModelConfig& cfg) {
  KvSharingInfo k;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    if (!cfg.has_attention(l)) continue;
    (cfg.is_global(l) ? k.global : k.local).push_back(l);
    (cfg.is_kv_producer(l) ? k.producers : k.consumers).push_back(l);
  }
  k.groups = cfg.kv_reuse_group;
  k.reduction = seed000_kv_reduction(cfg);
  return k;
}

std::string kv_sharing_text(const KvSharingInfo& k) {
  if (k.producers.empty()) return "";
  std::string groups = "[";
  for (size_t i = 0; i < k.groups.size(); ++i) groups += (i ? ", " : "") + list_text(k.groups[i]);
  groups += "]";
  char reduction[32];
  std::snprintf(reduction, sizeof reduction, "%.2fx", k.reduction);
  return "Global layers: " + list_text(k.global) + "; Local layers: " + list_text(k.local) +
         "; KV reuse groups: " + groups + "; Producer layers: " + list_text(k.producers) +
         "; Consumer layers: " + list_text(k.consumers) + "; KV cache reduction: " + reduction;
}

double seed000_kv_reduction(const ModelConfig& cfg) {
  int64_t layers = 0, owners = 0;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    if (!cfg.has_attention(l)) continue;
    ++layers;
    owners += cfg.is_kv_producer(l) ? 1 : 0;
  }
  return owners > 0 ? static_cast<double>(layers) / static_cast<double>(owners) : 1.0;
}

int64_t seed002_kv_owners(const ModelConfig& cfg) {
  const int64_t n = attention_layers(cfg);
  return cfg.kv_reuse_group.empty() ? n : (n + 1) / 2;
}

double seed002_cache_mb(const ModelConfig& cfg, int64_t context) {
  if (cfg.num_attention_heads <= 0) return 0.0;
  const int64_t kv_heads = cfg.num_key_value_heads > 0 ? cfg.num_key_value_heads : cfg.num_attention_heads;
  constexpr int64_t kBytes = 2;  // fp16, as seed 002's torch.float16
  const double per_owner =
      static_cast<double>(kv_heads) * static_cast<double>(context) *
      static_cast<double>(cfg.qk_head_dim + cfg.v_head_dim) * kBytes;  // K and V
  return per_owner * static_cast<double>(seed002_kv_owners(cfg)) / (1024.0 * 1024.0);
}

ConfiguredDims configured_dims(const ModelConfig& cfg) {
  ConfiguredDims d;
  bool any_mamba = false;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) any_mamba |= cfg.has_mamba(l);
  d.attn = attention_layers(cfg) > 0 ? cfg.num_attention_heads * cfg.qk_head_dim : 0;
  d.mamba = any_mamba ? cfg.mamba_width() : 0;
  const int64_t sum = d.attn + d.mamba;
  d.attention_share = sum > 0 ? static_cast<double>(d.attn) / static_cast<double>(sum) : 0.0;
  if (cfg.attn_mamba_ratio.size() == 2 && d.attn > 0 && d.mamba > 0) {
    d.ratio = ratio_text(cfg.attn_mamba_ratio[0], cfg.attn_mamba_ratio[1]);  // as configured, seed 002's way
  } else if (d.attn == 0) {
    d.ratio = "0:1";
  } else if (d.mamba == 0) {
    d.ratio = "1:0";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(d.mamba) / static_cast<double>(d.attn));
    d.ratio = ratio_text(1, std::stod(buf));
  }
  return d;
}

double seconds_per_100_tokens(double decode_tokens_per_s) {
  return decode_tokens_per_s > 0 ? 100.0 / decode_tokens_per_s : 0.0;
}

}  // namespace hymba::ablate
