// The tokenised dataset built from a corpus (data/corpus.h): train and
// validation splits (a published test split too), cut as the recipe's
// data_split says. Tokens are cached next to the data (or in a cache dir),
// memory-mapped on later runs and rebuilt when the source or the tokenizer
// changes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "data/corpus.h"
#include "tokenizer/tokenizer.h"

namespace hymba {

// How the training stream is split (recipe key data_split).
//   kBlocks: blocks of block_tokens, a seeded share held out (a published
//     dataset uses its own valid split instead); training samples windows.
//   kChunksShuffled: the train split cut into chunks of chunk_tokens, shuffled
//     once by split_seed, the last val_fraction held out (data/chunk_split.h;
//     seeds 001 and 002). The splits then hold whole windows of
//     chunk_tokens + 1 tokens (window_stride()).
enum class DataSplit { kBlocks, kChunksShuffled };
const char* to_string(DataSplit split);  // "blocks", "chunks-shuffled"
DataSplit parse_data_split(const std::string& name, const std::string& where);

struct DatasetOptions {
  double val_fraction = 0.1;  // share of blocks (or chunks) held out for validation
  uint64_t split_seed = 0;    // which blocks are held out
  int64_t block_tokens = 256; // split granularity
  DataSplit split = DataSplit::kBlocks;
  int64_t chunk_tokens = 256;   // kChunksShuffled: inputs per chunk (the run's seq_len)
  bool chunk_last_eos = false;  // kChunksShuffled: each chunk's last target is eos (seed 002)
  bool with_test = false;       // also read a published test split (test())
  std::string cache_dir;      // empty: next to the data (or a user cache dir when not writable)
};

class TokenDataset {
 public:
  static TokenDataset build(const std::string& spec, const Tokenizer& tok, const DatasetOptions& opt);
  std::span<const int32_t> train() const;
  std::span<const int32_t> val() const;
  std::span<const int32_t> test() const;  // empty unless with_test
  // 0: train/val are token streams; else they hold whole windows of this
  // many tokens (chunk_tokens + 1) back to back (DataSplit::kChunksShuffled).
  int64_t window_stride() const;
  // For messages: where the (train) tokens came from and whether every split
  // read came from its cache.
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

}  // namespace hymba
