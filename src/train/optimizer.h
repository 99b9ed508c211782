// AdamW with decoupled weight decay, global-norm gradient clipping and the
// cosine learning-rate schedule with linear warmup, over the parameter table.
#pragma once

#include <cstdint>

#include "core/params.h"

namespace hymba {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied only to rows with weight_decay = true
  // Decay every parameter, norms, biases, meta tokens, A_log, D and β
  // included (seed 001 hands model.parameters() to AdamW); the recipe key
  // weight_decay_scope "all" against "matrices" (the default).
  bool decay_all = false;
};

// One update at 1-based step t with learning rate lr. Rows flagged
// weight_decay = false (norms, biases, meta tokens, A_log, D) are not decayed
// unless cfg.decay_all.
void adamw_step(ParamTable& table, const AdamWConfig& cfg, double lr, int64_t t);

// L2 norm of all gradients, summed in double in a fixed order (deterministic).
double grad_global_norm(const ParamTable& table);

// Scales gradients so their global norm is at most max_norm (<= 0: off).
// Returns the norm before clipping.
double clip_grad_norm(ParamTable& table, double max_norm);

// Multiplies every gradient by s (used to average accumulated micro-batches).
void scale_grads(ParamTable& table, float s);

struct LrSchedule {
  double peak = 3e-4;
  double floor = 3e-5;     // final learning rate of the cosine
  int64_t warmup = 100;    // linear ramp from peak/warmup to peak
  int64_t total = 1000;    // steps; cosine from warmup to total
  // Learning rate for 0-based step s.
  double at(int64_t s) const;
};

}  // namespace hymba
