// Tokenizers in GGUF metadata (docs/gguf.md). Written two ways at once:
//   - tokenizer.ggml.*, the form llama.cpp reads: "gpt2" (byte-level BPE:
//     tokens, token types, merges) for ByteLevel BPE tokenizer.json files and
//     the engine's byte tokenizer, "llama" (SPM: pieces, scores, types with
//     byte fallback) for sentencepiece BPE models, "t5" (UGM: pieces, scores,
//     types, the normalizer's precompiled charsmap) for sentencepiece Unigram
//     models and the Unigram tokenizer.json files llama.cpp can run;
//     bos/eos/unk/pad ids;
//   - hymba.tokenizer.*, the engine's own tokenizer file byte for byte (and
//     its tokenizer_config.json), so the engine reads back exactly the
//     tokenizer it wrote.
// Reading prefers hymba.tokenizer.*, else builds the tokenizer from the
// tokenizer.ggml.* form: "gpt2" with any pre-tokenizer llama.cpp maps
// (formats/gguf_pre_tokenizers.h), "gemma4", "llama" (SPM), "t5" (UGM) and
// "bert" (WPM).
#pragma once

#include <string>

#include "tokenizer/tokenizer_files.h"
#include "formats/gguf.h"

namespace hymba::gguf {

// Adds the tokenizer of `source` (a checkpoint directory or a .gguf file; ""
// for none) to the writer. Returns a one-line note when llama.cpp will not
// be able to use it ("" otherwise).
std::string add_tokenizer_metadata(const std::string& source, Writer& w);

// The tokenizer a GGUF file carries; errors name the file and key. A file
// without tokenizer metadata is an error saying so.
CheckpointTokenizer tokenizer_from_gguf(const File& f);
bool has_tokenizer(const File& f);

// A checkpoint imported from a GGUF file whose tokenizer came from its
// tokenizer.ggml.* keys keeps those keys in this file (a GGUF file without
// tensors, with the fingerprint of the tokenizer built from them), so that
// export writes the same keys back while the checkpoint's tokenizer is that one.
inline constexpr const char* kGgmlVocabFile = "tokenizer.gguf";
void save_ggml_vocab(const File& f, const Tokenizer& tok, const std::string& dir);

// GPT-2's byte-to-character map of byte-level BPE (byte b as the text of its token).
std::string byte_level_char(uint8_t b);

}  // namespace hymba::gguf
