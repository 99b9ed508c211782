// One description of a layer's work, which every walker of the layers runs:
// the full forward (model_forward, recompute_layer), a decode step and a
// prefill chunk (infer/decoder). The row-wise stages are the graph's own
// pieces (model/forward.h); the sequence mixers are the walker's, since each
// reads its past differently: the whole sequence, a cache plus one row, a
// cache plus a chunk.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "model/forward.h"

namespace hymba {

// A layer's stages, in the order they run.
enum class LayerStage {
  kInputProjection,  // input norm; projections into proj [Q | K | V | x | z]
  kAttention,        // RoPE, query scaling, attention over the KV group's keys (the walker's)
  kMamba,            // conv, SiLU, x/dt projections, scan (the walker's)
  kMixerOutput,      // the branch outputs (one, or both fused) into o
  kResidualFfn,      // residual add, FFN, residual add (dropout when training)
  kBlockLink,        // on a layer closing a linked block: the link to the block's input
};

// The stages of layer lp: attention and Mamba only where the layer has them,
// the block link only where it closes a linked block. A fixed array: a
// decode step walks it for every layer without allocating.
struct LayerStages {
  std::array<LayerStage, 6> list{};
  int count = 0;
  const LayerStage* begin() const { return list.data(); }
  const LayerStage* end() const { return list.data() + count; }
};
LayerStages layer_stages(const LayerPlan& lp);

// A mixer stage as a walker runs it on layer lp's activations (a.proj set).
template <typename T>
using MixerFn = std::function<void(const LayerPlan& lp, LayerActs<T>& a)>;

// What one walker gives every layer it runs.
template <typename T>
struct LayerWalker {
  const ModelPlan& plan;
  const T* params;
  const ForwardOptions& opt;  // dropout (training only)
  BasicArena<T>& arena;       // the layer's activations
  int64_t rows;
  LinearFn<T> linear;  // empty: Ops<T>::matmul
  MixerFn<T> attention, mamba;
};

// Runs layer_stages(lp) on a, whose x_in the walker has set; block_in is the
// input of lp's linked block (read when lp.block_first >= 0).
template <typename T>
void walk_layer(const LayerWalker<T>& w, const LayerPlan& lp, LayerActs<T>& a, const T* block_in);

}  // namespace hymba
