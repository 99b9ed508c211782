// Cached decoding: prefill a prompt in chunks, then feed one token per
// sequence per step, reading and extending each sequence's cache. Both run
// the model graph's row-wise layer pieces (projections, fusion, FFN); a step
// on one row per sequence with the decode-step kernels (kernels/cpu/
// attention_step.h, conv_step.h, ssm_step.h), a chunk on many rows of one
// sequence with the full-sequence kernels given the cache as context
// (attention over cached keys, conv and scan from the cached states).
//
// The meta tokens' keys, values and Mamba states do not depend on the
// prompt: the decoder computes them once (the meta prefix) and copies them
// into each new sequence, so a prefill costs the prompt's positions only.
//
// Sequences are independent: each has its own SequenceCache and RoPE
// position, so prompts of different lengths are prefilled one by one (no
// padding) and then decoded together; nothing crosses between rows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "infer/cache.h"
#include "infer/step_threads.h"
#include "infer/weight_format.h"
#include "model/layer_walk.h"
#include "model/model.h"

namespace hymba::infer {

// Threads for `rows` rows through the model: a decode step (or a short
// chunk) of a model under 64M parameters runs on one thread (waking a
// second costs more than it saves; see threads_for_param_rows).
int decode_threads(const Model& model, int64_t rows);

class Decoder {
 public:
  // Keeps a reference to model, whose weights must not change while the
  // decoder lives (it keeps A = -exp(A_log) of every Mamba layer).
  // weights: the format of the decode steps' linear layers (weight_format.h).
  explicit Decoder(Model& model, WeightFormat weights = WeightFormat::kF32);
  Decoder(const Decoder&) = delete;  // lin_ points at this decoder's linears_
  Decoder& operator=(const Decoder&) = delete;
  WeightFormat weight_format() const { return linears_.format(); }
  int64_t quantized_bytes() const { return linears_.quantized_bytes() + linears_.held_bytes(); }
  const DecoderLinears& linears() const { return linears_; }
  // bf16: whether prefill chunks multiply by the bf16 weights too (scoring
  // the format) or, by default, by the float32 ones (faster). q8 and q4 run
  // every product on their blocks either way (weight_format.h).
  void set_quantized_prefill(bool on) { linears_.quantized_rows(on); }
  // Whether the output head runs in the format too (the default; weight_format.h).
  void set_head_in_format(bool on) { linears_.head_in_format(on); }

  const ModelConfig& config() const { return model_.config(); }
  int64_t vocab_size() const { return model_.config().vocab_size; }

  // An empty cache with room for max_tokens tokens (prompt + generated).
  SequenceCache new_cache(int64_t max_tokens) const { return SequenceCache(model_.config(), max_tokens); }

  // Starts cache over with prompt: start(cache), then extend(cache, prompt).
  // Returns the logits after the last prompt token [V]; all_logits, when
  // given, receives every position's [T, V].
  std::vector<float> prefill(SequenceCache& cache, std::span<const int32_t> prompt,
                             std::vector<float>* all_logits = nullptr);

  // Empties cache and copies the meta prefix into it (computed on first use).
  void start(SequenceCache& cache);
  // Appends tokens to a started cache, running them in chunks of at most
  // prefill_chunk() positions (activation memory grows with the chunk, not
  // the prompt). Returns the logits after the last token [V]; all_logits,
  // when given, receives every token's [T, V]. A caller may also feed a long
  // prompt one chunk per call, between decode steps of other sequences.
  std::vector<float> extend(SequenceCache& cache, std::span<const int32_t> tokens,
                            std::vector<float>* all_logits = nullptr);
  int64_t prefill_chunk() const { return prefill_chunk_; }
  void set_prefill_chunk(int64_t positions);
  // The meta prefix every sequence starts from (computed on first use).
  const SequenceCache& meta_prefix();
  // Positions run through prefill chunks so far, meta prefix included.
  int64_t chunk_positions_run() const { return chunk_positions_run_; }

  // Feeds tokens[i] to caches[i] (each prefilled, each distinct) and writes
  // the next-token logits [caches.size(), V].
  // Steps of up to kTimedRows sequences time one thread against all of
  // them on their first steps and keep the faster (step_threads.h).
  void step(std::span<SequenceCache* const> caches, std::span<const int32_t> tokens, float* logits);
  static constexpr int64_t kTimedRows = 4;
  // Runs every step on n threads (at most the process's; 0: decode_threads,
  // timed as above for few sequences).
  void set_step_threads(int n) { forced_step_threads_ = n; }
  // The threads steps of `rows` sequences settled on (0: still timing).
  int step_threads(int64_t rows) const;

  // High-water marks of activation memory: prefill chunks and decode steps.
  size_t prefill_activation_bytes() const { return (chunk_arena_.peak() + layer_arena_.peak()) * sizeof(float); }
  size_t step_activation_bytes() const { return (arena_.peak() + step_layer_arena_.peak()) * sizeof(float); }

 private:
  // Runs C rows of one sequence continuing from cache: the meta tokens
  // (ids null, cache empty) or tokens ids[0..C). Writes the logits of every
  // row [C, V] to logits, or of the last row only when last_only.
  void run_chunk(SequenceCache& cache, const int32_t* ids, int64_t C, float* logits, bool last_only);
  // Runs every layer (model/layer_walk.h) on R rows from the residual stream
  // x, with the walker's attention and Mamba; kept holds what outlives a
  // layer, layer_arena one layer's activations. Returns the last layer's output.
  float* walk_layers(float* x, int64_t R, Arena& kept, Arena& layer_arena, const MixerFn<float>& attention,
                     const MixerFn<float>& mamba);
  void chunk_attention(SequenceCache& cache, const LayerPlan& lp, int64_t C, bool meta);
  void chunk_mamba(SequenceCache& cache, const LayerPlan& lp, int64_t C);
  // A decode step's attention and Mamba branches of one layer, every sequence at once.
  void step_attention(std::span<SequenceCache* const> caches, const LayerPlan& lp, LayerActs<float>& a);
  void step_mamba(std::span<SequenceCache* const> caches, const LayerPlan& lp, LayerActs<float>& a);
  void commit_kv(std::span<SequenceCache* const> caches);
  // x[R, d] = the embedding rows of ids: from the float32 table, or widened
  // from the model's held blocks (a GGUF file's Q8_0 / Q4_0 embedding; a
  // tied one from the head's packed copy of them).
  void embed_tokens(float* x, const int32_t* ids, int64_t R) const;
  // Takes the pages of embedding rows that lookups read (and the kernel's
  // fault-around with them) out of the resident set again: the parameter
  // table's file pages (ParamTable::drop_file_pages) and those of an
  // embedding held in a file mapping that is looked up there (untied: a
  // tied one is looked up in the head's packed copy).
  void drop_file_pages() const;

  Model& model_;
  DecoderLinears linears_;
  LinearFn<float> lin_;  // the graph's linear layers through linears_
  // A prefill chunk's kept rows (the residual stream between layers, a
  // linked block's input) and one layer's activations, reset per layer.
  Arena arena_, chunk_arena_, layer_arena_;
  Arena step_layer_arena_;                   // a decode step's layer; arena_ holds what the step keeps
  std::vector<const float*> new_k_, new_v_;  // per producer layer: the step's new key / value rows
  // Steps between drop_file_pages calls: a batch of 16 faults in
  // up to 1 MiB of embedding pages a step; a call costs about a millisecond.
  static constexpr int kDropFilePagesEvery = 32;
  int steps_since_drop_ = 0;
  int64_t prefill_chunk_ = 512;
  int64_t chunk_positions_run_ = 0;
  std::optional<SequenceCache> meta_prefix_;
  // Per KV producer, during a chunk: [meta | cached tokens | chunk] K and V
  // rows in order, read by the producer and its consumers.
  std::vector<std::vector<float>> chunk_k_, chunk_v_;
  std::vector<int64_t> chunk_positions_;
  std::vector<std::vector<float>> neg_exp_a_;  // per Mamba layer: -exp(A_log) [d_inner, d_state]
  const HeldMatrix* held_embedding_ = nullptr;  // the embedding in blocks, when the model holds it
  bool embedding_is_packed_ = false;             // ... and it is the tied head, looked up in its packed copy
  std::vector<LayerActs<float>> acts_;         // the current step's layer activations
  std::vector<int64_t> positions_, n_cached_;
  std::vector<const float*> k_ptrs_, v_ptrs_;
  std::vector<float*> state_ptrs_;
  std::map<int64_t, StepThreads> step_threads_;  // per sequence count up to kTimedRows
  int forced_step_threads_ = 0;
};

}  // namespace hymba::infer
