#include "model/model.h"

#include "core/error.h"
#include "model/layout.h"
#include "model/memory_estimate.h"

namespace hymba {

namespace {
// The memory the weights need is checked from the config's dimensions before
// the table is declared: a config of 4096 wide layers is refused in
// microseconds, not after declaring (or allocating) gigabytes.
ParamTable declared(const ModelConfig& cfg, bool training) {
  parameter_memory(cfg, training).require_available("the model");
  ParamTable t;
  declare_parameters(cfg, t);
  return t;
}
}  // namespace

Model::Model(const ModelConfig& cfg, bool training)
    : params_(declared(cfg, training)), plan_(make_plan(cfg, params_)) {
  parameter_memory(params_, training).require_available("the model");
  params_.allocate(training, training);
}

void Model::init(uint64_t seed) {
  require_float_weights("initialising the weights");
  params_.init(Rng(seed));
}

void Model::hold(const std::string& name, HeldMatrix m) {
  const ParamInfo& info = params_.info(name);
  bool holdable = false;
  for (int64_t off : held_weight_offsets(plan_)) holdable = holdable || off == info.offset;
  HYMBA_CHECK(holdable, "tensor '", name, "' is not the embedding, the head or a weight matrix of a linear layer: ",
              "it cannot be held in ", to_string(m.format), " blocks");
  HYMBA_CHECK(info.shape.rank == 2 && info.shape[0] == m.rows && info.shape[1] == m.cols, "tensor '", name,
              "': held blocks of [", m.rows, ",", m.cols, "] for shape ", info.shape.str());
  HYMBA_CHECK(m.blocks != nullptr, "tensor '", name, "': held without blocks");
  held_.insert_or_assign(name, std::move(m));
}

std::optional<BlockFormat> Model::held_format() const {
  if (held_.empty()) return std::nullopt;
  // One format per model, except that a q4 file may carry some q8 matrices.
  for (const auto& kv : held_)
    if (kv.second.format != BlockFormat::kQ8) return kv.second.format;
  return BlockFormat::kQ8;
}

void Model::require_float_weights(const std::string& what) const {
  if (held_.empty()) return;
  fail(what, " needs float32 weights, but this model holds ", held_.size(), " weight matrices in ",
       to_string(*held_format()), *held_format() == BlockFormat::kBF16 ? "" : " blocks",
       " (a quantized checkpoint or GGUF file): use the float32 checkpoint");
}

LossStats Model::forward(const int32_t* ids, const int32_t* targets, int64_t B, int64_t T,
                         const ForwardOptions& opt) {
  require_float_weights("the full-graph forward (training, scoring, features)");
  arena_.reset();
  last_opt_ = opt;
  last_loss_ = model_forward(plan_, params_.values_block(), ids, targets, B, T, opt, arena_, acts_, &scratch_);
  return last_loss_;
}

void Model::backward(float loss_scale) {
  HYMBA_CHECK(params_.has_grads(), "backward: model was built for inference (no gradients)");
  HYMBA_CHECK(acts_.has_targets, "backward: the last forward had no targets");
  if (last_loss_.scored == 0) return;  // nothing scored: zero gradient
  const float dloss = loss_scale / static_cast<float>(last_loss_.scored);
  if (last_opt_.recompute) {
    model_backward_recompute(plan_, params_.values_block(), params_.grads_block(), acts_, dloss,
                             last_opt_.label_smoothing, last_opt_, arena_, scratch_);
  } else {
    model_backward(plan_, params_.values_block(), params_.grads_block(), acts_, dloss, last_opt_.label_smoothing,
                   arena_);
  }
}

void Model::backward_from_hidden(const float* dhidden) {
  HYMBA_CHECK(params_.has_grads(), "backward: model was built for inference (no gradients)");
  model_backward_from_hidden(plan_, params_.values_block(), params_.grads_block(), acts_, dhidden, arena_);
}

void Model::backward_from_token_hidden(const float* dhidden_tok) {
  HYMBA_CHECK(params_.has_grads(), "backward: model was built for inference (no gradients)");
  model_backward_from_token_hidden(plan_, params_.values_block(), params_.grads_block(), acts_, dhidden_tok, arena_);
}

}  // namespace hymba
