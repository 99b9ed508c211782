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

}  // namespace hymba
