// Cache-line aligned float storage, used for parameter blocks and arenas.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include <sys/mman.h>

namespace hymba {

inline constexpr std::size_t kAlignment = 64;

struct AlignedFree {
  std::size_t mapped_bytes = 0;  // non-zero: the block is an anonymous mapping
  void operator()(float* p) const noexcept {
    if (mapped_bytes != 0)
      ::munmap(p, mapped_bytes);
    else
      std::free(p);
  }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;

// Blocks of at least this size start on a 2 MiB boundary and ask for
// transparent huge pages: their first touch then costs one page fault per
// 2 MiB instead of one per 4 KiB. Where faults are dear (about 20 us each in
// a virtual machine) the first steps of a 28M-parameter training run spent
// 10 s in them; fewer TLB misses help the steady state too.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` (a multiple of kAlignment) of uninitialised storage, 64-byte
// aligned, released with std::free. Throws std::bad_alloc.
inline void* allocate_block(std::size_t bytes) {
  const bool huge = bytes >= kHugePageBytes;
  const std::size_t align = huge ? kHugePageBytes : kAlignment;
  const std::size_t size = (bytes + align - 1) / align * align;  // aligned_alloc wants a multiple of align
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(p, size, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  return p;
}

// Allocates n floats, zero-filled, 64-byte aligned. n == 0 gives nullptr.
inline AlignedFloats make_aligned_floats(std::size_t n) {
  if (n == 0) return AlignedFloats(nullptr);
  std::size_t bytes = (n * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = allocate_block(bytes);
  std::memset(p, 0, bytes);
  return AlignedFloats(static_cast<float*>(p));
}

// n zero floats whose pages are mapped lazily: a page costs memory only once
// written, so the float32 rows of weights a model holds in a block format
// (model/held_weights.h) cost nothing. Page-aligned. Small blocks fall back
// to make_aligned_floats.
inline AlignedFloats make_lazy_zero_floats(std::size_t n) {
  constexpr std::size_t kMinMapped = std::size_t{1} << 20;
  if (n * sizeof(float) < kMinMapped) return make_aligned_floats(n);
  const std::size_t bytes = n * sizeof(float);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return AlignedFloats(static_cast<float*>(p), AlignedFree{bytes});
}

// A std::vector allocator giving 64-byte aligned storage: rows a kernel
// reads in whole cache lines (the decode step's keys and values) then start
// on a line instead of straddling one more.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlignment})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kAlignment}); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace hymba
