// Cached decoding: prefill a prompt with one full forward pass, then feed one
// token per sequence per step, reading and extending each sequence's cache.
// A step runs the model graph's row-wise layer pieces (projections, fusion,
// FFN) on one row per sequence, with the single-token kernels of
// step_kernels.h in place of attention, conv1d and the selective scan.
//
// Sequences are independent: each has its own SequenceCache and RoPE
// position, so prompts of different lengths are prefilled one by one (no
// padding) and then decoded together; nothing crosses between rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "infer/cache.h"
#include "infer/weight_format.h"
#include "model/model.h"

namespace hymba::infer {

class Decoder {
 public:
  // Keeps a reference to model, whose weights must not change while the
  // decoder lives (it keeps A = -exp(A_log) of every Mamba layer).
  // weights: the format of the decode steps' linear layers (weight_format.h).
  explicit Decoder(Model& model, WeightFormat weights = WeightFormat::kF32);
  WeightFormat weight_format() const { return linears_.format(); }
  int64_t quantized_bytes() const { return linears_.quantized_bytes(); }

  const ModelConfig& config() const { return model_.config(); }
  int64_t vocab_size() const { return model_.config().vocab_size; }

  // An empty cache with room for max_tokens tokens (prompt + generated).
  SequenceCache new_cache(int64_t max_tokens) const { return SequenceCache(model_.config(), max_tokens); }

  // Starts cache over with prompt: runs [meta | prompt] through the full
  // forward and fills the cache from it. Returns the logits after the last
  // prompt token [V]; all_logits, when given, receives every position's [T, V].
  std::vector<float> prefill(SequenceCache& cache, std::span<const int32_t> prompt,
                             std::vector<float>* all_logits = nullptr);

  // Feeds tokens[i] to caches[i] (each prefilled, each distinct) and writes
  // the next-token logits [caches.size(), V].
  void step(std::span<SequenceCache* const> caches, std::span<const int32_t> tokens, float* logits);

  // High-water marks of activation memory: the full forward used by prefill
  // (Model::activation_bytes()) and one decode step.
  size_t prefill_activation_bytes() const { return model_.activation_bytes(); }
  size_t step_activation_bytes() const { return arena_.peak() * sizeof(float); }

 private:
  void fill_cache(SequenceCache& cache, int64_t T);
  void commit_kv(std::span<SequenceCache* const> caches);

  Model& model_;
  DecoderLinears linears_;
  Arena arena_;
  std::vector<std::vector<float>> neg_exp_a_;  // per Mamba layer: -exp(A_log) [d_inner, d_state]
  std::vector<LayerActs<float>> acts_;         // the current step's layer activations
  std::vector<int64_t> positions_, n_cached_;
  std::vector<const float*> k_ptrs_, v_ptrs_;
  std::vector<float*> state_ptrs_;
};

}  // namespace hymba::infer
