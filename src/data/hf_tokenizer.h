// HF `tokenizer.json` byte-level BPE (GPT-2 / GPT-NeoX, the tokenizer of the
// Mamba models) and the tokenizer of a checkpoint directory in any layout
// (tokenizer.model or tokenizer.json, add_bos_token from tokenizer_config.json).
// See docs/import.md.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace hymba {

// Parses a tokenizer.json (its text in `contents`); special tokens (bos, eos,
// pad, unk) come from a tokenizer_config.json beside it when there is one.
// Errors name the file and the field.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path, const std::string& contents);

// The tokenizer file of a checkpoint directory: tokenizer.model (ours or a
// sentencepiece model), else tokenizer.json; "" when it has neither.
std::string checkpoint_tokenizer_path(const std::string& dir);

struct CheckpointTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string path;
  bool add_bos = false;  // tokenizer_config.json "add_bos_token": prompts start with bos
};
// Loads the directory's tokenizer; errors name the directory when it has none.
CheckpointTokenizer load_checkpoint_tokenizer(const std::string& dir);

}  // namespace hymba
