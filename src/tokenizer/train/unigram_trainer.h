// Hugging Face's Unigram trainer (tokenizers' `UnigramTrainer`), reproduced
// step for step, and the tokenizer seed 002 trains with it:
//
//   tok = Tokenizer(Unigram())
//   tok.normalizer = Sequence([NFKC(), Lowercase()])
//   tok.pre_tokenizer = Whitespace()
//   UnigramTrainer(vocab_size=32000, special_tokens=['<|pad|>', '<|bos|>', '<|eos|>'])
//   tok.train_from_iterator(<the corpus in 1,000,000-character chunks>, trainer)
//
// The result is written as a standard `tokenizer.json` (plus a
// `tokenizer_config.json` naming its special tokens) that load_tokenizer()
// reads. See docs/tokenizers.md, "Unigram as Hugging Face trains it".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hymba {

struct UnigramTrainerOptions {
  int32_t vocab_size = 8000;  // HF's default; the result has at most this many pieces
  int32_t n_sub_iterations = 2;
  double shrinking_factor = 0.75;
  std::vector<std::string> special_tokens;  // ids 0.., score 0, before the pieces
  std::optional<std::string> unk_token;      // put first unless among special_tokens
  int32_t max_piece_length = 16;             // in characters
  int64_t seed_size = 1000000;               // seed pieces kept (characters first)
};

struct UnigramTrainResult {
  std::vector<std::pair<std::string, double>> vocab;  // id -> (piece, score)
  std::optional<int32_t> unk_id;
};

// UnigramTrainer::do_train on word counts. The words are taken in sorted
// order (HF takes them in hash-map order; only float rounding and exact ties
// can differ). Errors name `vocab_size` and the words.
UnigramTrainResult train_unigram(const std::vector<std::pair<std::string, uint64_t>>& word_counts,
                                 const UnigramTrainerOptions& opt);

// The steps of train_unigram, exposed for tests.
namespace unigram_detail {

// trainer.rs `digamma`: the series HF (and sentencepiece) use.
double digamma(double x);

// A right-maximal repeated substring (an internal node of the suffix tree of
// `text`): its characters, as code points, and how often it occurs.
struct Substring {
  std::vector<uint32_t> chars;
  uint64_t freq;
};
// esaxx's enumeration: every lcp-interval of width >= 2 of the suffix array
// of `text`, each once, in the order of the stack walk, those longer than
// `max_len` characters left out. The root (length 0) is included.
std::vector<Substring> repeated_substrings(const std::vector<uint32_t>& text, size_t max_len = SIZE_MAX);

// make_seed_sentence_pieces: characters by count (then code point)
// descending, then substrings of 2..max_piece_length characters by
// frequency * length descending; scores are log-probabilities over the seeds.
std::vector<std::pair<std::string, double>> seed_pieces(
    const std::vector<std::pair<std::string, uint64_t>>& sorted_words, const UnigramTrainerOptions& opt);

}  // namespace unigram_detail

struct HfUnigramOptions {
  int32_t vocab_size = 32000;
  std::vector<std::string> special_tokens = {"<|pad|>", "<|bos|>", "<|eos|>"};
};

// Word counts as seed 002's tokenizer feeds them: each sequence normalized
// (NFKC, then Lowercase) and split by HF's Whitespace pre-tokenizer
// (\w+|[^\w\s]+); invalid UTF-8 becomes U+FFFD. Words over 8,192 bytes are
// counted as 8,192-byte pieces (cut at character boundaries), so a huge line
// with no spaces trains in bounded memory.
std::vector<std::pair<std::string, uint64_t>> hf_unigram_word_counts(const std::vector<std::string>& sequences);

// The sequences seed 002 feeds: each document cut into chunks of 1,000,000
// characters (its batch_iter over the corpus).
std::vector<std::string> hf_unigram_sequences(const std::vector<std::string>& documents);

// hf_unigram_word_counts, then train_unigram with the options. When the
// corpus supports fewer pieces than asked, the result is smaller (as HF's)
// and one line on stderr says so.
UnigramTrainResult train_hf_unigram(const std::vector<std::string>& sequences, const HfUnigramOptions& opt);

// The tokenizer.json HF saves for it: the special tokens as added tokens,
// normalizer Sequence[NFKC, Lowercase], pre-tokenizer Whitespace, the
// seed's TemplateProcessing ("<bos> $A <eos>", with special_tokens[1] and
// [2]; none with fewer than three), no decoder (HF then joins decoded tokens
// with spaces), model Unigram with unk_id null (the seed sets no unk token).
std::string hf_unigram_tokenizer_json(const UnigramTrainResult& r, const HfUnigramOptions& opt);

// The tokenizer_config.json naming pad, bos, eos = special_tokens[0..2].
std::string hf_unigram_tokenizer_config(const HfUnigramOptions& opt);

// hf_unigram_sequences, train_hf_unigram, then the tokenizer of its
// tokenizer.json and tokenizer_config.json. Errors name `vocab_size`.
std::unique_ptr<Tokenizer> train_hf_unigram_tokenizer(const std::vector<std::string>& documents,
                                                       const HfUnigramOptions& opt);

}  // namespace hymba
