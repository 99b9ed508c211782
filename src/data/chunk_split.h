// Chunked splits as the seed notebooks cut them (recipe key data_split
// "chunks-shuffled"): the token stream cut into fixed chunks, the chunks
// shuffled once and the last share held out for validation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hymba {

// Each chunk is stored as a window of chunk_tokens + 1 tokens: chunk_tokens
// inputs, and the last token is the target of the last input.
//   last_target < 0 (seed 001): chunk c is tokens [c*T, c*T + T], so its
//     targets are the next tokens; floor((n - 1) / T) chunks.
//   last_target >= 0 (seed 002's EOS): chunk c is tokens [c*T, c*T + T)
//     followed by last_target; floor(n / T) chunks.
// A seeded Fisher-Yates shuffle (Rng(seed)) orders the chunks; the first
// floor((1 - val_fraction) * chunks) train, the rest validate (PyTorch's
// random_split with sizes [int(0.9 n), n - int(0.9 n)]). Errors name
// seq_len / val_fraction when either side would be empty.
struct ChunkSplit {
  std::vector<int32_t> train, val;  // whole windows of chunk_tokens + 1, in shuffled order
  int64_t train_chunks = 0, val_chunks = 0;
};
ChunkSplit split_chunks(std::span<const int32_t> stream, int64_t chunk_tokens, double val_fraction, uint64_t seed,
                        int32_t last_target);

}  // namespace hymba
