// Text corpora (--data SPEC) and the tokenised dataset built from them.
//   SPEC = a .txt file | a directory of .txt files | a .jsonl file with a
//          "text" field per line | a .json file (or a directory of them) in
//          TinyStories' JSON form | a published dataset with its own splits
//          (TinyStories-train.txt, WikiText-103 raw, PG-19:
//          data/published_corpus.h) | "default" (the built-in corpus:
//          Debian's fortunes, split into documents; no download).
// Tokens are cached next to the data (or in a cache dir), memory-mapped on
// later runs and rebuilt when the source or the tokenizer changes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/published_corpus.h"
#include "data/tokenizer.h"

namespace hymba {

inline constexpr const char* kDefaultCorpus = "default";
// Where Debian's fortunes-min package (scripts/setup.sh) puts the data files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// The documents of a corpus, in a deterministic order. Errors name the file
// (and line for JSONL): missing/unreadable, empty, invalid UTF-8, a JSONL
// line that is not an object with a string "text".
//   .txt file: one document; directory: every *.txt below it (recursive,
//   sorted by path), one document each; .jsonl: the "text" of each non-blank
//   line; .json: each item's "story"; "default": read_fortunes(kFortunesDir);
//   a published dataset: the documents of `split` (read_published_split).
//   Whitespace-only documents are dropped; a leading UTF-8 byte order mark
//   is skipped. A split other than train of a corpus that publishes none is
//   an error naming the spec.
std::vector<std::string> read_documents(const std::string& spec, CorpusSplit split = CorpusSplit::kTrain);

// Whether SPEC is a dataset that publishes its own train/valid(/test) splits.
bool has_published_splits(const std::string& spec);

// The fortune data files in `dir` (not *.dat / *.u8; sorted by name), split
// on lines that are exactly "%". Separate from read_documents so the
// missing-package error can be tested with any directory.
std::vector<std::string> read_fortunes(const std::string& dir);

// The files read_documents(spec, split) reads, in its order (paths as found:
// under the spec, or in kFortunesDir for "default"). Cheap: lists and checks
// paths without reading them; errors as read_documents for missing paths, an
// unsupported file type, a directory without .txt files or a split the
// corpus does not publish.
std::vector<std::string> corpus_files(const std::string& spec, CorpusSplit split = CorpusSplit::kTrain);

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

// Training batches, drawn so any step can be regenerated (resume needs only
// the step). ids and targets are [batch, T] row-major; targets are the next
// tokens (ids shifted by one). The tokens must outlive the sampler. Errors
// name batch / seq_len.
//   Random windows (the constructor): row b of draw s starts at an offset
//     drawn from Rng(seed).split(s).split(b), uniform in [0, n - T - 1].
//   Epochs (epochs()): the windows of T + 1 tokens at `stride` (T: a stream
//     cut as evaluation cuts it; T + 1: whole chunks) are shuffled anew each
//     epoch by Rng(seed).split(epoch) and taken `batch` at a time; the last
//     partial batch is dropped (a DataLoader with shuffle and drop_last), so
//     an epoch is floor(windows / batch) draws.
class BatchSampler {
 public:
  BatchSampler(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed);
  static BatchSampler epochs(std::span<const int32_t> tokens, int64_t stride, int64_t batch, int64_t seq_len,
                             uint64_t seed);
  // Not thread-safe in epochs mode: the current epoch's order is kept.
  void batch_at(int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& targets) const;
  // Draws that make one pass over the tokens: random windows max(1, n /
  // (batch*T)) on average; epochs exactly floor(windows / batch).
  int64_t steps_per_epoch() const;
  bool by_epochs() const { return stride_ > 0; }

 private:
  const std::vector<int64_t>& epoch_order(int64_t epoch) const;

  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t seq_len_;
  Rng rng_;
  int64_t stride_ = 0;  // > 0: epochs mode
  int64_t windows_ = 0;
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

// The number of non-overlapping evaluation windows over a token stream
// (callers cap it themselves). Window w covers tokens [w*S, w*S + T] (T+1
// tokens: T inputs and their T next-token targets) with S = stride, or T
// when stride is 0 (T + 1 for whole chunks back to back).
int64_t num_eval_windows(std::span<const int32_t> tokens, int64_t seq_len, int64_t stride = 0);

}  // namespace hymba
