#include "core/arena.h"

#include <algorithm>
#include <cstring>

namespace hymba {

namespace {
constexpr std::size_t kFloatsPerLine = kAlignment / sizeof(float);
std::size_t round_up(std::size_t n) { return (n + kFloatsPerLine - 1) / kFloatsPerLine * kFloatsPerLine; }
}  // namespace

Arena::Arena(std::size_t initial_floats) {
  if (initial_floats > 0) blocks_.push_back({make_aligned_floats(initial_floats), initial_floats, 0});
}

float* Arena::alloc_floats(std::size_t n) {
  std::size_t need = round_up(std::max<std::size_t>(n, 1));
  if (blocks_.empty() || blocks_.back().used + need > blocks_.back().size) {
    std::size_t size = std::max(need, blocks_.empty() ? need : blocks_.back().size);
    blocks_.push_back({make_aligned_floats(size), size, 0});
  }
  Block& b = blocks_.back();
  float* p = b.data.get() + b.used;
  b.used += need;
  used_total_ += need;
  peak_ = std::max(peak_, used_total_);
  std::memset(p, 0, n * sizeof(float));
  return p;
}

Tensor Arena::alloc(const Shape& shape) {
  return Tensor{alloc_floats(static_cast<std::size_t>(shape.numel())), shape};
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    // Consolidate into a single block sized for the peak of the last cycle.
    std::size_t size = peak_;
    blocks_.clear();
    blocks_.push_back({make_aligned_floats(size), size, 0});
  } else if (!blocks_.empty()) {
    blocks_.back().used = 0;
  }
  used_total_ = 0;
}

std::size_t Arena::capacity_floats() const {
  std::size_t c = 0;
  for (const Block& b : blocks_) c += b.size;
  return c;
}

}  // namespace hymba
