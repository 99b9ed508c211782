// tokenizer.json normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, BertNormalizer, ByteLevel and Sequence,
// with HF `tokenizers`' semantics (src/normalizers/*.rs).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/hf/normalized.h"

namespace hymba::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedString& s) const = 0;
};

// `where` names the field in errors ("tok.json: field 'normalizer'"); an
// unsupported type is refused with its full name.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& where, int depth = 0);

}  // namespace hymba::tok
