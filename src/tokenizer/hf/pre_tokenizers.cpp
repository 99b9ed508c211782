#include "tokenizer/hf/pre_tokenizers.h"

#include <nlohmann/json.hpp>

#include <vector>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

// Replaces each piece that is not yet a token by what split(piece) returns.
template <typename SplitFn>
void split_pieces(PreTokenized& pieces, SplitFn&& split) {
  PreTokenized out;
  out.reserve(pieces.size());
  for (PreToken& p : pieces) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    for (NormalizedString& s : split(p.text))
      if (!s.empty()) out.push_back({std::move(s), -1});
  }
  pieces = std::move(out);
}

class SplitByPattern final : public PreTokenizer {
 public:
  SplitByPattern(std::unique_ptr<Pattern> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokenized& pieces) const override {
    split_pieces(pieces, [&](const NormalizedString& s) {
      Pieces m = pattern_->find_matches(s.text());
      return split_normalized(s, invert_ ? invert(std::move(m)) : m, behavior_);
    });
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = make_regex_pattern(kGpt2Pattern, where);
  }
  void pre_tokenize(PreTokenized& pieces) const override {
    split_pieces(pieces, [&](const NormalizedString& s) {
      NormalizedString t = s;
      if (add_prefix_space_ && t.text().front() != ' ') {
        NormalizedBuilder b(s);
        b.put(" ", 0, 0);
        b.keep(0, s.size());
        t = b.finish();
      }
      if (!regex_) return std::vector<NormalizedString>{std::move(t)};
      return split_normalized(t, regex_->find_matches(t.text()), SplitBehavior::kIsolated);
    });
    for (PreToken& p : pieces) {
      if (p.id >= 0) continue;
      // Each byte becomes its printable character.
      NormalizedBuilder b(p.text);
      const std::string& t = p.text.text();
      std::string mapped;
      for (size_t i = 0; i < t.size();) {
        const size_t len = char_len(t, i);
        mapped.clear();
        for (size_t k = 0; k < len; ++k) mapped += byte_level_char(static_cast<unsigned char>(t[i + k]));
        b.put(mapped, i, i + len);
        i += len;
      }
      p.text = b.finish();
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> regex_;
};

enum class PrependScheme { kFirst, kAlways, kNever };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split), spaces_(make_literal_pattern(" ")),
        marks_(make_literal_pattern(replacement_)) {}
  void pre_tokenize(PreTokenized& pieces) const override {
    split_pieces(pieces, [&](const NormalizedString& s) {
      NormalizedBuilder b(s);
      const bool starts = s.text().compare(0, replacement_.size(), replacement_) == 0 || s.text().front() == ' ';
      const bool prepend = !starts && (scheme_ == PrependScheme::kAlways ||
                                       (scheme_ == PrependScheme::kFirst && s.original_start() == 0));
      if (prepend) b.put(replacement_, 0, 0);
      for (const Piece& p : spaces_->find_matches(s.text())) {
        if (p.match) b.put(replacement_, p.start, p.end);
        else b.keep(p.start, p.end);
      }
      NormalizedString t = b.finish();
      if (!split_) return std::vector<NormalizedString>{std::move(t)};
      return split_normalized(t, marks_->find_matches(t.text()), SplitBehavior::kMergedWithNext);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Pattern> spaces_, marks_;
};

// HF's Whitespace: runs of \w, runs of [^\w\s]; whitespace dropped.
class Whitespace final : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenized& pieces) const override {
    split_pieces(pieces, [](const NormalizedString& s) {
      std::vector<NormalizedString> out;
      const std::string& t = s.text();
      size_t start = 0;
      int run = -1;  // 0 word, 1 other, 2 space
      for (size_t i = 0; i <= t.size();) {
        int cls = 3;
        size_t len = 0;
        if (i < t.size()) {
          const CodePoint c = next_code_point(t, i);
          cls = is_word_char(c.cp) ? 0 : is_whitespace(c.cp) ? 2 : 1;
          len = c.len;
        }
        if (cls != run) {
          if (run == 0 || run == 1) out.push_back(s.slice(start, i));
          start = i;
          run = cls;
        }
        if (i == t.size()) break;
        i += len;
      }
      return out;
    });
  }
};

class CharSplit final : public PreTokenizer {
 public:
  CharSplit(bool (*is_match)(uint32_t), SplitBehavior behavior)
      : pattern_(make_char_pattern(is_match)), behavior_(behavior) {}
  void pre_tokenize(PreTokenized& pieces) const override {
    split_pieces(pieces,
                 [&](const NormalizedString& s) { return split_normalized(s, pattern_->find_matches(s.text()), behavior_); });
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  SplitBehavior behavior_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokenized& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// The replacement character of a Metaspace (one character).
std::string one_char(const json& j, const char* key, const std::string& where, const std::string& def) {
  const std::string s = field_string_or(j, key, where, def);
  HYMBA_CHECK(!s.empty() && char_len(s, 0) == s.size(), sub(where, std::string(".") + key),
              " must be one character");
  return s;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where, int depth) {
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<Sequence>(sequence_parts<PreTokenizer>(j, "pretokenizers", where, depth, make_pre_tokenizer));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(field_bool(j, "add_prefix_space", where, true),
                                       field_bool(j, "use_regex", where, true), where);
  if (type == "Split") {
    const std::string behavior = field_string(j, "behavior", where);
    return std::make_unique<SplitByPattern>(pattern_from_json(field(j, "pattern", where), sub(where, ".pattern")),
                                            split_behavior_from_name(behavior, sub(where, ".behavior")),
                                            field_bool(j, "invert", where, false));
  }
  if (type == "Metaspace") {
    PrependScheme scheme = PrependScheme::kAlways;
    const std::string name = field_string_or(j, "prepend_scheme", where, "");
    if (name == "first") scheme = PrependScheme::kFirst;
    else if (name == "never") scheme = PrependScheme::kNever;
    else if (name.empty() && !field_bool(j, "add_prefix_space", where, true)) scheme = PrependScheme::kNever;
    else HYMBA_CHECK(name.empty() || name == "always", sub(where, ".prepend_scheme"), " is \"", name,
                     "\"; expected first, always or never");
    return std::make_unique<Metaspace>(one_char(j, "replacement", where, "\xE2\x96\x81"), scheme,
                                       field_bool(j, "split", where, true));
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit") return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved);
  if (type == "Digits")
    return std::make_unique<CharSplit>(is_numeric, field_bool(j, "individual_digits", where, false)
                                                       ? SplitBehavior::kIsolated
                                                       : SplitBehavior::kContiguous);
  if (type == "Punctuation") {
    const std::string behavior = field_string_or(j, "behavior", where, "Isolated");
    return std::make_unique<CharSplit>(is_punctuation, split_behavior_from_name(behavior, sub(where, ".behavior")));
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved));
    parts.push_back(std::make_unique<CharSplit>(is_punctuation, SplitBehavior::kIsolated));
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "CharDelimiterSplit") {
    const std::string d = one_char(j, "delimiter", where, "");
    return std::make_unique<SplitByPattern>(make_literal_pattern(d), SplitBehavior::kRemoved, false);
  }
  unsupported(where, type,
              "ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Digits, Punctuation, BertPreTokenizer, "
              "CharDelimiterSplit, Sequence");
}

}  // namespace hymba::tok
