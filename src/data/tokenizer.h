// Tokenizers: byte-level (no training) and sentencepiece BPE / Unigram (trained
// with the sentencepiece library, as the seed notebooks train theirs). One
// file, `tokenizer.model`, travels in every checkpoint directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hymba {

inline constexpr const char* kTokenizerFile = "tokenizer.model";

enum class TokenizerKind { kByte, kBpe, kUnigram };
const char* to_string(TokenizerKind k);
// "byte" | "bpe" | "unigram"; errors name `what` (the flag or field given).
TokenizerKind parse_tokenizer_kind(const std::string& s, const std::string& what = "--type");

// encode and decode are const and safe to call from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual TokenizerKind kind() const = 0;
  virtual int32_t vocab_size() const = 0;
  // Plain text to ids, no bos/eos added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids back to text; special tokens decode to nothing, bytes that are not
  // valid UTF-8 on their own are kept as they are.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual int32_t unk_id() const = 0;  // -1 when the tokenizer has none
  // Identifies the exact model (kind + contents), for cache invalidation.
  virtual std::string fingerprint() const = 0;
  // Writes the tokenizer file atomically.
  virtual void save(const std::string& path) const = 0;
};

// Byte-level: ids 0..255 are bytes, then pad, bos, eos (vocab 259).
std::unique_ptr<Tokenizer> make_byte_tokenizer();

struct TokenizerTrainOptions {
  TokenizerKind kind = TokenizerKind::kBpe;
  int32_t vocab_size = 4096;  // including the 4 special and 256 byte pieces
  uint64_t seed = 0;          // picks the documents kept when sampling (below)
  // sentencepiece worker threads. Unigram's result depends on the count (it
  // sums per-thread statistics), so 0 means a fixed 16 on every machine and
  // the same corpus gives the same model everywhere.
  int threads = 0;
  // Corpora with more text than this are trained on a seeded random sample
  // (whole documents, or blocks of ~1/64 of this size from large ones),
  // which keeps training to seconds or minutes.
  int64_t max_train_bytes = int64_t{32} << 20;
};

// Trains a sentencepiece model on the documents (kind bpe or unigram; byte
// needs no training and returns make_byte_tokenizer()). sentencepiece
// models use pad 0, unk 1, bos 2, eos 3, byte fallback and the identity
// normalisation, so decode(encode(x)) == x for any bytes x. Errors about the
// vocabulary size name --vocab-size.
std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<std::string>& documents,
                                           const TokenizerTrainOptions& opt);

// Loads a tokenizer file written by save(); errors name the file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace hymba
