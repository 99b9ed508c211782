// The tokenizer interface and the byte-level tokenizer. Implementations:
// sentencepiece models (tokenizer/sentencepiece_tokenizer.h, trained as the seed
// notebooks train theirs) and HF tokenizer.json pipelines
// (tokenizer/hf_tokenizer.h); tokenizer/tokenizer_files.h loads any of them from a file
// or a checkpoint directory. See docs/tokenizers.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hymba {

inline constexpr const char* kTokenizerFile = "tokenizer.model";

// kByteLevelBpe: Hugging Face's ByteLevel BPE as seed 001 trains it
// (tokenizer/train/bpe_trainer.h), kept as a tokenizer.json; once loaded it is an HF
// tokenizer of kind kBpe. kHfUnigram: Hugging Face's Unigram with NFKC +
// Lowercase and Whitespace as seed 002 trains it (tokenizer/train/unigram_trainer.h);
// once loaded it is an HF tokenizer of kind kUnigram.
enum class TokenizerKind { kByte, kBpe, kUnigram, kWordPiece, kWordLevel, kByteLevelBpe, kHfUnigram };
const char* to_string(TokenizerKind k);
// "byte" | "bpe" | "unigram" | "byte-level-bpe" | "hf-unigram" (the kinds
// hymba trains);
// errors name `what` (the flag or field given).
TokenizerKind parse_tokenizer_kind(const std::string& s, const std::string& what = "--type");

// A token's byte span in the encoded text ({0, 0} for special tokens added
// around it).
struct TokenOffsets {
  size_t begin = 0, end = 0;
};
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<TokenOffsets> offsets;  // one per id
};

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
  // encode() with the special tokens the tokenizer adds around a text when
  // `add_special_tokens` (HF post-processor, or bos/eos as the model and
  // tokenizer_config.json say), and each token's span in `text`.
  virtual Encoding encode_full(std::string_view text, bool add_special_tokens) const;
  // Ids back to text as the reference library gives it (HF tokenizer.json
  // decoders turn invalid UTF-8 into U+FFFD); with `skip_special_tokens`
  // false, special tokens decode to their text.
  virtual std::string decode_full(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual int32_t unk_id() const = 0;  // -1 when the tokenizer has none
  // Identifies the exact model (kind + contents), for cache invalidation.
  virtual std::string fingerprint() const = 0;
  // Writes the tokenizer file atomically.
  virtual void save(const std::string& path) const = 0;
  // The name its file takes in a checkpoint directory: tokenizer.model (a
  // hymba byte tokenizer or a sentencepiece model) or tokenizer.json.
  virtual const char* file_name() const { return kTokenizerFile; }
  // The tokenizer_config.json it was loaded or trained with (its special
  // tokens), to be written beside the file; "" when it has none.
  virtual std::string config_json() const { return ""; }

  // The bos/eos that encode_full adds around a text, for tokenizers whose
  // file does not say (tokenizer_config.json's add_bos_token / add_eos_token).
  void set_added_specials(bool bos, bool eos) {
    add_bos_ = bos;
    add_eos_ = eos;
  }

 protected:
  bool add_bos_ = false, add_eos_ = false;
};

// Byte-level: ids 0..255 are bytes, then pad, bos, eos (vocab 259).
std::unique_ptr<Tokenizer> make_byte_tokenizer();
// A byte tokenizer file starts with its magic line; errors name `path`.
bool is_byte_tokenizer_file(std::string_view contents);
std::unique_ptr<Tokenizer> load_byte_tokenizer(const std::string& path, std::string_view contents);

// "<kind>:<hash of contents>", the fingerprint of a tokenizer file.
std::string tokenizer_fingerprint(TokenizerKind kind, std::string_view contents);
[[noreturn]] void fail_id_out_of_range(int32_t id, TokenizerKind kind, int32_t vocab);

}  // namespace hymba
