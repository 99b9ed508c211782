// Seed 003's learned mixing share of a model with learned-beta fusion: per
// layer, mean|beta_attn| / (mean|beta_attn| + mean|beta_mamba|), in layer
// order; empty for other fusions. The trainer logs it at every evaluation
// and the ablation report shows it per layer.
#pragma once

#include <vector>

#include "model/model.h"

namespace hymba {

std::vector<double> learned_attention_mixing(const Model& model);

}  // namespace hymba
