// tokenizer.json post-processors for one sequence: TemplateProcessing (its
// "single" template), BertProcessing, RobertaProcessing, ByteLevel (offset
// trimming) and Sequence, as HF `tokenizers` applies them with
// add_special_tokens (src/processors/*.rs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hymba::tok {

struct TokenSpan {
  size_t start = 0, end = 0;  // bytes of the caller's text
};

// Tokens of one text on their way out: ids, offsets and (for offset
// trimming) the vocabulary piece of each.
struct EncodedText {
  std::vector<int32_t> ids;
  std::vector<TokenSpan> offsets;
  std::vector<std::string> pieces;
  std::vector<bool> special;  // added by a post-processor
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(EncodedText& e, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j, const std::string& where, int depth = 0);

// ByteLevel's offset trimming: leading/trailing spaces (and Ġ) of each token
// leave its span.
void trim_byte_level_offsets(EncodedText& e, bool add_prefix_space);

}  // namespace hymba::tok
