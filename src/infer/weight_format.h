// The weight format the decoder runs its linear layers in (issue 19): f32,
// or q8 blocks (kernels/cpu/quant_q8.h). q8 covers every projection and FFN
// matrix a decode step multiplies by; the embedding, the norms, the Mamba
// conv / A / D / dt bias and the output head stay in float32, and so does the
// prefill (one full forward in float32). docs/inference.md has the figures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "kernels/cpu/quant_q8.h"

namespace hymba::infer {

enum class WeightFormat { kF32, kQ8 };

// "f32" or "q8"; nullopt for anything else.
std::optional<WeightFormat> parse_weight_format(std::string_view name);
const char* to_string(WeightFormat format);

// The decoder's linear layers in one weight format. f32 is the plain
// product; q8 quantizes each weight matrix the first time a step uses it and
// keeps it for the decoder's life (the float32 weights stay resident too).
class DecoderLinears {
 public:
  explicit DecoderLinears(WeightFormat format) : format_(format) {}
  WeightFormat format() const { return format_; }

  // out[rows, OC] = in[rows, C] @ w[OC, C]^T (row strides ld_out, ld_in).
  void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
              int64_t OC);
  // Bytes of quantized weights made so far.
  int64_t quantized_bytes() const { return quantized_bytes_; }

 private:
  WeightFormat format_;
  std::map<std::tuple<const float*, int64_t, int64_t>, std::vector<cpu::BlockQ8>> q8_;  // (w, OC, C) -> blocks
  int64_t quantized_bytes_ = 0;
};

}  // namespace hymba::infer
