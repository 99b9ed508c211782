// Hugging Face's BPE trainer (tokenizers' `BpeTrainer`), reproduced step for
// step, and the ByteLevel BPE tokenizer that seed 001 trains with it:
//
//   Tokenizer(BPE(unk_token='<unk>')), pre_tokenizer ByteLevel(add_prefix_space=False),
//   BpeTrainer(vocab_size=4096, min_frequency=2,
//              special_tokens=['<unk>', '<pad>', '<bos>', '<eos>'])
//   tokenizer.train_from_iterator([text], trainer)
//
// The result is written as a standard `tokenizer.json` (plus the
// `tokenizer_config.json` naming its special tokens) that load_tokenizer()
// reads. See docs/training.md, "Byte-level BPE as Hugging Face trains it".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hymba {

struct BpeTrainerOptions {
  int32_t vocab_size = 30000;                // HF's default; stops once the vocab has this many tokens
  uint64_t min_frequency = 0;                // a merge needs a pair seen at least this often
  std::vector<std::string> special_tokens;   // ids 0.. in this order, before the alphabet
  std::vector<std::string> initial_alphabet; // characters always in the alphabet (HF initial_alphabet)
};

struct BpeTrainResult {
  std::vector<std::string> vocab;                            // id -> token
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};

// BpeTrainer::do_train on word counts (words as UTF-8 strings; their
// characters are the initial symbols). Deterministic: the result does not
// depend on the order of `word_counts`. Ties between pairs of equal count go
// to the smaller (id, id) pair, as in HF. Errors name `vocab_size`.
BpeTrainResult train_bpe(const std::vector<std::pair<std::string, uint64_t>>& word_counts,
                         const BpeTrainerOptions& opt);

// GPT-2's byte-to-character map (HF's ByteLevel alphabet): the 256 strings,
// indexed by byte.
const std::vector<std::string>& byte_level_chars();

// HF's ByteLevel pre-tokenizer with use_regex: splits `text` with GPT-2's
// pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// through PCRE2 with Unicode properties) and maps each piece's bytes to
// byte-level characters. With `add_prefix_space` a space is put in front of
// a text that does not start with one. Bytes that are not valid UTF-8 never
// match the pattern and stay as pieces of their own.
std::vector<std::string> byte_level_pretokenize(std::string_view text, bool add_prefix_space = false);

struct ByteLevelBpeOptions {
  int32_t vocab_size = 4096;
  uint64_t min_frequency = 2;
  std::vector<std::string> special_tokens = {"<unk>", "<pad>", "<bos>", "<eos>"};
  // HF's ByteLevelBPETokenizer passes all 256 byte characters as the initial
  // alphabet, so any text encodes. Seed 001 builds its tokenizer by hand and
  // passes none: only the bytes its corpus uses get a token (others encode to
  // <unk>, in HF and in the engine's tokenizer.json loader), which leaves 256
  // minus that many more slots for merges. false follows the seed exactly (the
  // seed-001 suites use it); true, the default of `hymba tokenizer train`,
  // encodes any text without <unk>.
  bool full_byte_alphabet = true;
};

// Seed 001's trainer: each sequence (as one item of train_from_iterator) is
// pre-tokenized on its own, words are counted, then train_bpe.
BpeTrainResult train_byte_level_bpe(const std::vector<std::string>& sequences, const ByteLevelBpeOptions& opt);

// The tokenizer.json HF saves for that tokenizer (ByteLevel pre-tokenizer and
// post-processor as the seed sets them, BPE with unk_token = the first special
// token, the special tokens as added tokens) plus a ByteLevel decoder, which
// the seed leaves out (its decode would join tokens with spaces).
std::string byte_level_bpe_tokenizer_json(const BpeTrainResult& r, const ByteLevelBpeOptions& opt);

// train_byte_level_bpe, then the tokenizer of its tokenizer.json and
// tokenizer_config.json (save it with save_tokenizer_files, or save() and
// config_json()). Errors name `vocab_size`.
std::unique_ptr<Tokenizer> train_byte_level_bpe_tokenizer(const std::vector<std::string>& sequences,
                                                          const ByteLevelBpeOptions& opt);

// The tokenizer_config.json naming the special tokens of
// byte_level_bpe_tokenizer_json: unk, pad, bos, eos are special_tokens[0..3]
// where given.
std::string byte_level_bpe_tokenizer_config(const ByteLevelBpeOptions& opt);

}  // namespace hymba
