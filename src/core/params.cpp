#include "core/params.h"

#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"
#include "core/system_memory.h"

namespace hymba {

namespace {
constexpr int64_t kRowAlign = 16;  // floats; keeps every row 64-byte aligned
}

void ParamTable::add(const std::string& name, const Shape& shape, InitRule init, bool weight_decay,
                     const std::string& group) {
  HYMBA_CHECK(values_ == nullptr, "parameter table: cannot add '", name, "' after allocation");
  HYMBA_CHECK(!name.empty(), "parameter table: empty parameter name");
  HYMBA_CHECK(index_.count(name) == 0, "parameter table: duplicate parameter '", name, "'");
  HYMBA_CHECK(shape.rank > 0, "parameter table: '", name, "' has no dimensions");
  for (int i = 0; i < shape.rank; ++i)
    HYMBA_CHECK(shape[i] > 0, "parameter table: '", name, "' has non-positive dim ", shape.str());
  // Checked: the shapes come from user configs, and a wrapped size would
  // allocate a block too small for the rows laid out in it.
  const std::string what = "parameter table: size of '" + name + "' " + shape.str();
  int64_t numel = 1;
  for (int i = 0; i < shape.rank; ++i) numel = checked_mul(numel, shape[i], what);
  const int64_t padded = checked_add(numel, kRowAlign - 1, what) / kRowAlign * kRowAlign;
  ParamInfo p{name, shape, init, weight_decay, group, total_};
  total_ = checked_add(total_, padded,
                       "parameter table: the parameter count (num_hidden_layers x the layer widths) up to '" + name + "'");
  index_[name] = rows_.size();
  rows_.push_back(std::move(p));
}

void ParamTable::allocate(bool with_grads, bool with_optimizer) {
  auto n = static_cast<std::size_t>(total_);
  HYMBA_CHECK(n <= (SIZE_MAX - kAlignment) / sizeof(float), "parameter table: ", total_,
              " floats do not fit in the address space");
  // Lazily mapped: rows a model holds in a block format are never written.
  if (!values_) values_ = make_lazy_zero_floats(n);
  if (with_grads && !grads_) grads_ = make_aligned_floats(n);
  if (with_optimizer && !m_) {
    m_ = make_aligned_floats(n);
    v_ = make_aligned_floats(n);
  }
}

void ParamTable::adopt_values(AlignedFloats values) {
  HYMBA_CHECK(values_ != nullptr && values != nullptr, "parameter table: adopt_values before allocate");
  values_ = std::move(values);
  file_rows_.clear();
}

void apply_init(const InitRule& rule, const Shape& shape, float* data, Rng& rng) {
  const int64_t n = shape.numel();
  switch (rule.kind) {
    case InitKind::kNormal:
      for (int64_t i = 0; i < n; ++i) data[i] = rule.a * rng.normal();
      break;
    case InitKind::kUniform:
      for (int64_t i = 0; i < n; ++i) data[i] = rule.a * (2.0f * rng.uniform() - 1.0f);
      break;
    case InitKind::kConstant:
      for (int64_t i = 0; i < n; ++i) data[i] = rule.a;
      break;
    case InitKind::kMambaALog: {
      const int64_t cols = shape[shape.rank - 1];
      for (int64_t i = 0; i < n; ++i) data[i] = std::log(static_cast<float>(i % cols + 1));
      break;
    }
    case InitKind::kMambaDtBias: {
      // As in the Mamba reference: dt log-uniform in [dt_min, dt_max], floored
      // at 1e-4, stored as its inverse softplus so softplus(bias) = dt.
      const double lo = std::log(rule.a), hi = std::log(rule.b);
      for (int64_t i = 0; i < n; ++i) {
        double dt = std::exp(lo + (hi - lo) * rng.uniform_double());
        dt = std::max(dt, 1e-4);
        data[i] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
      }
      break;
    }
  }
}

void ParamTable::init(const Rng& rng) {
  HYMBA_CHECK(values_ != nullptr || rows_.empty(), "parameter table: init before allocate");
  for (const ParamInfo& p : rows_) {
    Rng r = rng.split(hash_name(p.name.c_str()));
    apply_init(p.init, p.shape, values_.get() + p.offset, r);
  }
}

void ParamTable::zero_grad() {
  if (grads_) std::memset(grads_.get(), 0, static_cast<std::size_t>(total_) * sizeof(float));
}

void ParamTable::for_each(const std::function<void(ParamSlot&)>& visit) {
  for (const ParamInfo& p : rows_) {
    ParamSlot slot{p, values_.get() + p.offset, grads_ ? grads_.get() + p.offset : nullptr,
                   m_ ? m_.get() + p.offset : nullptr, v_ ? v_.get() + p.offset : nullptr};
    visit(slot);
  }
}

void ParamTable::for_each(const std::function<void(const ParamInfo&, const float*)>& visit) const {
  for (const ParamInfo& p : rows_) visit(p, values_.get() + p.offset);
}

const ParamInfo& ParamTable::row(const std::string& name) const {
  auto it = index_.find(name);
  HYMBA_CHECK(it != index_.end(), "parameter table: no parameter named '", name, "'");
  return rows_[it->second];
}

const ParamInfo& ParamTable::info(const std::string& name) const { return row(name); }

Tensor ParamTable::value(const std::string& name) const {
  const ParamInfo& p = row(name);
  HYMBA_CHECK(values_ != nullptr, "parameter table: '", name, "' read before allocate");
  return Tensor{values_.get() + p.offset, p.shape};
}

Tensor ParamTable::grad(const std::string& name) const {
  const ParamInfo& p = row(name);
  HYMBA_CHECK(grads_ != nullptr, "parameter table: gradients of '", name, "' not allocated");
  return Tensor{grads_.get() + p.offset, p.shape};
}

int64_t ParamTable::num_params() const {
  int64_t n = 0;
  for (const ParamInfo& p : rows_) n += p.shape.numel();
  return n;
}

void ParamTable::drop_file_pages() const {
  for (const auto& [offset, n] : file_rows_)
    release_unwritten_file_pages(values_.get() + offset, n * static_cast<int64_t>(sizeof(float)));
}

}  // namespace hymba
