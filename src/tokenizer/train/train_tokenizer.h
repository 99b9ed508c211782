// Training a tokenizer of any kind on a corpus's documents: the one entry
// point (`hymba tokenizer train`, `hymba train`, the suites), which hands
// each kind to its trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace hymba {

// The kind and size (and, for sentencepiece's kinds, the sample and threads:
// tokenizer/sentencepiece_tokenizer.h), plus the settings of HF's trainers.
struct TokenizerTrainOptions : SentencePieceTrainOptions {
  // kind byte-level-bpe (tokenizer/train/bpe_trainer.h), trained on the whole corpus:
  // BpeTrainer's min_frequency, and the corpus's bytes only as the alphabet
  // (HF's BpeTrainer, seed 001) instead of all 256.
  uint64_t min_frequency = 2;
  bool corpus_alphabet = false;
  // kind hf-unigram (tokenizer/train/unigram_trainer.h) is trained on the whole corpus
  // too, with seed 002's special tokens <|pad|>, <|bos|>, <|eos|>.
};

// Trains a sentencepiece model on the documents (kind bpe or unigram; byte
// needs no training and returns make_byte_tokenizer(); byte-level-bpe and
// hf-unigram train Hugging Face's algorithms into a tokenizer.json). sentencepiece
// models use pad 0, unk 1, bos 2, eos 3, byte fallback and the identity
// normalisation, so decode(encode(x)) == x for any bytes x. Errors about the
// vocabulary size name --vocab-size.
std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<std::string>& documents,
                                           const TokenizerTrainOptions& opt);

}  // namespace hymba
