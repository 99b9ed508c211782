// tokenizer.json decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, WordPiece, BPEDecoder and Sequence, with HF `tokenizers`'
// semantics (src/decoders/*.rs): each rewrites the list of token strings,
// which are then joined. With `keep_bytes`, bytes that are not valid UTF-8
// stay as they are instead of becoming U+FFFD (HF's behaviour): streaming
// generation needs the raw bytes of a character cut between tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hymba::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens, bool keep_bytes) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& where, int depth = 0);

}  // namespace hymba::tok
