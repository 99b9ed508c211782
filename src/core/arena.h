// Bump allocator for activations: one block reused across training steps.
// reset() rewinds without freeing, so steady-state steps allocate nothing.
#pragma once

#include <cstddef>
#include <vector>

#include "core/aligned.h"
#include "core/tensor.h"

namespace hymba {

class Arena {
 public:
  explicit Arena(std::size_t initial_floats = 0);

  // Returns a zero-filled tensor of the given shape, 64-byte aligned.
  Tensor alloc(const Shape& shape);
  float* alloc_floats(std::size_t n);

  // Rewinds every allocation. If the last cycle overflowed into extra blocks,
  // the arena regrows to one block big enough for the whole cycle.
  void reset();

  std::size_t used_floats() const { return used_total_; }
  std::size_t peak_floats() const { return peak_; }
  std::size_t capacity_floats() const;

 private:
  struct Block {
    AlignedFloats data;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  std::vector<Block> blocks_;
  std::size_t used_total_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace hymba
