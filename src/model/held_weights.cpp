#include "model/held_weights.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/float_formats.h"
#include "kernels/cpu/matmul_bf16.h"

namespace hymba {

const char* to_string(BlockFormat format) {
  return format == BlockFormat::kBF16 ? "bf16" : format == BlockFormat::kQ4 ? "q4" : "q8";
}
const char* stored_name(BlockFormat format) {
  return format == BlockFormat::kBF16 ? "bf16" : format == BlockFormat::kQ4 ? "q4_0" : "q8_0";
}

std::optional<BlockFormat> parse_stored_block_format(std::string_view name) {
  if (name == "q8_0") return BlockFormat::kQ8;
  if (name == "q4_0") return BlockFormat::kQ4;
  if (name == "bf16") return BlockFormat::kBF16;
  return std::nullopt;
}

int64_t block_row_bytes(BlockFormat format, int64_t cols) {
  if (format == BlockFormat::kBF16) return 2 * cols;
  return format == BlockFormat::kQ4 ? cpu::q4_blocks_per_row(cols) * static_cast<int64_t>(sizeof(cpu::BlockQ4))
                                    : cpu::q8_blocks_per_row(cols) * static_cast<int64_t>(sizeof(cpu::BlockQ8));
}

int64_t first_nonfinite_scale(const HeldMatrix& m) {
  if (m.format == BlockFormat::kBF16) {
    const uint16_t* v = m.bf16();
    for (int64_t i = 0; i < m.rows * m.cols; ++i)
      if ((v[i] & 0x7f80u) == 0x7f80u) return i;  // exponent all ones: inf or NaN
    return -1;
  }
  const int64_t block_bytes =
      m.format == BlockFormat::kQ4 ? int64_t{sizeof(cpu::BlockQ4)} : int64_t{sizeof(cpu::BlockQ8)};
  const int64_t n = m.rows * (block_row_bytes(m.format, m.cols) / block_bytes);
  const auto* bytes = static_cast<const uint8_t*>(m.blocks);
  for (int64_t b = 0; b < n; ++b) {
    uint16_t scale;
    std::memcpy(&scale, bytes + b * block_bytes, 2);  // the scale leads each block
    if (!std::isfinite(f16_to_f32(scale))) return b;
  }
  return -1;
}

HeldMatrix quantize_matrix(BlockFormat format, const float* w, int64_t rows, int64_t cols) {
  HeldMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  if (format == BlockFormat::kBF16) {
    auto values = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(rows * cols));
    cpu::quantize_bf16(values->data(), w, rows, cols);
    m.blocks = values->data();
    m.owner = values;
  } else if (format == BlockFormat::kQ4) {
    auto blocks = std::make_shared<std::vector<cpu::BlockQ4>>(static_cast<size_t>(rows * cpu::q4_blocks_per_row(cols)));
    cpu::quantize_q4(blocks->data(), w, rows, cols);
    m.blocks = blocks->data();
    m.owner = blocks;
  } else {
    auto blocks = std::make_shared<std::vector<cpu::BlockQ8>>(static_cast<size_t>(rows * cpu::q8_blocks_per_row(cols)));
    cpu::quantize_q8(blocks->data(), w, rows, cols);
    m.blocks = blocks->data();
    m.owner = blocks;
  }
  return m;
}

void dequantize_matrix(const HeldMatrix& m, float* out) {
  if (m.format == BlockFormat::kBF16)
    for (int64_t i = 0; i < m.rows * m.cols; ++i) out[i] = bf16_to_f32(m.bf16()[i]);
  else if (m.format == BlockFormat::kQ4)
    cpu::dequantize_q4(out, m.q4(), m.rows, m.cols);
  else
    cpu::dequantize_q8(out, m.q8(), m.rows, m.cols);
}

}  // namespace hymba
