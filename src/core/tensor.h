// A non-owning float32 view with a shape (row-major, contiguous).
// Ownership lives in the parameter table or the activation arena.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace hymba {

inline constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> list) {
    HYMBA_CHECK(list.size() <= kMaxDims, "shape has more than ", kMaxDims, " dims");
    for (int64_t d : list) dims[rank++] = d;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& other) const {
    if (rank != other.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != other.dims[i]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) {
      if (i > 0) s.push_back(',');
      s.append(std::to_string(dims[i]));
    }
    s.push_back(']');
    return s;
  }
};

struct Tensor {
  float* data = nullptr;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  float* begin() const { return data; }
  float* end() const { return data + numel(); }
};

}  // namespace hymba
