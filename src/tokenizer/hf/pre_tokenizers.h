// tokenizer.json pre-tokenizers: ByteLevel, Split, Metaspace, Whitespace,
// WhitespaceSplit, Digits, Punctuation, BertPreTokenizer, CharDelimiterSplit
// and Sequence, with HF `tokenizers`' semantics (src/pre_tokenizers/*.rs).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/hf/normalized.h"

namespace hymba::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) every piece that is not already a token.
  virtual void pre_tokenize(PreTokenized& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where, int depth = 0);

// GPT-2's split pattern (ByteLevel's use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace hymba::tok
