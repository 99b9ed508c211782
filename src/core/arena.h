// Bump allocator for activations: one block reused across training steps.
// reset() rewinds without freeing, so steady-state steps allocate nothing.
// alloc() zero-fills (backward passes accumulate into their buffers);
// alloc_uninit() skips the fill for buffers the caller overwrites whole, which
// spares a memory pass over most activations. With poisoning on (debug builds,
// the float64 reference arena, or set_poison), alloc_uninit() fills NaN so a
// read of an element nobody wrote shows up in the result.
// Templated on the element type so the float64 reference model (used for
// gradient checks) runs the same graph code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "core/aligned.h"
#include "core/tensor.h"

namespace hymba {

template <typename T>
class BasicArena {
 public:
  explicit BasicArena(std::size_t initial_elems = 0) {
    if (initial_elems > 0) add_block(initial_elems);
  }

  // n elements, zero-filled, 64-byte aligned. Large fills are split over
  // the OpenMP threads (a single thread does not saturate memory bandwidth).
  T* alloc(std::size_t n) {
    T* p = take(n);
    constexpr std::size_t kChunk = std::size_t{1} << 16;
    const std::size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (std::size_t c = 0; c < chunks; ++c)
      std::memset(static_cast<void*>(p + c * kChunk), 0, std::min(kChunk, n - c * kChunk) * sizeof(T));
    return p;
  }

  // n elements, 64-byte aligned, contents unspecified (NaN when poisoning):
  // only for buffers that are fully written before they are read.
  T* alloc_uninit(std::size_t n) {
    T* p = take(n);
    if (poison_) std::fill(p, p + n, std::numeric_limits<T>::quiet_NaN());
    return p;
  }

  void set_poison(bool on) { poison_ = on; }
  bool poison() const { return poison_; }

  // Rewinds every allocation. If the last cycle overflowed into extra blocks,
  // the arena regrows to one block big enough for the whole cycle.
  void reset() {
    if (blocks_.size() > 1) {
      blocks_.clear();
      add_block(peak_);
    } else if (!blocks_.empty()) {
      blocks_.back().used = 0;
    }
    used_total_ = 0;
  }

  std::size_t used() const { return used_total_; }
  std::size_t peak() const { return peak_; }
  std::size_t capacity() const {
    std::size_t c = 0;
    for (const Block& b : blocks_) c += b.size;
    return c;
  }

 private:
#ifdef NDEBUG
  static constexpr bool kPoisonByDefault = std::is_same_v<T, double>;
#else
  static constexpr bool kPoisonByDefault = true;
#endif

  T* take(std::size_t n) {
    const std::size_t need = round_up(std::max<std::size_t>(n, 1));
    if (blocks_.empty() || blocks_.back().used + need > blocks_.back().size)
      add_block(std::max(need, blocks_.empty() ? need : blocks_.back().size));
    Block& b = blocks_.back();
    T* p = b.data.get() + b.used;
    b.used += need;
    used_total_ += need;
    peak_ = std::max(peak_, used_total_);
    return p;
  }

  struct Free {
    void operator()(T* p) const noexcept { std::free(p); }
  };
  struct Block {
    std::unique_ptr<T[], Free> data;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  static constexpr std::size_t kPerLine = kAlignment / sizeof(T);
  static std::size_t round_up(std::size_t n) { return (n + kPerLine - 1) / kPerLine * kPerLine; }

  void add_block(std::size_t elems) {
    const std::size_t bytes = (elems * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = allocate_block(bytes);
    blocks_.push_back({std::unique_ptr<T[], Free>(static_cast<T*>(p)), elems, 0});
  }

  std::vector<Block> blocks_;
  std::size_t used_total_ = 0;
  std::size_t peak_ = 0;
  bool poison_ = kPoisonByDefault;
};

// The float arena with Tensor-shaped allocation.
class Arena : public BasicArena<float> {
 public:
  using BasicArena<float>::BasicArena;
  Tensor alloc_tensor(const Shape& shape) {
    return Tensor{alloc(static_cast<std::size_t>(shape.numel())), shape};
  }
  std::size_t capacity_floats() const { return capacity(); }
};

}  // namespace hymba
