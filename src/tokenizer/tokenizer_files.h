// Loading a tokenizer from its file (a hymba byte tokenizer, a sentencepiece
// model or an HF tokenizer.json) or from a checkpoint directory in any
// layout, with tokenizer_config.json's special-token settings.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace hymba {

// Loads a tokenizer file (by its contents, whatever its name); errors name
// the file. A tokenizer_config.json beside it sets bos/eos (add_bos_token,
// add_eos_token, bos_token, ...).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

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

// Writes the tokenizer into a checkpoint directory as its file_name(), with
// its tokenizer_config.json beside it when it has one; returns the file's path.
std::string save_tokenizer_files(const Tokenizer& tok, const std::string& dir);

// A tokenizer file, or a checkpoint directory's tokenizer (the CLI's
// --tokenizer takes either).
std::unique_ptr<Tokenizer> load_tokenizer_or_directory(const std::string& path);

}  // namespace hymba
