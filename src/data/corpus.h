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
// Where Debian's fortunes-min package (scripts/setup.sh) puts the data files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// The documents of a corpus, in a deterministic order. Errors name the file
// (and line for JSONL): missing/unreadable, empty, invalid UTF-8, a JSONL
// line that is not an object with a string "text".
//   .txt file: one document; directory: every *.txt below it (recursive,
//   sorted by path), one document each; .jsonl: the "text" of each non-blank
//   line; "default": read_fortunes(kFortunesDir). Whitespace-only documents
//   are dropped; a leading UTF-8 byte order mark is skipped.
std::vector<std::string> read_documents(const std::string& spec);

// The fortune data files in `dir` (not *.dat / *.u8; sorted by name), split
// on lines that are exactly "%". Separate from read_documents so the
// missing-package error can be tested with any directory.
std::vector<std::string> read_fortunes(const std::string& dir);

// The files read_documents(spec) reads, in its order (paths as found: under
// the spec, or in kFortunesDir for "default"). Cheap: lists and checks paths
// without reading them; errors as read_documents for missing paths, an
// unsupported file type or a directory without .txt files.
std::vector<std::string> corpus_files(const std::string& spec);

struct DatasetOptions {
  double val_fraction = 0.1;  // share of blocks held out for validation
  uint64_t split_seed = 0;    // which blocks are held out
  int64_t block_tokens = 256; // split granularity
  std::string cache_dir;      // empty: next to the data (or a user cache dir when not writable)
};

// The token stream of a corpus, split into train and validation parts.
// Documents are joined with eos between them. The stream is cut into blocks of
// block_tokens (the last one may be shorter); a shuffle seeded by split_seed
// picks round(val_fraction * blocks) of them (at least one when
// val_fraction > 0) for validation; each split keeps the stream order.
// Tokenizer::encode is called from several OpenMP threads at once.
//
// Cache file `<data>.<16 hex of hash(tokenizer fingerprint)>.tokens` next to
// the data, or `<name>-<16 hex of hash(path)>.<...>.tokens` in cache_dir /
// $XDG_CACHE_HOME/hymba / ~/.cache/hymba (for "default" or a read-only data
// directory). Format (native little-endian), 64-byte header then the tokens:
//   char magic[8] "HYMBATOK" | u32 version | u32 header bytes (64)
//   u64 source hash (spec path, and path + size + mtime of each source file)
//   u64 tokenizer fingerprint hash | i64 token count | i32 vocab | i32 eos
//   u64 reserved (0) | u64 checksum of bytes [0, 56) and the tokens
//   int32 tokens[token count]
// A stale, truncated or corrupt cache is rebuilt (loaded_from_cache() false).
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

// Random training windows: row b of step s starts at an offset drawn from
// Rng(seed).split(s).split(b), uniform in [0, n - T - 1], so any step can be
// regenerated (resume needs only the step). ids and targets are [batch, T]
// row-major; targets are the next tokens (ids shifted by one). The tokens
// must outlive the sampler. Errors name batch / seq_len.
class BatchSampler {
 public:
  BatchSampler(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed);
  void batch_at(int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& targets) const;
  // Steps that make one pass over the tokens on average: max(1, n / (batch*T)).
  int64_t steps_per_epoch() const;

 private:
  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t seq_len_;
  Rng rng_;
};

// The number of non-overlapping evaluation windows over a token stream
// (callers cap it themselves). Window w covers tokens [w*T, w*T + T] (T+1
// tokens: T inputs and their T next-token targets).
int64_t num_eval_windows(std::span<const int32_t> tokens, int64_t seq_len);

}  // namespace hymba
