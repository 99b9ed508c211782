// sentencepiece BPE / Unigram tokenizers: trained with the sentencepiece
// library (as the seed notebooks train theirs) into `tokenizer.model`, or
// loaded from any sentencepiece model (Llama's, Hymba-1.5B's). Training of
// every kind starts at data/train_tokenizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hymba {

// sentencepiece's own training (kind bpe or unigram).
struct SentencePieceTrainOptions {
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

// A sentencepiece model trained on the documents, with pad 0, unk 1, bos 2,
// eos 3, byte fallback and the identity normalisation, so decode(encode(x))
// == x for any bytes x. Errors about the vocabulary size name --vocab-size.
std::unique_ptr<Tokenizer> train_sentencepiece_tokenizer(const std::vector<std::string>& documents,
                                                         const SentencePieceTrainOptions& opt);

// A serialized sentencepiece ModelProto; `origin` names it in errors.
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(std::string model, const std::string& origin);

}  // namespace hymba
