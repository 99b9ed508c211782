// A model instance: config, parameter table (values, and gradients and AdamW
// moments when training), the graph plan and the activation arena.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/arena.h"
#include "core/params.h"
#include "model/backward.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/held_weights.h"
#include "model/plan.h"

namespace hymba {

class Model {
 public:
  // training: also allocate gradients and optimizer moments.
  Model(const ModelConfig& cfg, bool training);

  const ModelConfig& config() const { return plan_.cfg; }
  const ModelPlan& plan() const { return plan_; }
  ParamTable& params() { return params_; }
  const ParamTable& params() const { return params_; }

  // Weight matrices held in a block format (model/held_weights.h), by
  // parameter name; empty when every weight is float32. hold() takes a
  // matrix of linear_weight_offsets() (plan.h), the token embedding or the
  // output head, whose shape matches.
  void hold(const std::string& name, HeldMatrix m);
  const std::map<std::string, HeldMatrix>& held() const { return held_; }
  // The held matrices' format (nullopt: none held).
  std::optional<BlockFormat> held_format() const;
  // Throws a one-line error naming `what` when matrices are held: float32
  // work cannot use their (never written) float32 rows.
  void require_float_weights(const std::string& what) const;

  // Random initialisation from the table's rules (deterministic per seed).
  void init(uint64_t seed);

  // Runs ids [B, T]; with targets returns the summed loss and counts.
  // Activations are kept for backward() until the next forward().
  LossStats forward(const int32_t* ids, const int32_t* targets, int64_t B, int64_t T,
                    const ForwardOptions& opt = {});
  // Accumulates into the gradients d(loss_scale * mean loss) of the last
  // forward (which needs targets and at least one scored token).
  void backward(float loss_scale = 1.0f);

  // Accumulates into the gradients the gradient of a loss on the final-norm
  // output of the last forward: dhidden [B, M + T, d], meta rows first in
  // each sequence (see hidden()). For heads other than the LM head.
  void backward_from_hidden(const float* dhidden);
  // [B, M + T, d] final-norm output of the last forward (meta rows first in
  // each sequence): the features a classification head pools.
  const float* hidden() const { return acts_.hf; }
  // The same for the token rows only: d(token_hidden()) [B*T, d].
  void backward_from_token_hidden(const float* dhidden_tok);
  // [B*T, d] final-norm output of the last forward's token rows (the LM head's input).
  const float* token_hidden() const { return acts_.hf_tok; }

  // Everything the last forward kept (for tests and debugging tools).
  const Activations<float>& activations() const { return acts_; }
  // [B, T, V] logits of the last forward.
  const float* logits() const { return acts_.logits; }
  int64_t batch() const { return acts_.B; }
  int64_t seq_len() const { return acts_.T_; }
  // Arena high-water marks in bytes (activations + backward scratch, and the
  // per-layer scratch of forwards that release their activations).
  size_t activation_bytes() const { return (arena_.peak() + scratch_.peak()) * sizeof(float); }
  // Fill activation buffers that skip zeroing with NaN (tests: a read of an
  // element nobody wrote then shows up in the loss or the gradients).
  void set_activation_poison(bool on) { arena_.set_poison(on); }

 private:
  ParamTable params_;
  ModelPlan plan_;
  std::map<std::string, HeldMatrix> held_;
  Arena arena_;
  Arena scratch_;  // per-layer activations of forwards with release_activations or recompute
  Activations<float> acts_;
  ForwardOptions last_opt_;
  LossStats last_loss_;
};

}  // namespace hymba
