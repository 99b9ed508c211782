#include "tokenizer/train/train_tokenizer.h"

#include "core/error.h"
#include "tokenizer/train/bpe_trainer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/unigram_trainer.h"

namespace hymba {

std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<std::string>& documents,
                                           const TokenizerTrainOptions& opt) {
  if (opt.kind == TokenizerKind::kByte) return make_byte_tokenizer();
  if (opt.kind == TokenizerKind::kByteLevelBpe) {
    ByteLevelBpeOptions b;
    b.vocab_size = opt.vocab_size;
    b.min_frequency = opt.min_frequency;
    b.full_byte_alphabet = !opt.corpus_alphabet;
    return train_byte_level_bpe_tokenizer(documents, b);
  }
  if (opt.kind == TokenizerKind::kHfUnigram) {
    HfUnigramOptions u;
    u.vocab_size = opt.vocab_size;
    try {
      return train_hf_unigram_tokenizer(documents, u);
    } catch (const Error& e) {
      const std::string msg = e.what();  // the trainer names vocab_size; callers know it as --vocab-size
      if (msg.rfind("vocab_size", 0) == 0) fail("--vocab-size", msg.substr(10));
      throw;
    }
  }
  return train_sentencepiece_tokenizer(documents, opt);
}

}  // namespace hymba
