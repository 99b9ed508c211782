// Weight matrices a model holds in a block format instead of float32 (issues
// 19 and 24): q8 (GGUF's Q8_0) or q4 (GGUF's Q4_0) blocks, or bf16 values
// (kernels/cpu/matmul_bf16.h), loaded from a quantized checkpoint
// (`hymba quantize`) or a GGUF file without widening.
// Their float32 rows in the parameter block are never written, and the block
// is mapped lazily (core/aligned.h), so they cost no memory; only a decoder
// multiplies by them (infer/weight_format.h). Float32 work on such a model
// (training, the full-graph forward, saving as float) is refused by name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"

namespace hymba {

// kBF16: rows of bfloat16 values, no blocks (a "block" of one value).
enum class BlockFormat { kQ8, kQ4, kBF16 };

// "q8" / "q4" / "bf16"; the stored names are GGUF's ("q8_0" / "q4_0") and "bf16".
const char* to_string(BlockFormat format);
const char* stored_name(BlockFormat format);
std::optional<BlockFormat> parse_stored_block_format(std::string_view name);

// Bytes of one row of `cols` values in the format (whole blocks of 32, the
// last one zero-padded; bf16: 2 x cols).
int64_t block_row_bytes(BlockFormat format, int64_t cols);

struct HeldMatrix {
  BlockFormat format = BlockFormat::kQ8;
  int64_t rows = 0, cols = 0;
  const void* blocks = nullptr;       // rows x block_row_bytes(format, cols) bytes, the kernels' layout
  std::shared_ptr<const void> owner;  // keeps the file mapping or buffer alive
  // The blocks lie in a read-only file mapping: a reader that has copied
  // them (a decoder's repacked blocks) may drop their pages, which the file
  // gives back if they are read again.
  bool mapped = false;

  int64_t bytes() const { return rows * block_row_bytes(format, cols); }
  const cpu::BlockQ8* q8() const { return static_cast<const cpu::BlockQ8*>(blocks); }
  const cpu::BlockQ4* q4() const { return static_cast<const cpu::BlockQ4*>(blocks); }
  const uint16_t* bf16() const { return static_cast<const uint16_t*>(blocks); }
};

// The index of the first block whose binary16 scale is NaN or infinite (a
// corrupt file: it would turn a row of products into garbage), for bf16 the
// first NaN or infinite value; -1 if none.
int64_t first_nonfinite_scale(const HeldMatrix& m);

// The blocks of w [rows, cols] in `format`, in a buffer the matrix owns.
HeldMatrix quantize_matrix(BlockFormat format, const float* w, int64_t rows, int64_t cols);
// Their float32 values [rows, cols].
void dequantize_matrix(const HeldMatrix& m, float* out);

}  // namespace hymba
