#include "tokenizer/hf/added_tokens.h"

#include <algorithm>

#include "tokenizer/hf/normalizers.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token) {
  empty = false;
  first[static_cast<unsigned char>(s[0])] = true;
  int32_t node = 0;
  for (unsigned char b : s) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
    auto it = edges.find(key);
    if (it == edges.end()) {
      const auto next = static_cast<int32_t>(nodes.size());
      nodes.push_back({});
      it = edges.emplace(key, next).first;
    }
    node = it->second;
  }
  nodes[static_cast<size_t>(node)].token = token;
}

int32_t AddedVocabulary::Trie::longest_at(std::string_view text, size_t at, size_t& end) const {
  if (!first[static_cast<unsigned char>(text[at])]) return -1;
  int32_t node = 0, found = -1;
  for (size_t k = at; k < text.size(); ++k) {
    auto it = edges.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[k]));
    if (it == edges.end()) break;
    node = it->second;
    if (nodes[static_cast<size_t>(node)].token >= 0) {
      found = nodes[static_cast<size_t>(node)].token;
      end = k + 1;
    }
  }
  return found;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  // A content given twice keeps its last entry, as HF's map does.
  std::unordered_map<std::string, size_t> last;
  for (size_t k = 0; k < tokens_.size(); ++k) {
    last[tokens_[k].content] = k;
    ids_[tokens_[k].content] = tokens_[k].id;
    by_id_[tokens_[k].id] = k;
    if (tokens_[k].special) special_[tokens_[k].content] = true;
  }
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const AddedToken& t = tokens_[k];
    if (t.content.empty() || last[t.content] != k) continue;
    if (t.normalized && normalizer != nullptr) {
      NormalizedString s(t.content);
      normalizer->normalize(s);
      if (s.text() != t.content) normalized_content_[t.id] = s.text();
      if (!s.text().empty()) normalized_.insert(s.text(), static_cast<int32_t>(k));
    } else if (t.normalized) {
      normalized_.insert(t.content, static_cast<int32_t>(k));
    } else {
      raw_.insert(t.content, static_cast<int32_t>(k));
    }
  }
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const std::string* AddedVocabulary::decoded(int32_t id) const {
  auto n = normalized_content_.find(id);
  if (n != normalized_content_.end()) return &n->second;
  const AddedToken* t = find(id);
  return t == nullptr ? nullptr : &t->content;
}

bool AddedVocabulary::is_special_content(const std::string& content) const { return special_.count(content) != 0; }

int32_t AddedVocabulary::id_of(std::string_view content) const {
  auto it = ids_.find(std::string(content));
  return it == ids_.end() ? -1 : it->second;
}

int32_t AddedVocabulary::first_special_id() const {
  for (const AddedToken& t : tokens_)
    if (t.special) return t.id;
  return -1;
}

int32_t AddedVocabulary::end_id() const {
  int32_t end = 0;
  for (const AddedToken& t : tokens_) end = std::max(end, t.id + 1);
  return end;
}

namespace {

bool ends_with_word(std::string_view s) {
  return !s.empty() && is_word_char(next_code_point(s, prev_char_start(s, s.size())).cp);
}
bool starts_with_word(std::string_view s) { return !s.empty() && is_word_char(next_code_point(s, 0).cp); }

}  // namespace

std::vector<AddedVocabulary::Match> AddedVocabulary::find_matches(std::string_view text, const Trie& trie) const {
  std::vector<Match> out;
  if (trie.empty) {
    out.push_back({-1, 0, text.size()});
    return out;
  }
  size_t start_offset = 0, pos = 0;
  while (pos < text.size()) {
    size_t stop = 0;
    const int32_t k = trie.longest_at(text, pos, stop);
    if (k < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(k)];
    size_t start = pos;
    pos = stop;  // the search goes on after this match even when it is not taken
    if (t.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        const size_t p = prev_char_start(text, s);
        if (!is_whitespace(next_code_point(text, p).cp)) break;
        s = p;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        const CodePoint c = next_code_point(text, stop);
        if (!is_whitespace(c.cp)) break;
        stop += c.len;
      }
      pos = stop;
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({t.id, start, stop});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({-1, start_offset, text.size()});
  return out;
}

void AddedVocabulary::split_with(PreTokenized& pieces, const Trie& trie) const {
  PreTokenized out;
  out.reserve(pieces.size());
  for (PreToken& p : pieces) {
    if (p.id >= 0 || trie.empty) {
      if (!p.text.empty()) out.push_back(std::move(p));
      continue;
    }
    for (const Match& m : find_matches(p.text.text(), trie))
      if (m.end > m.start) out.push_back({p.text.slice(m.start, m.end), m.id});
  }
  pieces = std::move(out);
}

PreTokenized AddedVocabulary::extract_and_normalize(std::string_view text, const Normalizer* normalizer) const {
  PreTokenized pieces;
  if (text.empty()) return pieces;
  pieces.push_back({NormalizedString(text), -1});
  split_with(pieces, raw_);
  if (normalizer != nullptr)
    for (PreToken& p : pieces)
      if (p.id < 0) normalizer->normalize(p.text);
  split_with(pieces, normalized_);
  return pieces;
}

}  // namespace hymba::tok

