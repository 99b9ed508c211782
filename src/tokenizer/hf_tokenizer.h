// Hugging Face `tokenizer.json` files: BPE (byte-level as GPT-2 / Llama-3 /
// Qwen, or with byte_fallback and Metaspace as Llama-2 / Gemma / Hymba-1.5B),
// Unigram, WordPiece and WordLevel, through the pipeline of
// tokenizer/hf/ (normalizers, pre-tokenizers, model, post-processor,
// decoders). See docs/tokenizers.md.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace hymba {

// Parses a tokenizer.json (its text in `contents`); special tokens (bos, eos,
// pad, unk) come from a tokenizer_config.json beside it when there is one.
// Errors name the file and the field; an unsupported component is named in full.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path, const std::string& contents);

// The same from text in memory: a tokenizer.json and its tokenizer_config.json
// ("" for none); errors name `name`.
std::unique_ptr<Tokenizer> make_hf_tokenizer_json(const std::string& name, std::string contents, std::string config);

}  // namespace hymba
