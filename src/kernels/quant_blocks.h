// The q8 and q4 block formats (GGUF's Q8_0 and Q4_0, byte for byte): what
// the fast kernels (kernels/cpu/quant_q8.h, quant_q4.h) and their plain
// references (kernels/reference/quant_q8.h, quant_q4.h) both read and write,
// here so that a reference depends on no fast kernel's header. The types
// keep the namespace of the kernels that introduced them.
#pragma once

#include <cstdint>

namespace hymba::cpu {

// q8: each run of 32 values is stored as 32 signed bytes in [-127, 127] and
// one binary16 scale, 34 bytes per 32 weights (1.0625 bytes per weight
// against float32's 4). A row of C values takes ceil(C / 32) blocks; a
// ragged last block is zero-padded.
inline constexpr int64_t kQ8BlockSize = 32;

struct BlockQ8 {
  uint16_t scale;  // binary16: value = scale * q
  int8_t q[kQ8BlockSize];
};
static_assert(sizeof(BlockQ8) == 34, "BlockQ8 must be packed: 2 + 32 bytes");

inline int64_t q8_blocks_per_row(int64_t C) { return (C + kQ8BlockSize - 1) / kQ8BlockSize; }

// q4: each run of 32 values is stored as one binary16 scale d and 16 bytes
// of 4-bit codes, 18 bytes per 32 weights (0.5625 bytes per weight). Byte j
// holds element j in its low nibble and element j + 16 in its high nibble;
// a code q stands for (q - 8) * d. A row of C values takes ceil(C / 32)
// blocks; a ragged last block is padded with zeros (code 8).
inline constexpr int64_t kQ4BlockSize = 32;

struct BlockQ4 {
  uint16_t scale;                  // binary16 d: value = (code - 8) * d
  uint8_t q[kQ4BlockSize / 2];     // low nibble: element j, high nibble: element j + 16
};
static_assert(sizeof(BlockQ4) == 18, "BlockQ4 must be packed: 2 + 16 bytes");

inline int64_t q4_blocks_per_row(int64_t C) { return (C + kQ4BlockSize - 1) / kQ4BlockSize; }

}  // namespace hymba::cpu
