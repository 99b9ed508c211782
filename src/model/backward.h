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

// model_backward after a forward with opt.recompute (the options it ran
// with): each layer's activations are recomputed into `scratch`, layer by
// layer, which is rewound after each.
void model_backward_recompute(const ModelPlan& plan, const float* P, float* G, Activations<float>& acts,
                              float dloss, double label_smoothing, const ForwardOptions& opt, Arena& arena,
                              Arena& scratch);

// Accumulates into G the gradient of a loss whose gradient with respect to
// the final-norm output acts.hf is dhf [R, d] (every row, meta rows included;
// rows a loss does not read are zero). The entry point for heads other than
// the LM head (sequence classification); the last forward may be hidden_only.
void model_backward_from_hidden(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts,
                                const float* dhf, Arena& arena);
// The same from the gradient of the token rows only (acts.hf_tok, [B*T, d]):
// meta rows get none. For heads that read token positions (synth compression).
void model_backward_from_token_hidden(const ModelPlan& plan, const float* P, float* G, const Activations<float>& acts,
                                      const float* dhf_tok, Arena& arena);

}  // namespace hymba
