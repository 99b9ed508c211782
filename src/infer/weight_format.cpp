#include "infer/weight_format.h"

#include "infer/step_kernels.h"

namespace hymba::infer {

std::optional<WeightFormat> parse_weight_format(std::string_view name) {
  if (name == "f32") return WeightFormat::kF32;
  if (name == "q8") return WeightFormat::kQ8;
  return std::nullopt;
}

const char* to_string(WeightFormat format) { return format == WeightFormat::kQ8 ? "q8" : "f32"; }

void DecoderLinears::linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows,
                            int64_t C, int64_t OC) {
  if (format_ == WeightFormat::kF32) {
    infer::linear(out, ld_out, in, ld_in, w, rows, C, OC);
    return;
  }
  auto [it, added] = q8_.try_emplace({w, OC, C});
  std::vector<cpu::BlockQ8>& blocks = it->second;
  if (added) {
    blocks.resize(static_cast<size_t>(OC * cpu::q8_blocks_per_row(C)));
    cpu::quantize_q8(blocks.data(), w, OC, C);
    quantized_bytes_ += static_cast<int64_t>(blocks.size() * sizeof(cpu::BlockQ8));
  }
  cpu::matmul_q8(out, ld_out, in, ld_in, blocks.data(), nullptr, rows, C, OC);
}

}  // namespace hymba::infer
