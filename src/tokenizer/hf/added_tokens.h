// tokenizer.json's added_tokens as HF's AddedVocabulary handles them: tokens
// cut out of the text before the model runs (those with normalized: false on
// the raw text, the others after the normalizer), leftmost-longest, honouring
// single_word, lstrip and rstrip. Matching walks a byte trie from each
// position (one table lookup where no token can start), so many added tokens
// (Llama-3 has 256) cost no more than a few.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/hf/normalized.h"

namespace hymba::tok {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // Builds the matchers; `normalizer` (may be null) gives the normalized
  // form that normalized tokens are searched for.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  bool empty() const { return tokens_.empty(); }
  const AddedToken* find(int32_t id) const;
  // What the id decodes to (the normalized content for normalized tokens, as HF).
  const std::string* decoded(int32_t id) const;
  bool is_special_content(const std::string& content) const;
  int32_t id_of(std::string_view content) const;  // -1 when not an added token
  int32_t end_id() const;  // max id + 1 (0 when empty)
  int32_t first_special_id() const;

  // Text -> pieces, normalized between the added tokens (HF's extract_and_normalize).
  PreTokenized extract_and_normalize(std::string_view text, const Normalizer* normalizer) const;

 private:
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_ of the token ending here
    };
    std::vector<Node> nodes{Node{}};
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
    std::array<bool, 256> first{};                // bytes a token can start with
    bool empty = true;
    void insert(std::string_view s, int32_t token);
    // The longest token starting at `at`, or -1.
    int32_t longest_at(std::string_view text, size_t at, size_t& end) const;
  };
  struct Match {
    int32_t id;  // -1: text between tokens
    size_t start, end;
  };
  std::vector<Match> find_matches(std::string_view text, const Trie& trie) const;
  void split_with(PreTokenized& pieces, const Trie& trie) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<int32_t, std::string> normalized_content_;
  std::unordered_map<std::string, bool> special_;
  std::unordered_map<std::string, int32_t> ids_;  // content -> id
  Trie raw_, normalized_;
};

}  // namespace hymba::tok
