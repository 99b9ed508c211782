// The parameter table: one row per tensor (name, shape, init rule, decay).
// It drives allocation of parameters, gradients and optimizer moments as single
// contiguous blocks, and every whole-model pass (init, save, load, zero-grad,
// optimizer) visits the rows in the order they were declared.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/aligned.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace hymba {

enum class InitKind {
  kNormal,       // N(0, a^2)
  kUniform,      // U(-a, a)
  kConstant,     // every element = a (zeros, ones)
  kMambaALog,    // row-wise log(1..n_cols): A = -exp(A_log) = -(1..d_state)
  kMambaDtBias,  // inverse softplus of dt ~ logU(a=dt_min, b=dt_max), floored
};

struct InitRule {
  InitKind kind = InitKind::kConstant;
  float a = 0.0f;
  float b = 0.0f;

  static InitRule normal(float std) { return {InitKind::kNormal, std, 0}; }
  static InitRule uniform(float bound) { return {InitKind::kUniform, bound, 0}; }
  // PyTorch's nn.Linear default (kaiming_uniform with a = sqrt(5)) for weights
  // and biases alike: U(+-1/sqrt(fan_in)).
  static InitRule kaiming_uniform(int64_t fan_in) {
    return uniform(static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))));
  }
  static InitRule constant(float v) { return {InitKind::kConstant, v, 0}; }
  static InitRule zeros() { return constant(0.0f); }
  static InitRule ones() { return constant(1.0f); }
  static InitRule mamba_a_log() { return {InitKind::kMambaALog, 0, 0}; }
  static InitRule mamba_dt_bias(float dt_min, float dt_max) {
    return {InitKind::kMambaDtBias, dt_min, dt_max};
  }
};

struct ParamInfo {
  std::string name;
  Shape shape;
  InitRule init;
  bool weight_decay = true;  // false for norms, biases, meta tokens
  std::string group;         // what it belongs to, for reports ("attention", "mamba", ...)
  int64_t offset = 0;        // in floats, within each block
};

// What a visitor sees for one row. grad/m/v are null until allocated.
struct ParamSlot {
  const ParamInfo& info;
  float* value;
  float* grad;
  float* m;
  float* v;
  int64_t numel() const { return info.shape.numel(); }
};

class ParamTable {
 public:
  // Declares a tensor. Names must be unique; shape dims must be positive.
  void add(const std::string& name, const Shape& shape, InitRule init, bool weight_decay = true,
           const std::string& group = "");

  // Allocates storage for every declared row. Gradients and the two AdamW
  // moments are optional so that inference carries only the weights.
  void allocate(bool with_grads, bool with_optimizer);

  // Fills every parameter from its rule; each row draws from
  // rng.split(hash_name(name)), so adding a row never changes the others.
  void init(const Rng& rng);
  void zero_grad();

  void for_each(const std::function<void(ParamSlot&)>& visit);
  void for_each(const std::function<void(const ParamInfo&, const float*)>& visit) const;

  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const ParamInfo& info(const std::string& name) const;
  Tensor value(const std::string& name) const;
  Tensor grad(const std::string& name) const;

  const std::vector<ParamInfo>& rows() const { return rows_; }
  int64_t total_floats() const { return total_; }  // padded block size
  int64_t num_params() const;                      // sum of numels
  bool allocated() const { return values_ != nullptr || rows_.empty(); }
  bool has_grads() const { return grads_ != nullptr; }
  bool has_optimizer() const { return m_ != nullptr; }

  float* values_block() const { return values_.get(); }
  // Replaces the allocated value block by `values` (total_floats() floats
  // laid out as this table's rows, e.g. a checkpoint file mapped copy-on-write
  // by map_params, core/safetensors.h).
  void adopt_values(AlignedFloats values);
  // Rows whose values are copy-on-write file pages (a held checkpoint's
  // embedding, SafetensorsFile::share_pages_with_file): drop_file_pages()
  // takes their unwritten pages out of the resident set again. Each read
  // maps its neighbours too (the kernel's fault-around: 64 KiB), so an
  // embedding's lookups of random tokens soon make all of it resident; the
  // decoder calls this after a prefill and every so many steps.
  void note_file_pages(int64_t offset, int64_t n) { file_rows_.emplace_back(offset, n); }
  void drop_file_pages() const;
  float* grads_block() const { return grads_.get(); }
  float* m_block() const { return m_.get(); }
  float* v_block() const { return v_.get(); }

 private:
  const ParamInfo& row(const std::string& name) const;

  std::vector<ParamInfo> rows_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
  AlignedFloats values_, grads_, m_, v_;
  std::vector<std::pair<int64_t, int64_t>> file_rows_;  // (offset, floats)
};

// Fills n floats following rule for a tensor of the given shape.
void apply_init(const InitRule& rule, const Shape& shape, float* data, Rng& rng);

}  // namespace hymba
