// The whole-model backward pass (float32), the mirror of model_forward.
#pragma once

#include "core/arena.h"
#include "model/forward.h"

namespace hymba {

// Accumulates into G (the gradient block, same offsets as P) the gradient of
// dloss * (sum of scored row losses) of the last forward, which must have had
// targets. For the mean loss pass dloss = 1 / scored. Scratch comes from arena.
void model_backward(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts, float dloss,
                    double label_smoothing, Arena& arena);

// The same walk from the gradient of the final norm's token rows (hf_tok,
// [B*T, d]) instead of a loss: for heads other than the LM head.
void model_backward_from_hidden(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts,
                                const float* dhidden, Arena& arena);

}  // namespace hymba
