// A tokenizer.json pipeline, in HF `tokenizers`' order: added tokens cut out,
// normalizer, pre-tokenizer, model, post-processor; decoding goes through
// the decoder. Each stage lives in its own file of this folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/hf/added_tokens.h"
#include "tokenizer/hf/decoders.h"
#include "tokenizer/hf/models.h"
#include "tokenizer/hf/normalizers.h"
#include "tokenizer/hf/post_processors.h"
#include "tokenizer/hf/pre_tokenizers.h"

namespace hymba::tok {

class Pipeline {
 public:
  // `file` names the tokenizer.json in errors. Throws hymba::Error.
  Pipeline(const nlohmann::json& j, const std::string& file);

  // Ids of `text`; with `offsets`, also each token's byte span and piece.
  EncodedText encode(std::string_view text, bool add_special_tokens, bool offsets) const;
  // With `keep_bytes`, invalid UTF-8 is kept raw (see Decoder).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens, bool keep_bytes) const;

  int32_t token_to_id(std::string_view token) const;  // added tokens first, then the model; -1 if absent
  bool is_special(int32_t id) const;
  int32_t first_special_id() const;  // the first special added token in the file, -1 if none
  int32_t vocab_end() const;  // max id + 1 over model and added tokens
  const std::string& model_type() const { return model_type_; }

 private:
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<PostProcessor> post_processor_;
  AddedVocabulary added_;
  std::string model_type_;
};

}  // namespace hymba::tok
