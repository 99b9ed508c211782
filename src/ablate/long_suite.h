// Seed 003's round 3 ("long sequences"), the `seed-003-long` suite: its
// Transformer, Mamba and Hymba trained at growing T. The seed planned to
// lower the batch as T grows (batch 2 at 1024, batch 1 + accumulation at
// 2048 on its 4 GB GPU), keeping round 1's work per step: the rows hold
// round 1's 16 x 256 = 4,096 tokens per optimizer step (batch = 4096 / T)
// unless --batch fixes the batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/memory_estimate.h"

namespace hymba::ablate {

inline constexpr int64_t kLongSeqTokensPerStep = 16 * 256;  // round 1's batch x T
inline constexpr int64_t kLongSeqEvalTokens = 64 * 256;     // round 1's validation windows x T

// 256, 512, 1024, 2048, 4096: the seed's lengths and the next one.
const std::vector<int64_t>& long_seq_default_lengths();

// Sequences per step at T: tokens_per_step / T, at least one.
int64_t long_seq_batch(int64_t seq_len, int64_t tokens_per_step = kLongSeqTokensPerStep);
// Validation windows at T holding round 1's validation tokens, at least one.
int64_t long_seq_eval_windows(int64_t seq_len);

// --seq-lens: strictly ascending, each in [2, 2^20]; the error names the flag.
void check_seq_lens(const std::vector<int64_t>& seq_lens);

// Why a row is skipped: its estimated training memory (`need`) exceeds
// `available` bytes (available_memory_bytes(): -1 = unknown, never skips).
std::optional<std::string> memory_skip_reason(const MemoryEstimate& need, int64_t available);

}  // namespace hymba::ablate
