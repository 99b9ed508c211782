// Text corpora (--data SPEC) and the tokenised dataset built from them.
//   SPEC = a .txt file | a directory of .txt files | a .jsonl file with a
//          "text" field per line (TinyStories) | "default" (the built-in
//          corpus: Debian's fortunes, split into documents; no download).
// Tokens are cached next to the data (or in a cache dir), memory-mapped on
// later runs and rebuilt when the source or the tokenizer changes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/tokenizer.h"

namespace hymba {

inline constexpr const char* kDefaultCorpus = "default";

// The documents of a corpus, in a deterministic order. Errors name the file
// (and line for JSONL): missing/unreadable, empty, invalid UTF-8, a JSONL
// line that is not an object with a string "text".
std::vector<std::string> read_documents(const std::string& spec);

struct DatasetOptions {
  double val_fraction = 0.1;  // share of blocks held out for validation
  uint64_t split_seed = 0;    // which blocks are held out
  int64_t block_tokens = 256; // split granularity
  std::string cache_dir;      // empty: next to the data (or a user cache dir when not writable)
};

// The token stream of a corpus, split into train and validation parts.
// Documents are joined with eos between them.
class TokenDataset {
 public:
  static TokenDataset build(const std::string& spec, const Tokenizer& tok, const DatasetOptions& opt);
  std::span<const int32_t> train() const;
  std::span<const int32_t> val() const;
  // For messages: where the tokens came from and whether the cache was used.
  const std::string& cache_path() const;
  bool loaded_from_cache() const;
  ~TokenDataset();
  TokenDataset(TokenDataset&&) noexcept;
  TokenDataset& operator=(TokenDataset&&) noexcept;

 private:
  TokenDataset();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Random training windows: batch b of step s starts at an offset drawn from
// rng.split(s), so any step can be regenerated (resume needs only the step).
// targets are the next tokens (ids shifted by one).
class BatchSampler {
 public:
  BatchSampler(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed);
  void batch_at(int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& targets) const;
  // Steps that make one pass over the tokens on average.
  int64_t steps_per_epoch() const;
};

// Non-overlapping evaluation windows over a token stream (all of them, or the
// first max_windows). Window w covers tokens [w*T, w*T + T] (T+1 tokens).
int64_t num_eval_windows(std::span<const int32_t> tokens, int64_t seq_len);

}  // namespace hymba
