// An arena that only counts: the same alloc / alloc_uninit / reset / used /
// peak as BasicArena (core/arena.h), each allocation rounded up to a 64-byte
// line as there, but no memory behind it (every allocation is nullptr). The
// memory estimate runs the graph's own allocation functions through one to
// learn the activation arena's high-water mark before anything is allocated.
// Counts are doubles: the sizes of a refused, absurd run must not wrap.
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/aligned.h"

namespace hymba {

template <typename T>
class SizingArena {
 public:
  T* alloc(std::size_t n) { return take(n); }
  T* alloc_uninit(std::size_t n) { return take(n); }
  void reset() { used_ = 0; }
  double used() const { return used_; }
  double peak() const { return peak_; }

 private:
  static constexpr std::size_t kPerLine = kAlignment / sizeof(T);

  T* take(std::size_t n) {
    const std::size_t lines = (std::max<std::size_t>(n, 1) + kPerLine - 1) / kPerLine;
    used_ += static_cast<double>(lines) * static_cast<double>(kPerLine);
    peak_ = std::max(peak_, used_);
    return nullptr;
  }

  double used_ = 0, peak_ = 0;
};

}  // namespace hymba
