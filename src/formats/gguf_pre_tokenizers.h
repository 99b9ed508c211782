// The pre-tokenizers of llama.cpp's BPE vocabularies (tokenizer.ggml.pre),
// as the engine's tokenizer.json pipeline runs them (docs/gguf.md). Each
// value llama.cpp's llama-vocab.cpp maps becomes its split regexes (PCRE2,
// each an isolated split of the pieces before it), whether the pieces are
// then byte-level encoded (GPT-2's byte-to-character map) or kept as UTF-8
// with spaces written as U+2581, and whether a piece that is a whole token is
// taken before any merge (ignore_merges).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymba::gguf {

struct BpePreTokenizer {
  std::string type;                  // llama.cpp's pre-tokenizer type, e.g. "gpt2" for "mpt"
  std::vector<std::string> regexes;  // applied in order, matches and the text between them kept
  bool byte_encode = true;           // GPT-2's byte-level characters; else UTF-8, unknown characters as <0xXX>
  bool escape_whitespaces = false;   // spaces become U+2581 before the split (gemma4, sarvam-moe)
  bool ignore_merges = false;        // a piece that is a token is that token
  bool add_bos = false;              // llama.cpp's add_bos when tokenizer.ggml.add_bos_token is absent
};

// The pre-tokenizer llama.cpp gives a tokenizer.ggml.pre value ("" and
// "default": llama.cpp's default); nullopt for a value llama.cpp does not map.
std::optional<BpePreTokenizer> bpe_pre_tokenizer(std::string_view pre);

// Every tokenizer.ggml.pre value mapped, in llama.cpp's order.
std::vector<std::string> bpe_pre_tokenizer_names();

// The tokenizer.ggml.pre llama.cpp's converter gives a published
// tokenizer.json whose one split regex is `regex` (Llama-3's, Qwen2's,
// Qwen3.5's, as their files write them); nullopt for another.
std::optional<std::string> pre_of_published_regex(std::string_view regex);

}  // namespace hymba::gguf
